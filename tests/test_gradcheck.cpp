// test_gradcheck.cpp: every differentiable function in autograd/functions.h against central
// finite differences in f64 (autograd/gradcheck.h), plus proof that gradcheck itself can fail and
// reports where. Graph semantics (sharing, depth, errors) are in test_autograd_graph.cpp.
//
// Tolerance, used everywhere unless a check says otherwise: eps = 1e-6, pass when
// |analytic - numeric| <= 1e-7 + 1e-6 |numeric|. Budget: the truncation error of a central
// difference is eps^2 |f'''| / 6 ~ 1e-13; the rounding error is ~ulp(L) / eps ~ 1e-16 |L| / 1e-6,
// and |L| = |sum(w y)| stays below ~30 for these small inputs, so ~3e-9. Observed errors are
// 1e-10..1e-9, so 1e-7 leaves a margin of ~100 while a wrong derivative (error ~ |g| ~ 0.1..10)
// is still caught by six orders of magnitude. Functions with kinks (relu, max, maximum/minimum)
// get inputs at least 0.1 away from the kink, 1e5 times eps, so the stencil never straddles it.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

using namespace lm;

namespace {
using Vars = std::vector<Var>;

GradcheckOptions tight() {
  GradcheckOptions o;
  o.eps = 1e-6;
  o.atol = 1e-7;  // see the budget at the top of the file
  o.rtol = 1e-6;
  return o;
}

int64_t float_elements(const std::vector<Tensor>& xs) {
  int64_t n = 0;
  for (const Tensor& x : xs)
    if (is_floating(x.dtype())) n += x.numel();
  return n;
}

// The verdict used by every op test: backward agrees with finite differences on every element
// of every float input.
void expect_gradcheck(const std::string& what, const VarFunction& fn, const std::vector<Tensor>& xs) {
  GradcheckResult r = gradcheck(fn, xs, tight());
  INFO(what << ": " << r.summary());
  CHECK(r.ok);
  CHECK(r.checked == float_elements(xs));  // nothing skipped
}

Tensor normal(const Shape& s) { return randn(s, DType::F64); }
Tensor positive(const Shape& s) { return rand(s, DType::F64, Device::CPU, 0.5, 2.0); }  // for log, sqrt, 1/x

// Standard normal values pushed out of (-0.1, 0.1): for relu's kink and for differences a - b.
Tensor away_from_zero(const Shape& s) {
  std::vector<double> v = normal(s).to_vector<double>();
  for (double& x : v)
    if (std::fabs(x) < 0.1) x += x < 0 ? -0.1 : 0.1;
  return from_vector(v, s);
}

// Distinct values 0.25 apart in a scrambled order (i * 7 mod n is a permutation when gcd(7, n) = 1),
// so every max has a unique winner with a margin of 2.5e5 eps.
Tensor distinct(const Shape& s) {
  const int64_t n = numel(s);
  REQUIRE(std::gcd(n, int64_t{7}) == 1);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25 * static_cast<double>((i * 7) % n) - 0.125 * static_cast<double>(n);
  return from_vector(v, s);
}

// Operand shape for matmul: (..., rows, cols), or (..., cols, rows) when it is passed transposed.
Shape operand(Shape batch, bool trans, int64_t rows, int64_t cols) {
  batch.push_back(trans ? cols : rows);
  batch.push_back(trans ? rows : cols);
  return batch;
}
}  // namespace

// ---- elementwise ----

TEST_CASE("gradcheck: unary elementwise functions", "[autograd][gradcheck]") {
  manual_seed(1);
  const Shape s{3, 4};
  expect_gradcheck("neg", [](const Vars& v) { return neg(v[0]); }, {normal(s)});
  expect_gradcheck("exp", [](const Vars& v) { return exp(v[0]); }, {normal(s)});
  expect_gradcheck("log", [](const Vars& v) { return log(v[0]); }, {positive(s)});
  expect_gradcheck("sqrt", [](const Vars& v) { return sqrt(v[0]); }, {positive(s)});
  expect_gradcheck("tanh", [](const Vars& v) { return tanh(v[0]); }, {normal(s)});
  expect_gradcheck("relu", [](const Vars& v) { return relu(v[0]); }, {away_from_zero(s)});
  expect_gradcheck("gelu", [](const Vars& v) { return gelu(v[0]); }, {normal(s)});
  // gelu is smooth at 0 and in its tails, so no nudging is needed there.
  expect_gradcheck("gelu at 0 and in the tails", [](const Vars& v) { return gelu(v[0]); },
                   {from_vector(std::vector<double>{-6, -3, -1, 0, 1e-3, 1, 3, 6}, {8})});
}

