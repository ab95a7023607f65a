// test_nn_ops.cpp: the fused layer norm and cross-entropy kernels against compositions of basic
// ops (their executable specifications) and hand-worked numbers.
#include "tests/helpers.h"

#include "autograd/functions.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

namespace {
// Layer norm composed from basic ops: (x - mean) / sqrt(var + eps) * w + b, biased variance.
Tensor layernorm_composed(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor mu = mean(x, -1, true);
  Tensor xc = sub(x, mu);
  Tensor var = mean(mul(xc, xc), -1, true);
  return add(mul(div(xc, sqrt(add(var, eps))), w), b);
}
}  // namespace

TEST_CASE("layernorm equals its composition, saves mean and rstd", "[nn_ops]") {
  manual_seed(41);
  Tensor x = add(mul(randn({2, 3, 16}, DType::F64), 3.0), 5.0);
  Tensor w = randn({16}, DType::F64), b = randn({16}, DType::F64);
  LayerNormResult r = layernorm(x, w, b, 1e-5);
  CHECK(max_abs_diff(r.out, layernorm_composed(x, w, b, 1e-5)) < 1e-13);
  CHECK(max_abs_diff(r.mean, mean(x, -1)) < 1e-14);
  CHECK(r.rstd.shape() == Shape{2, 3});
  // Hand-worked: x = [1, 3] -> mean 2, var 1, rstd = 1/sqrt(1 + eps).
  LayerNormResult h = layernorm(from_vector(std::vector<double>{1, 3}, {1, 2}), ones({2}, DType::F64), zeros({2}, DType::F64), 1e-5);
  double rs = 1 / std::sqrt(1 + 1e-5);
  CHECK(max_abs_diff(h.out, {-rs, rs}) < 1e-15);
  CHECK_THROWS_WITH(layernorm(x, zeros({15}, DType::F64), b), Catch::Contains("[16]"));
  CHECK_THROWS_AS(layernorm(x, w, b, 0.0), Error);
}

TEST_CASE("layernorm backward equals the composed Jacobian by finite differences", "[nn_ops]") {
  // Check dx, dw, db of the kernel against central differences of <g, layernorm(x, w, b)>.
  manual_seed(42);
  Tensor x = randn({3, 7}, DType::F64), w = randn({7}, DType::F64), b = randn({7}, DType::F64), g = randn({3, 7}, DType::F64);
  LayerNormResult r = layernorm(x, w, b);
  LayerNormGrads d = layernorm_backward(g, x, w, r.mean, r.rstd);
  auto L = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) { return sum(mul(layernorm(xx, ww, bb).out, g)).item(); };
  const double eps = 1e-6;
  auto numeric = [&](Tensor& t, int which) {
    std::vector<double> out;
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double o = p[i];
      p[i] = o + eps;
      double lp = which == 0 ? L(t, w, b) : which == 1 ? L(x, t, b) : L(x, w, t);
      p[i] = o - eps;
      double lm = which == 0 ? L(t, w, b) : which == 1 ? L(x, t, b) : L(x, w, t);
      p[i] = o;
      out.push_back((lp - lm) / (2 * eps));
    }
    return out;
  };
  // Central differences in f64 with eps 1e-6: truncation ~eps^2, rounding ~1e-16/eps -> ~1e-9.
  CHECK(max_abs_diff(d.dx, numeric(x, 0)) < 1e-8);
  CHECK(max_abs_diff(d.dw, numeric(w, 1)) < 1e-8);
  CHECK(max_abs_diff(d.db, numeric(b, 2)) < 1e-8);
}

TEST_CASE("cross_entropy equals -mean(log_softmax at target), skipping ignored rows", "[nn_ops]") {
  manual_seed(43);
  Tensor logits = mul(randn({5, 11}, DType::F64), 2.0);
  Tensor t = from_vector(std::vector<int32_t>{3, -100, 10, 0, -100}, {5});
  std::vector<double> lsm = values(log_softmax(logits));
  double expect = -(lsm[0 * 11 + 3] + lsm[2 * 11 + 10] + lsm[3 * 11 + 0]) / 3;
  CHECK(std::fabs(cross_entropy(logits, t).item() - expect) < 1e-14);
  // Hand-worked: uniform logits over V classes give log V.
  Tensor u = zeros({2, 8}, DType::F64);
  CHECK(std::fabs(cross_entropy(u, from_vector(std::vector<int32_t>{1, 7}, {2})).item() - std::log(8.0)) < 1e-15);
  // All rows ignored: loss 0, gradient 0 (not NaN).
  Tensor all_ignored = full({5}, -1.0, DType::I32);
  CHECK(cross_entropy(logits, all_ignored, -1).item() == 0);
  CHECK(max_abs_diff(cross_entropy_backward(logits, all_ignored, 1.0, -1), zeros({5, 11}, DType::F64)) == 0);
}

