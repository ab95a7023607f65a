// test_create.cpp: creation functions and the Philox RNG (tensor/create.cpp, tensor/rng.h).
#include "tests/helpers.h"

#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("create: zeros, ones, full, arange, from_vector", "[create]") {
  CHECK(values(zeros({2, 2})) == std::vector<double>{0, 0, 0, 0});
  CHECK(values(ones({3}, DType::I32)) == std::vector<double>{1, 1, 1});
  CHECK(values(full({2}, -2.5, DType::F64)) == std::vector<double>{-2.5, -2.5});
  CHECK(values(arange(5)) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(values(arange(1, 2, 0.25, DType::F64)) == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(values(arange(5, 0, -2)) == std::vector<double>{5, 3, 1});
  CHECK(arange(3, 3).numel() == 0);
  CHECK_THROWS_AS(arange(0, 1, 0), Error);
  CHECK(values(from_vector(std::vector<int32_t>{4, 5, 6}, {3, 1})) == std::vector<double>{4, 5, 6});
  CHECK_THROWS_WITH(from_vector(std::vector<float>{1, 2}, {3}), Catch::Contains("[3]"));
}

TEST_CASE("rng: Philox4x32-10 matches the published known-answer vectors", "[rng]") {
  // Random123 kat_vectors: counter 0, key 0 (our counter layout fixes the 4th word at 0, so
  // the all-ones vector of that file cannot be expressed).
  Philox4 z = philox::block(0, 0, 0);
  CHECK(z.v[0] == 0x6627e8d5u);
  CHECK(z.v[1] == 0xe169c58du);
  CHECK(z.v[2] == 0xbc57ac4cu);
  CHECK(z.v[3] == 0x9b00dbd8u);
}

TEST_CASE("rng: same seed gives the same numbers, draws advance the counter", "[rng]") {
  manual_seed(42);
  Tensor a = randn({1000});
  Tensor b = randn({1000});
  manual_seed(42);
  Tensor a2 = randn({1000});
  CHECK(values(a) == values(a2));
  CHECK(values(a) != values(b));
  // Counter-based: one draw of 2000 equals two draws of 1000 back to back.
  manual_seed(42);
  Tensor both = randn({2000});
  CHECK(values(both.narrow(0, 1000, 1000)) == values(b));
  manual_seed(43);
  CHECK(values(randn({1000})) != values(a));
}

TEST_CASE("rng: uniform and normal have the right moments", "[rng]") {
  manual_seed(7);
  const int64_t n = 200000;
  std::vector<double> u = values(rand({n}, DType::F64, Device::CPU, -1.0, 3.0));
  double mu = 0, mx = -1e9, mn = 1e9;
  for (double x : u) {
    mu += x;
    mx = std::max(mx, x);
    mn = std::min(mn, x);
  }
  mu /= n;
  CHECK(mn >= -1.0);
  CHECK(mx < 3.0);
  CHECK(std::fabs(mu - 1.0) < 0.02);  // std of the mean = (4/sqrt(12))/sqrt(n) ~ 0.0026; 0.02 is ~8 sigma
  std::vector<double> z = values(randn({n}, DType::F32, Device::CPU, 2.0, 0.5));
  double m1 = 0, m2 = 0;
  for (double x : z) m1 += x;
  m1 /= n;
  for (double x : z) m2 += (x - m1) * (x - m1);
  m2 /= n;
  CHECK(std::fabs(m1 - 2.0) < 0.01);         // std of the mean ~ 0.5/sqrt(n) ~ 0.0011
  CHECK(std::fabs(std::sqrt(m2) - 0.5) < 0.01);  // std of the sample std ~ 0.5/sqrt(2n) ~ 0.0008
  int64_t within1 = 0;
  for (double x : z) within1 += std::fabs(x - 2.0) < 0.5;
  CHECK(std::fabs(static_cast<double>(within1) / n - 0.6827) < 0.01);  // one-sigma mass
  CHECK_THROWS_AS(rand({2}, DType::I32), Error);
  CHECK_THROWS_AS(rand({2}, DType::F32, Device::CPU, 1.0, 1.0), Error);
}

TEST_CASE("rng: results do not depend on the thread count", "[rng]") {
  // Each element is a pure function of (seed, counter): the split across threads cannot matter.
  manual_seed(3);
  std::vector<double> x = values(randn({100000}));
  manual_seed(3);
  uint64_t off = rng_reserve(100000);
  CHECK(off == 0);
  for (int64_t i : {0, 1, 4999, 99999}) {
    Philox4 r = philox::block(off + i, static_cast<uint32_t>(RngStream::Normal), 3);
    CHECK(x[i] == static_cast<float>(normal_from<double>(r)));
  }
}