TEST_CASE("gradcheck: add, sub, mul, div with broadcasting", "[autograd][gradcheck]") {
  manual_seed(2);
  // (a shape, b shape): trailing-dim broadcasts, size-1 dims on both sides, a 0-d operand, and a
  // b larger than a.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}}, {{2, 3, 4}, {1, 4}},
      {{2, 1, 4}, {1, 3, 1}}, {{3, 4}, {}},        {{4}, {2, 3, 4}}};
  for (const auto& [sa, sb] : cases) {
    const std::string shapes = shape_str(sa) + " with " + shape_str(sb);
    expect_gradcheck("add " + shapes, [](const Vars& v) { return add(v[0], v[1]); }, {normal(sa), normal(sb)});
    expect_gradcheck("sub " + shapes, [](const Vars& v) { return sub(v[0], v[1]); }, {normal(sa), normal(sb)});
    expect_gradcheck("mul " + shapes, [](const Vars& v) { return mul(v[0], v[1]); }, {normal(sa), normal(sb)});
    expect_gradcheck("div " + shapes, [](const Vars& v) { return div(v[0], v[1]); }, {normal(sa), positive(sb)});
    expect_gradcheck("b / a " + shapes, [](const Vars& v) { return div(v[1], v[0]); }, {positive(sa), normal(sb)});
  }
  // The operators are the same functions; check them once, broadcasting included.
  expect_gradcheck("operators + - * / and unary -",
                   [](const Vars& v) { return -((v[0] + v[1]) * (v[0] - v[1]) / v[2]); },
                   {normal({2, 3}), normal({3}), positive({2, 1})});
}

TEST_CASE("gradcheck: maximum and minimum away from ties", "[autograd][gradcheck]") {
  manual_seed(3);
  // b = a + d with |d| >= 0.1: never a tie, both inputs win somewhere.
  Tensor a = normal({3, 4});
  Tensor b = add(a, away_from_zero({3, 4}));
  expect_gradcheck("maximum", [](const Vars& v) { return maximum(v[0], v[1]); }, {a, b});
  expect_gradcheck("minimum", [](const Vars& v) { return minimum(v[0], v[1]); }, {a, b});
  // Broadcast: the (4) operand competes with every row; its gradient sums the rows it won.
  Tensor row = normal({4});
  Tensor m = add(row, away_from_zero({3, 4}));
  expect_gradcheck("maximum broadcast", [](const Vars& v) { return maximum(v[0], v[1]); }, {m, row});
  expect_gradcheck("minimum broadcast", [](const Vars& v) { return minimum(v[0], v[1]); }, {row, m});
}

TEST_CASE("gradcheck: scalar variants and operators", "[autograd][gradcheck]") {
  manual_seed(4);
  const Shape s{2, 5};
  expect_gradcheck("add scalar", [](const Vars& v) { return add(v[0], 2.5); }, {normal(s)});
  expect_gradcheck("sub scalar", [](const Vars& v) { return sub(v[0], 2.5); }, {normal(s)});
  expect_gradcheck("mul scalar", [](const Vars& v) { return mul(v[0], -1.5); }, {normal(s)});
  expect_gradcheck("div scalar", [](const Vars& v) { return div(v[0], 0.75); }, {normal(s)});
  expect_gradcheck("rsub", [](const Vars& v) { return rsub(3.0, v[0]); }, {normal(s)});
  expect_gradcheck("x + s, x - s, x * s, x / s, s * x",
                   [](const Vars& v) { return (2.0 * (v[0] + 1.0) - 0.5) * 3.0 / 4.0; }, {normal(s)});
}