TEST_CASE("cross_entropy backward is (softmax - onehot) / kept rows", "[nn_ops]") {
  manual_seed(44);
  Tensor logits = randn({4, 6}, DType::F64);
  Tensor t = from_vector(std::vector<int32_t>{1, 5, -100, 0}, {4});
  Tensor d = cross_entropy_backward(logits, t, 2.0);
  std::vector<double> p = values(softmax(logits)), expect(24, 0.0);
  std::vector<int32_t> tv = t.to_vector<int32_t>();
  for (int64_t n = 0; n < 4; ++n) {
    if (tv[n] == -100) continue;
    for (int64_t v = 0; v < 6; ++v) expect[n * 6 + v] = 2.0 * (p[n * 6 + v] - (v == tv[n])) / 3.0;
  }
  CHECK(max_abs_diff(d, expect) < 1e-15);
}

// The backward that reuses the forward's row statistics must give the bits of the one that
// computes them again (the same max, the same sum in the same order), ignored rows included.
TEST_CASE("cross_entropy backward from the forward's statistics equals the plain backward, bit for bit", "[nn_ops]") {
  manual_seed(45);
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor logits = mul(randn({7, 300}, dt), 3.0);
    Tensor t = from_vector(std::vector<int32_t>{3, -100, 299, 0, 17, -100, 150}, {7});
    CrossEntropyResult r = cross_entropy_with_stats(logits, t);
    CHECK(r.kept == 5);
    CHECK(max_abs_diff(r.loss, cross_entropy(logits, t)) == 0);
    // Row 0's statistics by hand: its max, and the sum of exp(l - max) in order.
    std::vector<double> l = values(logits.narrow(0, 0, 1)), st = values(r.stats);
    double m = l[0];
    for (double x : l) m = std::max(m, x);
    CHECK(st[0] == m);
    double sum_exp = 0;
    for (double x : l) sum_exp += std::exp(x - m);
    // f64: the kernel's own operations in its order; f32: float exps, each within an ulp or two.
    CHECK(std::fabs(st[1] - sum_exp) <= (dt == DType::F64 ? 1e-15 : 1e-5) * sum_exp);
    CHECK(st[2] == 0);  // row 1 is ignored
    CHECK(st[3] == 1);
    CHECK(max_abs_diff(cross_entropy_backward(logits, t, 0.7, -100, r), cross_entropy_backward(logits, t, 0.7)) == 0);
    // Through autograd (which keeps the statistics) too.
    Var lv(logits, true);
    cross_entropy(lv, t).backward();
    CHECK(max_abs_diff(lv.grad(), cross_entropy_backward(logits, t, 1.0)) == 0);
  }
  // Statistics of another shape are refused.
  Tensor logits = randn({3, 5});
  Tensor t = from_vector(std::vector<int32_t>{0, 1, 2}, {3});
  CrossEntropyResult r = cross_entropy_with_stats(logits.narrow(0, 0, 2), t.narrow(0, 0, 2));
  CHECK_THROWS_WITH(cross_entropy_backward(logits, t, 1.0, -100, r), Catch::Contains("statistics"));
}

TEST_CASE("cross_entropy rejects bad targets and shapes", "[nn_ops]") {
  Tensor logits = zeros({2, 4});
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector(std::vector<int32_t>{0, 4}, {2})),
                    Catch::Contains("target 4") && Catch::Contains("row 1"));
  CHECK_THROWS_AS(cross_entropy(logits, from_vector(std::vector<int32_t>{0}, {1})), Error);
  CHECK_THROWS_WITH(cross_entropy_backward(logits, from_vector(std::vector<int32_t>{-3, 1}, {2}), 1.0),
                    Catch::Contains("target -3") && Catch::Contains("row 0"));
  CHECK_THROWS_AS(cross_entropy(logits, zeros({2})), Error);
  CHECK_THROWS_AS(cross_entropy(zeros({2, 4, 1}), zeros({2}, DType::I32)), Error);
}
