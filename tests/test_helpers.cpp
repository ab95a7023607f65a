// test_helpers.cpp: the comparison the other tests rely on (tests/helpers.h) must fail on a NaN or
// an infinity on either side, even when both sides agree on it.
#include "tests/helpers.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("test helpers: max_abs_diff fails on NaN and infinity, on either side", "[helpers]") {
  const Tensor a = from_vector(std::vector<double>{1.0, 2.0, 3.0}, {3});
  CHECK(max_abs_diff(a, a) == 0);
  CHECK(max_abs_diff(a, from_vector(std::vector<double>{1.0, 2.5, 3.0}, {3})) == 0.5);
  for (double bad : {NAN, INFINITY, -INFINITY}) {
    INFO("bad value " << bad);
    const Tensor b = from_vector(std::vector<double>{1.0, bad, 3.0}, {3});
    CHECK_FALSE(max_abs_diff(a, b) < 1e300);  // NaN or inf on the right
    CHECK_FALSE(max_abs_diff(b, a) < 1e300);  // on the left
    CHECK_FALSE(max_abs_diff(b, b) == 0);     // on both sides, equal bits: still a failure
    CHECK_FALSE(max_abs_diff(b, std::vector<double>{1.0, 2.0, 3.0}) < 1e300);
    CHECK_FALSE(max_abs_diff(a, std::vector<double>{1.0, bad, 3.0}) < 1e300);
  }
  // f32 values go through the same check.
  CHECK_FALSE(max_abs_diff(from_vector(std::vector<float>{NAN}, {1}), from_vector(std::vector<float>{NAN}, {1})) == 0);
}
