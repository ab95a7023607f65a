// test_elementwise.cpp: unary, binary (broadcasting), scalar, comparison and where ops against
// naive loops over std:: math, including non-contiguous inputs and size-1 dims.
#include "tests/helpers.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "tensor/elementwise_math.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

namespace {
// Exact erf GELU written out independently of tensor/elementwise_math.h.
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
}  // namespace

TEST_CASE("unary ops match std:: math elementwise", "[elementwise]") {
  manual_seed(1);
  Tensor x = randn({5, 7}, DType::F64);
  Tensor pos = add(rand({5, 7}, DType::F64), 0.1);
  struct Case { const char* name; std::function<Tensor(const Tensor&)> op; std::function<double(double)> ref; bool positive; };
  std::vector<Case> cases = {
      {"neg", [](const Tensor& t) { return neg(t); }, [](double v) { return -v; }, false},
      {"exp", [](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); }, false},
      {"log", [](const Tensor& t) { return log(t); }, [](double v) { return std::log(v); }, true},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, [](double v) { return std::sqrt(v); }, true},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); }, false},
      {"relu", [](const Tensor& t) { return relu(t); }, [](double v) { return v > 0 ? v : 0; }, false},
      {"gelu", [](const Tensor& t) { return gelu(t); }, gelu_ref, false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const Tensor& in = c.positive ? pos : x;
    std::vector<double> iv = values(in), expect(iv.size());
    for (size_t i = 0; i < iv.size(); ++i) expect[i] = c.ref(iv[i]);
    CHECK(max_abs_diff(c.op(in), expect) < 1e-14);  // f64: libm vs libm, a few ulp at most
    // f32 path: same math, rounded inputs/outputs; 1e-5 covers f32 rounding of values ~ e^3.
    Tensor in32 = in.to(DType::F32);
    std::vector<double> iv32 = values(in32), expect32(iv32.size());
    for (size_t i = 0; i < iv32.size(); ++i) expect32[i] = c.ref(iv32[i]);
    CHECK(max_abs_diff(c.op(in32), expect32) < 1e-5);
    // Non-contiguous input: same values as the contiguous copy.
    CHECK(max_abs_diff(c.op(in.transpose(0, 1)), c.op(in.transpose(0, 1).contiguous())) == 0);
  }
}

TEST_CASE("gelu matches hand-worked values and its derivative", "[elementwise]") {
  // gelu(1) = 0.5 * (1 + erf(1/sqrt 2)) = 0.8413447460685429; gelu(-1) = -0.15865525393145707.
  Tensor g = gelu(from_vector(std::vector<double>{1.0, -1.0, 0.0}, {3}));
  CHECK(max_abs_diff(g, {0.8413447460685429, -0.15865525393145707, 0.0}) < 1e-15);
  // gelu'(x) = Phi(x) + x phi(x); at 1: 0.8413447460685429 + 0.24197072451914337.
  Tensor d = gelu_backward(from_vector(std::vector<double>{1.0, 0.0}, {2}), ones({2}, DType::F64));
  CHECK(max_abs_diff(d, {1.0833154705876864, 0.5}) < 1e-15);
  Tensor r = relu_backward(from_vector(std::vector<double>{-1, 0, 2}, {3}), full({3}, 5.0, DType::F64));
  CHECK(values(r) == std::vector<double>{0, 0, 5});
}

TEST_CASE("exp_softmax (the attention kernels' f32 exp) tracks libm's exp", "[elementwise]") {
  // Independent answer: std::exp in double. Over the whole clamped range the polynomial is within
  // a few ulp; 4e-7 relative is ~3.4 ulp of f32 (2^-23 = 1.19e-7), the error the comment in
  // tensor/elementwise_math.h claims (~2 ulp) plus the rounding of the product e * 2^n.
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;  // [-87, 88]
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(static_cast<double>(math::exp_softmax(x)) - want) / want);
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 4e-7);
  CHECK(math::exp_softmax(0.0f) == 1.0f);  // a softmax row's maximum gets exactly 1
  // Far below the range: about the smallest normal float (1.18e-38), never 0. The clamp point
  // rounds to just under it (0x1.ffff98p-127), hence the 1e-5 relative tolerance.
  const float tiny = std::numeric_limits<float>::min();
  for (float x : {-1000.0f, -std::numeric_limits<float>::infinity()}) {
    const float v = math::exp_softmax(x);
    CHECK(v > 0.0f);
    CHECK(std::fabs(v - tiny) <= 1e-5f * tiny);
  }
  // Above the range: exp(88), finite.
  CHECK(std::isfinite(math::exp_softmax(1000.0f)));
  // A NaN score stays NaN, so the training loop's NaN guard still sees it.
  CHECK(std::isnan(math::exp_softmax(std::numeric_limits<float>::quiet_NaN())));
  CHECK(math::exp_softmax(-0.5) == std::exp(-0.5));  // f64 is std::exp itself
}

