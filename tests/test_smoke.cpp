#include <catch2/catch.hpp>
#include "tensor/create.h"
#include "tensor/ops.h"
using namespace lm;
TEST_CASE("smoke") {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = ones({3}, DType::F32);
  Tensor c = add(a, b);
  REQUIRE(c.to_vector<float>() == std::vector<float>{2, 3, 4, 5, 6, 7});
}