TEST_CASE("gradcheck: where with a broadcast condition", "[autograd][gradcheck]") {
  manual_seed(5);
  // cond (3, 4) broadcasts over a (2, 3, 4); b (4) broadcasts everywhere. cond is an i32 tensor
  // captured by the function, not an input: it is not differentiable.
  Tensor cond = from_vector(std::vector<int32_t>{1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0}, {3, 4});
  expect_gradcheck("where", [cond](const Vars& v) { return where(cond, v[0], v[1]); }, {normal({2, 3, 4}), normal({4})});
}

// ---- reductions and softmax ----

TEST_CASE("gradcheck: sum, mean and max over each dim, with and without keepdim", "[autograd][gradcheck]") {
  manual_seed(6);
  const Shape s{2, 3, 5};  // 30 elements; gcd(30, 7) = 1 for distinct()
  for (int64_t d : {0, 1, 2, -1}) {
    for (bool keep : {false, true}) {
      const std::string tag = " dim " + std::to_string(d) + (keep ? " keepdim" : "");
      expect_gradcheck("sum" + tag, [d, keep](const Vars& v) { return sum(v[0], d, keep); }, {normal(s)});
      expect_gradcheck("mean" + tag, [d, keep](const Vars& v) { return mean(v[0], d, keep); }, {normal(s)});
      expect_gradcheck("max" + tag, [d, keep](const Vars& v) { return max(v[0], d, keep); }, {distinct(s)});
    }
  }
  expect_gradcheck("sum of all", [](const Vars& v) { return sum(v[0]); }, {normal(s)});
  expect_gradcheck("mean of all", [](const Vars& v) { return mean(v[0]); }, {normal(s)});
  expect_gradcheck("sum of a 1-d tensor to 0-d", [](const Vars& v) { return sum(v[0], 0); }, {normal({5})});
  expect_gradcheck("max of a 1-d tensor to 0-d", [](const Vars& v) { return max(v[0], 0); }, {distinct({5})});
}

TEST_CASE("gradcheck: softmax and log_softmax over the last dim", "[autograd][gradcheck]") {
  manual_seed(7);
  for (const Shape& s : {Shape{3, 5}, Shape{2, 2, 4}}) {
    expect_gradcheck("softmax " + shape_str(s), [](const Vars& v) { return softmax(v[0]); }, {normal(s)});
    expect_gradcheck("log_softmax " + shape_str(s), [](const Vars& v) { return log_softmax(v[0]); }, {normal(s)});
  }
  // Large logits: the max-subtracting forward must stay exact and the gradient with it.
  Tensor big = add(mul(normal({3, 5}), 4.0), 40.0);
  expect_gradcheck("softmax of large logits", [](const Vars& v) { return softmax(v[0]); }, {big});
  expect_gradcheck("log_softmax of large logits", [](const Vars& v) { return log_softmax(v[0]); }, {big});
}

// ---- views and concat ----

TEST_CASE("gradcheck: reshape, transpose, permute, narrow, expand, (un)squeeze, contiguous", "[autograd][gradcheck]") {
  manual_seed(8);
  const Shape s{2, 3, 4};
  expect_gradcheck("reshape", [](const Vars& v) { return reshape(v[0], {6, 4}); }, {normal(s)});
  expect_gradcheck("reshape -1", [](const Vars& v) { return reshape(v[0], {4, -1}); }, {normal(s)});
  expect_gradcheck("transpose", [](const Vars& v) { return transpose(v[0], 0, 2); }, {normal(s)});
  expect_gradcheck("transpose -1 -2", [](const Vars& v) { return transpose(v[0], -1, -2); }, {normal(s)});
  expect_gradcheck("permute", [](const Vars& v) { return permute(v[0], {2, 0, 1}); }, {normal(s)});
  expect_gradcheck("narrow", [](const Vars& v) { return narrow(v[0], 1, 1, 2); }, {normal(s)});
  expect_gradcheck("narrow last dim", [](const Vars& v) { return narrow(v[0], -1, 0, 3); }, {normal(s)});
  expect_gradcheck("expand size-1 dims", [](const Vars& v) { return expand(v[0], {2, 3, 4}); }, {normal({3, 1})});
  expect_gradcheck("expand a new leading dim", [](const Vars& v) { return expand(v[0], {2, 3, 4}); }, {normal({1, 4})});
  expect_gradcheck("unsqueeze", [](const Vars& v) { return unsqueeze(v[0], 1); }, {normal(s)});
  expect_gradcheck("unsqueeze -1", [](const Vars& v) { return unsqueeze(v[0], -1); }, {normal(s)});
  expect_gradcheck("squeeze", [](const Vars& v) { return squeeze(v[0], 1); }, {normal({3, 1, 4})});
  expect_gradcheck("contiguous of a transpose",
                   [](const Vars& v) { return contiguous(transpose(v[0], 0, 1)); }, {normal(s)});
  // Views of views: reshape of a non-contiguous narrow forces a copy inside the chain.
  expect_gradcheck("narrow . transpose . reshape",
                   [](const Vars& v) { return reshape(narrow(transpose(v[0], 1, 2), 1, 1, 2), {2, 6}); }, {normal(s)});
}