TEST_CASE("f32 gelu's normal_cdf tracks Phi, left tail included, and its edges", "[elementwise]") {
  // Independent answer: Phi(x) = 0.5 erfc(-x / sqrt 2) in double (libm's erfc keeps relative
  // accuracy in the tail, where 1 + erf would cancel). Every 1/1024 over [-13, 7].
  double worst_abs = 0, worst_rel = 0, worst_gelu = 0, worst_grad = 0;
  for (int i = -13 * 1024; i <= 7 * 1024; ++i) {
    const float x = static_cast<float>(i) / 1024.0f;  // exact in f32
    const double xd = x;
    const double phi = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
    const double got = math::normal_cdf(x);
    worst_abs = std::max(worst_abs, std::fabs(got - phi));
    if (phi > 1e-37) worst_rel = std::max(worst_rel, std::fabs(got - phi) / phi);  // normal floats
    worst_gelu = std::max(worst_gelu, std::fabs(static_cast<double>(math::gelu(x)) - xd * phi));
    worst_grad = std::max(worst_grad, std::fabs(static_cast<double>(math::gelu_grad(x)) - (phi + xd * pdf)));
  }
  INFO("abs " << worst_abs << " rel " << worst_rel << " gelu " << worst_gelu << " grad " << worst_grad);
  // Tolerances: the fit is 5e-8 in the exponent; f32 rounding of t, the polynomial, exp_softmax
  // (~2 ulp) and 1 - tail put the measured worst at 1.9e-7 absolute (3 ulp of Phi in [0.5, 1)):
  // 2.5e-7. On the left tail the rounding of z^2 (up to ~84, ulp 7.6e-6) in the exponent makes
  // up to 1.6e-5 relative: 3e-5. gelu = x Phi for |x| <= 13: 13 x 2e-7 plus the product's
  // rounding (measured 3.7e-7). gelu' adds x phi(x) (at most 0.25, through exp_softmax): 5e-7
  // (measured 1.8e-7). (libm's 0.5 (1 + erff) is within 6e-8 absolute but has no tail.)
  CHECK(worst_abs < 2.5e-7);
  CHECK(worst_rel < 3e-5);
  CHECK(worst_gelu < 3e-6);
  CHECK(worst_grad < 5e-7);
  // Hand-checked point: Phi(-6) = 9.8658765e-10. The libm form 0.5 (1 + erff(x / sqrt 2)) gives 0
  // there (erff rounds to -1); normal_cdf keeps it.
  CHECK(0.5f * (1.0f + erff(-6.0f * 0.70710678f)) == 0.0f);
  CHECK(std::fabs(math::normal_cdf(-6.0f) / 9.8658765e-10 - 1.0) < 3e-5);
  CHECK(math::normal_cdf(0.0f) == 0.5f);  // P(1) = log(0.5) to 5e-8, which rounds to 0.5 exactly
  // Edges: +-inf, huge values, NaN.
  const float inf = std::numeric_limits<float>::infinity(), big = 3e38f;
  CHECK(math::gelu(inf) == inf);
  CHECK(math::normal_cdf(-inf) == 0.0f);
  CHECK(math::gelu(-big) == 0.0f);
  CHECK(math::gelu(big) == big);
  CHECK(math::gelu(-20.0f) == 0.0f);  // Phi(-20) = 2.8e-89, below every f32
  // gelu'(x) -> 0 and 1 at the ends; x phi(x) must not become x times exp_softmax's floor
  // (1.2e-38): at -3e38 that would be -1.4.
  CHECK(math::gelu_grad(-big) == 0.0f);
  CHECK(math::gelu_grad(big) == 1.0f);
  CHECK(math::gelu_grad(-14.0f) == 0.0f);
  CHECK(std::isnan(math::gelu(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(math::gelu_grad(std::numeric_limits<float>::quiet_NaN())));
  // f64 stays libm's erf (the gradient checker's reference path).
  CHECK(math::gelu(-1.0) == 0.5 * -1.0 * (1.0 + std::erf(-1.0 * 0.70710678118654752440)));
}

TEST_CASE("binary ops broadcast like numpy, against a naive loop", "[elementwise]") {
  manual_seed(2);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{2, 1, 4}, {1, 3, 1}},
      {{1}, {5, 2}},          {{}, {2, 2}},     {{4, 1}, {}},       {{1, 1, 1}, {1}}};
  struct Op { BinaryOp op; std::function<double(double, double)> ref; };
  std::vector<Op> ops = {{BinaryOp::Add, [](double a, double b) { return a + b; }},
                         {BinaryOp::Sub, [](double a, double b) { return a - b; }},
                         {BinaryOp::Mul, [](double a, double b) { return a * b; }},
                         {BinaryOp::Div, [](double a, double b) { return a / b; }},
                         {BinaryOp::Max, [](double a, double b) { return std::max(a, b); }},
                         {BinaryOp::Min, [](double a, double b) { return std::min(a, b); }},
                         {BinaryOp::Lt, [](double a, double b) { return double(a < b); }},
                         {BinaryOp::Ge, [](double a, double b) { return double(a >= b); }}};
  for (const auto& [sa, sb] : shapes) {
    Tensor a = randn(sa, DType::F64), b = add(rand(sb, DType::F64), 0.5);
    Shape so = broadcast_shapes(sa, sb, "test");
    std::vector<double> av = values(a), bv = values(b);
    for (const Op& o : ops) {
      INFO(binary_op_name(o.op) << " " << shape_str(sa) << " with " << shape_str(sb));
      Tensor out = binary(o.op, a, b);
      REQUIRE(out.shape() == so);
      std::vector<double> ov = values(out);
      for_each_index(so, [&](const std::vector<int64_t>& i) {
        CHECK(ov[linear(so, i)] == o.ref(bget(av, sa, so, i), bget(bv, sb, so, i)));  // exact: one IEEE op
      });
    }
  }
}

