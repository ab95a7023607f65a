// test_index.cpp: embedding gather, its scatter-add backward and concat, against naive loops.
#include "tests/helpers.h"

#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("embedding gathers rows, backward scatter-adds repeated indices", "[index]") {
  manual_seed(31);
  Tensor w = randn({6, 4}, DType::F64);
  Tensor idx = from_vector(std::vector<int32_t>{5, 0, 5, 2, 2, 2}, {2, 3});
  Tensor out = embedding(w, idx);
  REQUIRE(out.shape() == Shape{2, 3, 4});
  std::vector<double> wv = values(w), ov = values(out);
  std::vector<int32_t> iv = idx.to_vector<int32_t>();
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t c = 0; c < 4; ++c) CHECK(ov[n * 4 + c] == wv[iv[n] * 4 + c]);

  Tensor g = randn({2, 3, 4}, DType::F64);
  std::vector<double> gv = values(g), expect(24, 0.0);
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t c = 0; c < 4; ++c) expect[iv[n] * 4 + c] += gv[n * 4 + c];
  CHECK(max_abs_diff(embedding_backward(g, idx, 6), expect) == 0);  // same order of adds: exact
}

TEST_CASE("embedding rejects bad indices and shapes with clear messages", "[index]") {
  Tensor w = zeros({5, 3});
  CHECK_THROWS_WITH(embedding(w, from_vector(std::vector<int32_t>{1, 5}, {2})),
                    Catch::Contains("index 5") && Catch::Contains("position 1"));
  CHECK_THROWS_WITH(embedding(w, from_vector(std::vector<int32_t>{-1}, {1})), Catch::Contains("index -1"));
  CHECK_THROWS_AS(embedding(w, zeros({2})), Error);       // f32 indices
  CHECK_THROWS_AS(embedding(zeros({5}), zeros({2}, DType::I32)), Error);
  CHECK_THROWS_AS(embedding_backward(zeros({2, 3}), zeros({3}, DType::I32), 5), Error);
  CHECK_THROWS_WITH(embedding_backward(zeros({2, 3}), from_vector(std::vector<int32_t>{0, 5}, {2}), 5),
                    Catch::Contains("index 5"));
  CHECK(embedding(w, zeros({0}, DType::I32)).shape() == Shape{0, 3});
}

TEST_CASE("embedding backward with many rows is deterministic and correct", "[index]") {
  manual_seed(32);
  const int64_t V = 50, C = 300, N = 2000;  // big enough for the parallel split by channel
  Tensor idx = rand({N}, DType::F64, Device::CPU, 0, V).to(DType::I32);
  Tensor g = randn({N, C});
  Tensor d1 = embedding_backward(g, idx, V), d2 = embedding_backward(g, idx, V);
  CHECK(max_abs_diff(d1, d2) == 0);
  std::vector<double> gv = values(g), expect(V * C, 0.0);
  std::vector<int32_t> iv = idx.to_vector<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) expect[iv[n] * C + c] = static_cast<float>(expect[iv[n] * C + c] + static_cast<float>(gv[n * C + c]));
  CHECK(max_abs_diff(d1, expect) == 0);  // f32 adds in position order, exactly as the loop above
}

TEST_CASE("concat joins along any dim", "[index]") {
  Tensor a = arange(0, 6, 1, DType::F32).reshape({2, 3});
  Tensor b = arange(6, 8, 1, DType::F32).reshape({2, 1});
  Tensor c = concat({a, b}, 1);
  CHECK(values(c) == std::vector<double>{0, 1, 2, 6, 3, 4, 5, 7});
  Tensor r = concat({a, a.narrow(0, 1, 1)}, 0);
  CHECK(values(r) == std::vector<double>{0, 1, 2, 3, 4, 5, 3, 4, 5});
  CHECK(values(concat({a.transpose(0, 1), b.transpose(0, 1)}, -2)) == std::vector<double>{0, 3, 1, 4, 2, 5, 6, 7});
  CHECK(concat({a, zeros({2, 0})}, 1).shape() == Shape{2, 3});
  CHECK_THROWS_WITH(concat({a, zeros({3, 1})}, 1), Catch::Contains("input 1"));
  CHECK_THROWS_AS(concat({a, zeros({2, 1}, DType::F64)}, 1), Error);
  CHECK_THROWS_AS(concat({}, 0), Error);
  CHECK_THROWS_AS(concat({a}, 2), Error);
}