TEST_CASE("gradcheck: concat of three inputs", "[autograd][gradcheck]") {
  manual_seed(9);
  auto cat = [](int64_t d) { return [d](const Vars& v) { return concat({v[0], v[1], v[2]}, d); }; };
  expect_gradcheck("concat middle dim", cat(1), {normal({2, 1, 3}), normal({2, 2, 3}), normal({2, 3, 3})});
  expect_gradcheck("concat first dim", cat(0), {normal({1, 2, 3}), normal({2, 2, 3}), normal({1, 2, 3})});
  expect_gradcheck("concat last dim (-1)", cat(-1), {normal({2, 2, 1}), normal({2, 2, 3}), normal({2, 2, 2})});
  // The same input twice: both slices' gradients must reach it.
  expect_gradcheck("concat one input twice", [](const Vars& v) { return concat({v[0], v[1], v[0]}, 1); },
                   {normal({2, 2}), normal({2, 3})});
}

// ---- matmul ----

TEST_CASE("gradcheck: matmul 2-d, all four transpose combinations", "[autograd][gradcheck][matmul]") {
  manual_seed(10);
  const int64_t M = 3, K = 4, N = 2;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::string tag = std::string("2-d ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0");
      expect_gradcheck(tag, [ta, tb](const Vars& v) { return matmul(v[0], v[1], ta, tb); },
                       {normal(operand({}, ta, M, K)), normal(operand({}, tb, K, N))});
    }
  }
}

TEST_CASE("gradcheck: matmul batched 3-d and 4-d, all four transpose combinations", "[autograd][gradcheck][matmul]") {
  manual_seed(11);
  const int64_t M = 3, K = 2, N = 4;
  for (const Shape& batch : {Shape{2}, Shape{2, 2}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const std::string tag = "batch " + shape_str(batch) + " ta=" + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0");
        expect_gradcheck(tag, [ta, tb](const Vars& v) { return matmul(v[0], v[1], ta, tb); },
                         {normal(operand(batch, ta, M, K)), normal(operand(batch, tb, K, N))});
      }
    }
  }
}

TEST_CASE("gradcheck: matmul of a batched A with a shared 2-d B (the Linear layer)", "[autograd][gradcheck][matmul]") {
  manual_seed(12);
  // x (B, T, C) @ W: the weight's gradient sums over every batch; with trans_a no single 2-d
  // fold of the batch exists, which is the path most likely to be wrong.
  const int64_t M = 3, K = 4, N = 2;
  for (const Shape& batch : {Shape{2}, Shape{2, 2}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const std::string tag = "shared B, batch " + shape_str(batch) + " ta=" + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0");
        expect_gradcheck(tag, [ta, tb](const Vars& v) { return matmul(v[0], v[1], ta, tb); },
                         {normal(operand(batch, ta, M, K)), normal(operand({}, tb, K, N))});
      }
    }
  }
}

