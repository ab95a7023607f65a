// test_reduce.cpp: sum/mean/max/argmax over every dim (keepdim or not), sum_to, and the softmax
// family with its backward, all against naive loops written in the test.
#include "tests/helpers.h"

#include <limits>

#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("reductions over each dim match a naive loop", "[reduce]") {
  manual_seed(11);
  const Shape s{3, 4, 5};
  Tensor x = randn(s, DType::F64);
  std::vector<double> xv = values(x);
  for (int64_t d = 0; d < 3; ++d) {
    for (bool keep : {false, true}) {
      INFO("dim " << d << " keepdim " << keep);
      Shape os = s;
      os[d] = 1;
      std::vector<double> es(numel(os), 0), em(numel(os), -INFINITY), ea(numel(os), 0);
      for_each_index(s, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> o = i;
        o[d] = 0;
        int64_t l = linear(os, o);
        double v = xv[linear(s, i)];
        es[l] += v;
        if (v > em[l]) {
          em[l] = v;
          ea[l] = static_cast<double>(i[d]);
        }
      });
      Shape expect_shape = os;
      if (!keep) expect_shape.erase(expect_shape.begin() + d);
      Tensor ts = sum(x, d, keep), tm = mean(x, d, keep), tx = max(x, d, keep), ta = argmax(x, d, keep);
      CHECK(ts.shape() == expect_shape);
      CHECK(ta.dtype() == DType::I32);
      CHECK(max_abs_diff(ts, es) < 1e-13);  // different summation order only
      std::vector<double> emean = es;
      for (double& v : emean) v /= static_cast<double>(s[d]);
      CHECK(max_abs_diff(tm, emean) < 1e-13);
      CHECK(max_abs_diff(tx, em) == 0);
      CHECK(max_abs_diff(ta, ea) == 0);
    }
  }
  CHECK(max_abs_diff(sum(x, -1), sum(x, 2)) == 0);
}

TEST_CASE("reductions: all-elements, ties, NaN, i32, edge shapes, errors", "[reduce]") {
  Tensor x = from_vector(std::vector<float>{1, 5, 5, 2}, {4});
  CHECK(argmax(x, 0).item() == 1);  // first maximum wins
  CHECK(sum(x).item() == 13);
  CHECK(sum(x).dim() == 0);
  CHECK(mean(x).item() == 3.25);
  Tensor n = from_vector(std::vector<float>{1, NAN, 3}, {3});
  CHECK(std::isnan(max(n, 0).item()));  // NaN propagates, as in PyTorch
  CHECK(argmax(n, 0).item() == 1);
  Tensor i = from_vector(std::vector<int32_t>{3, -1, 7}, {3});
  CHECK(sum(i).item() == 9);
  CHECK(max(i, 0).item() == 7);
  CHECK(sum(zeros({2, 0}), 1).shape() == Shape{2});
  CHECK(values(sum(zeros({2, 0}), 1)) == std::vector<double>{0, 0});
  CHECK_THROWS_AS(max(zeros({2, 0}), 1), Error);
  CHECK_THROWS_AS(mean(i), Error);
  CHECK_THROWS_AS(sum(x, 1), Error);
  // f32 sums accumulate in f64: [2^24, 1, 1, ..., 1] with 2^20 ones sums to 2^24 + 2^20 exactly,
  // while an f32 accumulator would stay stuck at 2^24 (2^24 + 1 rounds back to 2^24).
  Tensor big = ones({(1 << 20) + 1});
  big.narrow(0, 0, 1).fill_(16777216.0);
  CHECK(sum(big).item() == 16777216.0 + (1 << 20));
}

TEST_CASE("sum_to is the adjoint of broadcasting", "[reduce]") {
  manual_seed(12);
  Tensor g = randn({2, 3, 4}, DType::F64);
  std::vector<double> gv = values(g);
  Tensor r = sum_to(g, {3, 1});
  REQUIRE(r.shape() == Shape{3, 1});
  for (int64_t j = 0; j < 3; ++j) {
    double e = 0;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c) e += gv[a * 12 + j * 4 + c];
    CHECK(std::fabs(values(r)[j] - e) < 1e-13);
  }
  CHECK(sum_to(g, {}).dim() == 0);
  CHECK(std::fabs(sum_to(g, {}).item() - sum(g).item()) < 1e-13);
  CHECK(sum_to(g, g.shape()).storage() == g.storage());
  CHECK_THROWS_AS(sum_to(g, {5}), Error);
}

TEST_CASE("softmax and log-softmax match the definition row by row", "[reduce]") {
  manual_seed(13);
  Tensor x = mul(randn({4, 9}, DType::F64), 5.0);
  std::vector<double> xv = values(x), ys = values(softmax(x)), yl = values(log_softmax(x));
  for (int64_t r = 0; r < 4; ++r) {
    double z = 0;
    for (int64_t j = 0; j < 9; ++j) z += std::exp(xv[r * 9 + j]);
    double total = 0;
    for (int64_t j = 0; j < 9; ++j) {
      CHECK(std::fabs(ys[r * 9 + j] - std::exp(xv[r * 9 + j]) / z) < 1e-15);
      CHECK(std::fabs(yl[r * 9 + j] - (xv[r * 9 + j] - std::log(z))) < 1e-13);
      total += ys[r * 9 + j];
    }
    CHECK(std::fabs(total - 1) < 1e-14);
  }
  // Large logits do not overflow (max subtraction); -inf entries get probability 0.
  Tensor big = from_vector(std::vector<float>{1000, 1000, -INFINITY}, {3});
  CHECK(max_abs_diff(softmax(big), {0.5, 0.5, 0}) == 0);
  // Softmax of a transposed view equals softmax of its contiguous copy.
  Tensor sq = randn({5, 5});
  CHECK(max_abs_diff(softmax(sq.transpose(0, 1)), softmax(sq.transpose(0, 1).contiguous())) == 0);
  CHECK_THROWS_AS(softmax(ones({3}, DType::I32)), Error);
}

TEST_CASE("softmax backward kernels match the Jacobian product", "[reduce]") {
  manual_seed(14);
  Tensor x = randn({3, 6}, DType::F64), g = randn({3, 6}, DType::F64);
  Tensor y = softmax(x), yl = log_softmax(x);
  std::vector<double> yv = values(y), gv = values(g);
  std::vector<double> dsoft(18), dlog(18);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < 6; ++i) {
      double a = 0, b = 0;
      for (int64_t j = 0; j < 6; ++j) {
        double yi = yv[r * 6 + i], yj = yv[r * 6 + j];
        a += gv[r * 6 + j] * yj * ((i == j) - yi);  // d softmax_j / d x_i = y_j (delta_ij - y_i)
        b += gv[r * 6 + j] * ((i == j) - yi);       // d logsoftmax_j / d x_i = delta_ij - y_i
      }
      dsoft[r * 6 + i] = a;
      dlog[r * 6 + i] = b;
    }
  CHECK(max_abs_diff(softmax_backward(y, g), dsoft) < 1e-15);
  CHECK(max_abs_diff(log_softmax_backward(yl, g), dlog) < 1e-14);
  CHECK_THROWS_AS(softmax_backward(y, zeros({3, 5}, DType::F64)), Error);
}
