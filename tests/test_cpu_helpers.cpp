// test_cpu_helpers.cpp: the CPU building blocks of inference's per-query attention
// (tensor/cpu/vec_dot.h) against plain loops, and the parallel grain (tensor/cpu/parallel.h):
// how it is read from the environment, and that the split it decides never changes a result.
#include "tests/helpers.h"

#include <cstdlib>
#include <string>

#include "nn/nn_math.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

namespace {
template <class T> std::vector<T> random_values(int64_t n, uint64_t seed) {
  manual_seed(seed);
  std::vector<double> v = values(randn({n}, DType::F64));
  return std::vector<T>(v.begin(), v.end());
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
// exactly one or two vectors, and in between (16 f32 lanes or 8 f64 lanes with AVX-512).
template <class T> void check_helpers() {
  for (int64_t HS : {2, 8, 32, 34}) {
    for (int64_t n : {1, 7, 16, 17, 33, 51, 70}) {
      INFO("HS " << HS << " n " << n);
      const int64_t ld = n + 3;  // a row stride larger than the row, as in the local keys
      std::vector<T> x = random_values<T>(HS, 1), M = random_values<T>(HS * ld, 2);
      std::vector<T> out(static_cast<size_t>(n)), want(static_cast<size_t>(n));
      // vec_times_rows: out[t] = sum_d x[d] M[d][t], summed d = 0, 1, ... as the helper promises,
      // so the plain loop must agree exactly (no contraction in this build: -ffp-contract=off).
      cpu::vec_times_rows(x.data(), M.data(), HS, ld, n, out.data());
      for (int64_t t = 0; t < n; ++t) {
        T a = 0;
        for (int64_t d = 0; d < HS; ++d) a += x[d] * M[d * ld + t];
        want[t] = a;
      }
      CHECK(out == want);
      // rotated_vec_times_rows: rotate each key by nnmath::rotate_pair, then the same sum.
      const int64_t cs = n + 5, half = HS / 2;
      std::vector<T> C = random_values<T>(half * cs, 3), S = random_values<T>(half * cs, 4);
      cpu::rotated_vec_times_rows(x.data(), M.data(), HS, ld, n, C.data(), S.data(), cs, out.data());
      for (int64_t t = 0; t < n; ++t) {
        T a = 0;
        for (int64_t i = 0; i < half; ++i) {
          T y0, y1;
          nnmath::rotate_pair(M[(2 * i) * ld + t], M[(2 * i + 1) * ld + t], C[i * cs + t], S[i * cs + t], y0, y1);
          a += x[2 * i] * y0;
          a += x[2 * i + 1] * y1;
        }
        want[t] = a;
      }
      CHECK(out == want);
      // weighted_row_sum: y[d] = sum_j w[j] rows[j][d] in j order, zero weights skipped (their
      // rows are NaN here: a skipped row must not leak).
      std::vector<T> w = random_values<T>(n, 5), R = random_values<T>(n * HS, 6);
      std::vector<const T*> rows(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) rows[j] = R.data() + j * HS;
      for (int64_t j = 0; j < n; j += 3) {
        w[j] = 0;
        for (int64_t d = 0; d < HS; ++d) R[j * HS + d] = std::numeric_limits<T>::quiet_NaN();
      }
      std::vector<T> y(static_cast<size_t>(HS)), ywant(static_cast<size_t>(HS), T(0));
      cpu::weighted_row_sum(w.data(), rows.data(), n, HS, y.data());
      for (int64_t j = 0; j < n; ++j)
        if (w[j] != T(0))
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