TEST_CASE("gradcheck: non-contiguous views fed into matmul and add", "[autograd][gradcheck][matmul]") {
  manual_seed(13);
  // A transposed view: matmul reads its storage in place with a flipped flag.
  expect_gradcheck("matmul(transpose(a), b)", [](const Vars& v) { return matmul(transpose(v[0], 0, 1), v[1]); },
                   {normal({4, 3}), normal({4, 2})});
  expect_gradcheck("matmul(a, transpose(b), ta, tb)",
                   [](const Vars& v) { return matmul(v[0], transpose(v[1], 0, 1), true, true); },
                   {normal({4, 3}), normal({4, 2})});
  expect_gradcheck("batched matmul(transpose(a, 1, 2), b)",
                   [](const Vars& v) { return matmul(transpose(v[0], 1, 2), v[1]); }, {normal({2, 4, 3}), normal({2, 4, 2})});
  // A narrow (offset and row stride 6) and a batch-permuted view: these get copied first.
  expect_gradcheck("matmul(narrow(a), b)", [](const Vars& v) { return matmul(narrow(v[0], 1, 1, 4), v[1]); },
                   {normal({3, 6}), normal({4, 2})});
  expect_gradcheck("matmul(permute(a), shared b)",
                   [](const Vars& v) { return matmul(permute(v[0], {1, 0, 2}), v[1]); }, {normal({3, 2, 4}), normal({4, 2})});
  expect_gradcheck("add(transpose(a), b)", [](const Vars& v) { return add(transpose(v[0], 0, 1), v[1]); },
                   {normal({4, 3}), normal({3, 1})});
  expect_gradcheck("mul(transpose(a), a)", [](const Vars& v) { return mul(transpose(v[0], 0, 1), v[0]); },
                   {normal({3, 3})});
}

// ---- embedding, layer norm, cross-entropy ----

TEST_CASE("gradcheck: embedding with repeated indices", "[autograd][gradcheck]") {
  manual_seed(14);
  // Rows 0 and 2 are used several times: their gradients must add up (scatter-add), row 1 once,
  // and rows 3 and 4 never (gradient exactly 0). idx is an i32 input: gradcheck passes it through.
  Tensor idx = from_vector(std::vector<int32_t>{0, 2, 2, 1, 0, 2, 3, 0}, {2, 4});
  Tensor weight = normal({5, 3});
  expect_gradcheck("embedding", [](const Vars& v) { return embedding(v[0], v[1].value()); }, {weight, idx});
}

TEST_CASE("gradcheck: layernorm checks x, w and b", "[autograd][gradcheck]") {
  manual_seed(15);
  Tensor x = normal({2, 3, 5});
  Tensor w = add(mul(normal({5}), 0.5), 1.0);  // around 1, as after init, but not all equal
  Tensor b = normal({5});
  expect_gradcheck("layernorm", [](const Vars& v) { return layernorm(v[0], v[1], v[2]); }, {x, w, b});
  // A large eps changes the math (rstd = 1 / sqrt(var + eps)); the backward must use the same eps.
  expect_gradcheck("layernorm eps 0.5", [](const Vars& v) { return layernorm(v[0], v[1], v[2], 0.5); }, {x, w, b});
}

TEST_CASE("gradcheck: cross_entropy with and without ignored rows", "[autograd][gradcheck]") {
  manual_seed(16);
  Tensor logits = normal({4, 5});
  auto ce = [](int64_t ignore) { return [ignore](const Vars& v) { return cross_entropy(v[0], v[1].value(), ignore); }; };
  expect_gradcheck("cross_entropy", ce(-100), {logits, from_vector(std::vector<int32_t>{1, 0, 4, 2}, {4})});
  // Ignored rows: the mean is over the 2 kept rows, and ignored rows get gradient 0.
  expect_gradcheck("cross_entropy with ignore_index rows", ce(-100),
                   {logits, from_vector(std::vector<int32_t>{1, -100, 4, -100}, {4})});
  expect_gradcheck("cross_entropy with a custom ignore_index", ce(3),
                   {logits, from_vector(std::vector<int32_t>{3, 0, 3, 2}, {4})});
  // Every row ignored: loss 0 and gradient 0 everywhere (not NaN from 0 / 0).
  expect_gradcheck("cross_entropy with every row ignored", ce(-100),
                   {logits, from_vector(std::vector<int32_t>{-100, -100, -100, -100}, {4})});
}

