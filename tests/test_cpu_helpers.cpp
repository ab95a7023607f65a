// test_cpu_helpers.cpp: the CPU building blocks of inference's per-query attention
// (tensor/cpu/vec_dot.h) against plain loops, and the parallel grain (tensor/cpu/parallel.h):
// how it is read from the environment, and that the split it decides never changes a result.
#include "tests/helpers.h"

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <cstring>
#include <cmath>
#include <string>

#include "nn/nn_math.h"
#include "tensor/half.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

namespace {
template <class Scalar> std::vector<Scalar> random_values(int64_t n, uint64_t seed) {
  manual_seed(seed);
  std::vector<double> v = values(randn({n}, DType::F64));
  return std::vector<Scalar>(v.begin(), v.end());
}

// Restores one environment variable when it goes out of scope.
struct EnvGuard {
  std::string name;
  bool had;
  std::string old;
  explicit EnvGuard(const char* n) : name(n), had(std::getenv(n) != nullptr), old(had ? std::getenv(n) : "") {}
  ~EnvGuard() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

// The three helpers for one element type, sizes chosen to hit every tail: shorter than a vector,
// exactly one, two or four vectors, in between (the last vector overlapping the one before), and
// more than one group of four (16 f32 lanes or 8 f64 lanes with AVX-512; 8 and 4 with AVX2).
template <class Scalar> void check_helpers() {
  for (int64_t HS : {2, 8, 32, 34, 64}) {
    for (int64_t n : {1, 7, 16, 17, 33, 51, 64, 70, 100, 130}) {
      INFO("HS " << HS << " n " << n);
      const int64_t ld = n + 3;  // a row stride larger than the row, as in the local keys
      std::vector<Scalar> x = random_values<Scalar>(HS, 1), M = random_values<Scalar>(HS * ld, 2);
      std::vector<Scalar> out(static_cast<size_t>(n)), want(static_cast<size_t>(n));
      // vec_times_rows: out[t] = sum_d x[d] M[d][t], summed d = 0, 1, ... as the helper promises,
      // so the plain loop must agree exactly (no contraction in this build: -ffp-contract=off).
      cpu::vec_times_rows(x.data(), M.data(), HS, ld, n, out.data());
      for (int64_t t = 0; t < n; ++t) {
        Scalar a = 0;
        for (int64_t d = 0; d < HS; ++d) a += x[d] * M[d * ld + t];
        want[t] = a;
      }
      CHECK(out == want);
      // rotated_vec_times_rows: rotate each key by nnmath::rotate_pair, then the same sum.
      const int64_t cs = n + 5, half = HS / 2;
      std::vector<Scalar> C = random_values<Scalar>(half * cs, 3), S = random_values<Scalar>(half * cs, 4);
      cpu::rotated_vec_times_rows(x.data(), M.data(), HS, ld, n, C.data(), S.data(), cs, out.data());
      for (int64_t t = 0; t < n; ++t) {
        Scalar a = 0;
        for (int64_t i = 0; i < half; ++i) {
          Scalar y0, y1;
          nnmath::rotate_pair(M[(2 * i) * ld + t], M[(2 * i + 1) * ld + t], C[i * cs + t], S[i * cs + t], y0, y1);
          a += x[2 * i] * y0;
          a += x[2 * i + 1] * y1;
        }
        want[t] = a;
      }
      CHECK(out == want);
      // weighted_row_sum: y[d] = sum_j w[j] rows[j][d] in j order, zero weights skipped (their
      // rows are NaN here: a skipped row must not leak).
      std::vector<Scalar> w = random_values<Scalar>(n, 5), R = random_values<Scalar>(n * HS, 6);
      std::vector<const Scalar*> rows(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) rows[j] = R.data() + j * HS;
      for (int64_t j = 0; j < n; j += 3) {
        w[j] = 0;
        for (int64_t d = 0; d < HS; ++d) R[j * HS + d] = std::numeric_limits<Scalar>::quiet_NaN();
      }
      std::vector<Scalar> y(static_cast<size_t>(HS)), ywant(static_cast<size_t>(HS), Scalar(0));
      cpu::weighted_row_sum(w.data(), rows.data(), n, HS, y.data());
      for (int64_t j = 0; j < n; ++j)
        if (w[j] != Scalar(0))
          for (int64_t d = 0; d < HS; ++d) ywant[d] += w[j] * R[j * HS + d];
      CHECK(y == ywant);
    }
  }
}
}  // namespace

TEST_CASE("vec_dot helpers equal plain loops summed in the same order (f32, f64)", "[cpu]") {
  check_helpers<float>();
  check_helpers<double>();
}

TEST_CASE("parallel grain: read from the environment like libgomp's settings", "[cpu]") {
  EnvGuard g1("LANDMARK_PARALLEL_GRAIN"), g2("OMP_WAIT_POLICY"), g3("GOMP_SPINCOUNT");
  unsetenv("LANDMARK_PARALLEL_GRAIN");
  unsetenv("GOMP_SPINCOUNT");
  unsetenv("OMP_WAIT_POLICY");
  CHECK(cpu::default_parallel_grain() == cpu::kGrainSpinningThreads);  // libgomp's default spins
  setenv("OMP_WAIT_POLICY", "Passive", 1);
  CHECK(cpu::default_parallel_grain() == cpu::kGrainSleepingThreads);  // sleeps at once
  setenv("GOMP_SPINCOUNT", "10000", 1);
  CHECK(cpu::default_parallel_grain() == cpu::kGrainSpinningThreads);  // an explicit spin wins
  setenv("GOMP_SPINCOUNT", "0", 1);
  CHECK(cpu::default_parallel_grain() == cpu::kGrainSleepingThreads);
  setenv("LANDMARK_PARALLEL_GRAIN", "123", 1);
  CHECK(cpu::default_parallel_grain() == 123);
  for (const char* bad : {"", "12x", "0", "-5"}) {
    setenv("LANDMARK_PARALLEL_GRAIN", bad, 1);
    CHECK_THROWS_WITH(cpu::default_parallel_grain(), Catch::Contains("LANDMARK_PARALLEL_GRAIN"));
  }
  CHECK_THROWS_AS(cpu::set_parallel_grain(0), Error);
}

TEST_CASE("parallel grain: the split it decides never changes a result", "[cpu]") {
  // A matmul of a few rows (the GEMV path), a layer norm and a softmax, once with every loop on
  // one thread and once with every loop split: bit-identical.
  const int64_t saved = cpu::parallel_grain();
  manual_seed(9);
  Tensor a = randn({3, 200}), b = randn({500, 200}), x = randn({40, 300}), w = randn({300}), bias = randn({300});
  auto run = [&] { return std::vector<Tensor>{matmul(a, b, false, true), layernorm(x, w, bias).out, softmax(x)}; };
  cpu::set_parallel_grain(int64_t(1) << 40);
  std::vector<Tensor> serial = run();
  cpu::set_parallel_grain(1);
  std::vector<Tensor> split = run();
  cpu::set_parallel_grain(saved);
  for (size_t i = 0; i < serial.size(); ++i) CHECK(values(serial[i]) == values(split[i]));
}

namespace {
// A half's value from its definition, with ldexp: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals
// 2^-14 * m/1024; exponent 31 is infinity or NaN. Written apart from tensor/half.h.
double half_value(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  const double sign = s ? -1.0 : 1.0;
  if (e == 31) return m ? std::nan("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m / 1024.0, -14);
  return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}
}  // namespace

TEST_CASE("f16 conversion: every half decodes to its defined value and encodes back to itself", "[cpu]") {
  int64_t wrong = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = lm::half_to_float(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      wrong += !std::isnan(f) || !(lm::float_to_half(f) & 0x3FF) || (lm::float_to_half(f) & 0x7C00) != 0x7C00;
      continue;
    }
    wrong += static_cast<double>(f) != want;
    wrong += lm::float_to_half(f) != h;  // -0 too: the sign bit survives
  }
  CHECK(wrong == 0);
}

TEST_CASE("f16 conversion: floats round to the nearest half, ties to even, saturating at 65504", "[cpu]") {
  // The nearest half by brute force over all finite halves (ties: the even mantissa), against
  // float_to_half, for random floats across the whole range and for the edge cases by hand.
  std::vector<std::pair<double, uint16_t>> halves;  // finite halves >= 0, by value
  for (uint32_t h = 0; h < 0x7C00; ++h) halves.push_back({half_value(static_cast<uint16_t>(h)), static_cast<uint16_t>(h)});
  auto nearest = [&](float f) -> uint16_t {
    const double a = std::fabs(static_cast<double>(f));
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (a >= 65520.0) return sign | 0x7BFF;  // our choice: saturate instead of infinity
    auto it = std::lower_bound(halves.begin(), halves.end(), std::make_pair(a, uint16_t(0)));
    uint16_t best = it == halves.end() ? 0x7BFF : it->second;
    if (it != halves.begin()) {
      const auto below = *(it - 1);
      const double up = it == halves.end() ? INFINITY : it->first - a, down = a - below.first;
      if (down < up || (down == up && !(below.second & 1))) best = below.second;
    }
    return sign | best;
  };
  int64_t wrong = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint32_t bits = lm::philox::block(static_cast<uint64_t>(i), 0, 7).v[0];
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f)) continue;
    if (std::fabs(f) > 1e6f || std::fabs(f) < 1e-9f) f = std::ldexp(f, -std::ilogb(f)) * std::ldexp(1.0f, i % 44 - 27);
    wrong += lm::float_to_half(f) != nearest(f);
  }
  CHECK(wrong == 0);
  CHECK(lm::float_to_half(65504.0f) == 0x7BFF);
  CHECK(lm::float_to_half(65519.99f) == 0x7BFF);
  CHECK(lm::float_to_half(65520.0f) == 0x7BFF);   // would round to infinity: saturates
  CHECK(lm::float_to_half(-1e30f) == 0xFBFF);
  CHECK(lm::float_to_half(INFINITY) == 0x7C00);
  CHECK(std::isnan(lm::half_to_float(lm::float_to_half(std::nanf("")))));
  CHECK(lm::float_to_half(std::ldexp(1.0f, -25)) == 0);          // half of the smallest subnormal: tie to even (0)
  CHECK(lm::float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 1);
  CHECK(lm::float_to_half(std::ldexp(3.0f, -25)) == 2);          // 1.5 units: tie, to the even 2
  CHECK(lm::float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie between 1 and 1+2^-10: even (1)
  CHECK(lm::float_to_half(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);  // tie, to the even mantissa 2
  CHECK(lm::float_to_half(std::ldexp(1023.5f, -24)) == 0x0400);  // the top subnormal rounds up into the normals
}