TEST_CASE("binary ops on non-contiguous views and i32", "[elementwise]") {
  Tensor a = arange(0, 12, 1, DType::F32).reshape({3, 4});
  Tensor at = a.transpose(0, 1);  // (4, 3)
  Tensor b = arange(0, 3, 1, DType::F32);
  Tensor out = add(at, b);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(values(out)[i * 3 + j] == (j * 4 + i) + j);
  Tensor x = from_vector(std::vector<int32_t>{1, -2, 3}, {3});
  CHECK(values(mul(x, x)) == std::vector<double>{1, 4, 9});
  CHECK(values(eq(x, from_vector(std::vector<int32_t>{1, 2, 3}, {3}))) == std::vector<double>{1, 0, 1});
  CHECK_THROWS_WITH(div(x, x), Catch::Contains("div") && Catch::Contains("i32"));
  CHECK_THROWS_WITH(add(zeros({2}), zeros({2}, DType::F64)), Catch::Contains("dtypes differ"));
  CHECK_THROWS_WITH(add(zeros({2, 3}), zeros({4})), Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  CHECK_THROWS_AS(exp(x), Error);
}

TEST_CASE("scalar ops and operators", "[elementwise]") {
  Tensor x = from_vector(std::vector<double>{1, 2, 4}, {3});
  CHECK(values(x + 1.0) == std::vector<double>{2, 3, 5});
  CHECK(values(x - 1.0) == std::vector<double>{0, 1, 3});
  CHECK(values(x * 3.0) == std::vector<double>{3, 6, 12});
  CHECK(values(2.0 * x) == std::vector<double>{2, 4, 8});
  CHECK(values(x / 2.0) == std::vector<double>{0.5, 1, 2});
  CHECK(values(rsub(1.0, x)) == std::vector<double>{0, -1, -3});
  CHECK(values(rdiv(1.0, x)) == std::vector<double>{1, 0.5, 0.25});
  CHECK(values(-x) == std::vector<double>{-1, -2, -4});
  CHECK(values(x * x - x / x) == std::vector<double>{0, 3, 15});
  CHECK_THROWS_AS(mul(ones({2}, DType::I32), 0.5), Error);
  CHECK(values(binary_scalar(BinaryOp::Gt, x, 1.5)) == std::vector<double>{0, 1, 1});
}

TEST_CASE("where selects with broadcasting, comparisons give 0/1", "[elementwise]") {
  Tensor cond = from_vector(std::vector<int32_t>{1, 0, 1}, {3});
  Tensor a = arange(0, 6, 1, DType::F32).reshape({2, 3});
  Tensor b = full({1}, -1.0);
  CHECK(values(where(cond, a, b)) == std::vector<double>{0, -1, 2, 3, -1, 5});
  Tensor fcond = gt(a, full({}, 2.5));
  CHECK(values(fcond) == std::vector<double>{0, 0, 0, 1, 1, 1});
  CHECK(values(where(fcond, a, b)) == std::vector<double>{-1, -1, -1, 3, 4, 5});
  CHECK(values(ne(a, full({}, 1.0))) == std::vector<double>{1, 0, 1, 1, 1, 1});
  CHECK(values(le(a, full({}, 1.0))) == std::vector<double>{1, 1, 0, 0, 0, 0});
  CHECK_THROWS_AS(where(cond, a, zeros({1}, DType::F64)), Error);
  CHECK_THROWS_AS(where(zeros({4}), a, b), Error);
}

TEST_CASE("elementwise ops on large tensors take the parallel path with the same result", "[elementwise]") {
  manual_seed(5);
  Tensor a = randn({300, 1000}), b = randn({1000});
  Tensor out = add(a, b);
  std::vector<double> av = values(a), bv = values(b), ov = values(out);
  double worst = 0;
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 1000; ++j)
      worst = std::max(worst, std::fabs(ov[i * 1000 + j] - static_cast<double>(static_cast<float>(av[i * 1000 + j]) +
                                                                                static_cast<float>(bv[j]))));
  CHECK(worst == 0);  // f32 add is exact once the operands are f32
}