// ---- a learner's own function ----

TEST_CASE("gradcheck: checking your own composed function", "[autograd][gradcheck]") {
  manual_seed(17);
  // The whole recipe: write the function of Vars, hand gradcheck the inputs, read the verdict.
  GradcheckResult r = gradcheck([](auto& v) { return sum(mul(tanh(v[0]), v[1])); },
                                {randn({3, 4}, DType::F64), randn({3, 4}, DType::F64)});
  INFO(r.summary());
  CHECK(r.ok);
  CHECK(r.checked == 24);

  // A bigger composition: a two-layer MLP with a loss, every parameter checked at once.
  // x (B=2, T=3, C=4) -> Linear(4, 5) -> gelu -> Linear(5, V=3) -> cross-entropy over B*T rows.
  Tensor targets = from_vector(std::vector<int32_t>{0, 2, 1, 1, -100, 2}, {6});
  expect_gradcheck("mlp + cross_entropy",
                   [targets](const Vars& v) {
                     Var h = gelu(add(matmul(v[0], v[1]), v[2]));  // (2, 3, 5)
                     Var logits = add(matmul(h, v[3]), v[4]);      // (2, 3, 3)
                     return cross_entropy(reshape(logits, {6, 3}), targets);
                   },
                   {normal({2, 3, 4}), normal({4, 5}), normal({5}), normal({5, 3}), normal({3})});

  // f32 inputs are converted to f64 before checking, so f32 models can be checked as they are.
  GradcheckResult r32 = gradcheck([](const Vars& v) { return exp(v[0]); }, {randn({2, 3}, DType::F32)}, tight());
  INFO(r32.summary());
  CHECK(r32.ok);
  CHECK(r32.checked == 6);
}

// ---- gradcheck itself can fail, and says where ----

namespace {
// y = x^2 with a deliberately wrong backward: g * x instead of 2 g x.
Var wrong_square(const Var& x) {
  Tensor xv = x.value();
  return make_op_result("wrong_square", mul(xv, xv), {x}, [xv](const Tensor& g) { return std::vector<Tensor>{mul(g, xv)}; });
}
// y = x^2 with the right backward scaled by (1 + rel): a subtle error.
Var slightly_wrong_square(const Var& x, double rel) {
  Tensor xv = x.value();
  return make_op_result("slightly_wrong_square", mul(xv, xv), {x},
                        [xv, rel](const Tensor& g) { return std::vector<Tensor>{mul(mul(g, xv), 2.0 * (1.0 + rel))}; });
}
// y = a * b whose backward is right for a and wrong for b (g * b instead of g * a).
Var wrong_mul_b(const Var& a, const Var& b) {
  Tensor av = a.value(), bv = b.value();
  return make_op_result("wrong_mul_b", mul(av, bv), {a, b},
                        [av, bv](const Tensor& g) { return std::vector<Tensor>{mul(g, bv), mul(g, bv)}; });
}
// y = x with a backward that produces NaN.
Var nan_grad(const Var& x) {
  return make_op_result("nan_grad", x.value().clone(), {x}, [](const Tensor& g) {
    return std::vector<Tensor>{mul(g, std::numeric_limits<double>::quiet_NaN())};
  });
}
}  // namespace

TEST_CASE("gradcheck fails on a wrong backward and names the input", "[autograd][gradcheck][meta]") {
  manual_seed(18);
  GradcheckResult bad = gradcheck([](const Vars& v) { return wrong_square(v[0]); }, {normal({2, 3})});
  INFO(bad.summary());
  CHECK_FALSE(bad.ok);
  CHECK(bad.worst_input == 0);
  CHECK_THAT(bad.summary(), Catch::Contains("FAILED") && Catch::Contains("input 0"));

  // Control: the same op with the right backward passes, so the failure above is the backward's.
  GradcheckResult good = gradcheck([](const Vars& v) { return slightly_wrong_square(v[0], 0.0); }, {normal({2, 3})}, tight());
  INFO(good.summary());
  CHECK(good.ok);

  // A relative error of 1e-4 (x^2 with derivative 2.0002 x) is far above the ~1e-9 noise floor.
  GradcheckResult subtle =
      gradcheck([](const Vars& v) { return slightly_wrong_square(v[0], 1e-4); }, {away_from_zero({2, 3})}, tight());
  INFO(subtle.summary());
  CHECK_FALSE(subtle.ok);

  // Only the second input's gradient is wrong: the report points at input 1.
  GradcheckResult second = gradcheck([](const Vars& v) { return wrong_mul_b(v[0], v[1]); },
                                     {normal({3}), add(normal({3}), 5.0)});  // a != b everywhere
  INFO(second.summary());
  CHECK_FALSE(second.ok);
  CHECK(second.worst_input == 1);
}

TEST_CASE("gradcheck result fields on a hand-worked case", "[autograd][gradcheck][meta]") {
  // L = sum(wrong_square(x)) at x = {1, 2, 3}: a single-element output, so no random projection.
  // analytic = g x = {1, 2, 3}; numeric = 2x = {2, 4, 6}; errors {1, 2, 3}; relative errors all
  // 1/2. The worst violation (err - atol - rtol |numeric|) is at element 2.
  GradcheckResult r = gradcheck([](const Vars& v) { return sum(wrong_square(v[0])); },
                                {from_vector(std::vector<double>{1, 2, 3}, {3})});
  INFO(r.summary());
  CHECK_FALSE(r.ok);
  CHECK(r.checked == 3);
  CHECK(r.worst_input == 0);
  CHECK(r.worst_index == 2);
  CHECK(r.worst_analytic == 3.0);  // exact: backward multiplies 1 by 3
  // The difference quotient of x^2 at 3 is 6 up to rounding, ~1e-16 * 9 / 1e-6 ~ 1e-9.
  CHECK(r.worst_numeric == Approx(6.0).margin(1e-8));
  CHECK(r.max_abs_err == Approx(3.0).margin(1e-8));
  CHECK(r.max_rel_err == Approx(0.5).margin(1e-8));

  // i32 inputs are not counted, and the index of a float input counts all inputs before it.
  Tensor idx = from_vector(std::vector<int32_t>{1, 1, 0}, {3});
  GradcheckResult e = gradcheck([](const Vars& v) { return sum(wrong_square(embedding(v[1], v[0].value()))); },
                                {idx, from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2})});
  INFO(e.summary());
  CHECK(e.checked == 4);
  CHECK(e.worst_input == 1);
  // dL/dW with the wrong backward: row 1 used twice, row 0 once: analytic {1, 2, 6, 8},
  // numeric (2 W per use) {2, 4, 12, 16}; the worst error is at element 3 (W[1][1]).
  CHECK(e.worst_index == 3);
  CHECK(e.worst_analytic == 8.0);
  CHECK(e.worst_numeric == Approx(16.0).margin(1e-8));
}

TEST_CASE("gradcheck fails when the backward produces NaN", "[autograd][gradcheck][meta]") {
  // A NaN compares false with everything: a check written as "fail if err > tol" lets it pass.
  GradcheckResult r = gradcheck([](const Vars& v) { return nan_grad(v[0]); }, {from_vector(std::vector<double>{1, 2}, {2})});
  INFO(r.summary());
  CHECK_FALSE(r.ok);
  CHECK(r.worst_input == 0);
  CHECK(r.worst_index == 0);           // the first NaN is reported
  CHECK(std::isnan(r.max_abs_err));    // and is not hidden by std::max
}

TEST_CASE("gradcheck leaves the global RNG and its inputs untouched", "[autograd][gradcheck][meta]") {
  manual_seed(19);
  Tensor x = normal({2, 3});
  const std::vector<double> before = x.to_vector<double>();
  const RngState rng = global_rng();
  GradcheckResult r = gradcheck([](const Vars& v) { return tanh(v[0]); }, {x});
  CHECK(r.ok);
  CHECK(global_rng().seed == rng.seed);
  CHECK(global_rng().offset == rng.offset);
  CHECK(x.to_vector<double>() == before);  // perturbations happen on gradcheck's own copy
}
