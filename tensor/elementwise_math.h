// elementwise_math.h: the per-element arithmetic of every unary and binary op, as functors that
// compile for host and device (see hostdevice.h). Kernels in tensor/cpu and tensor/cuda only loop;
// the math lives here once. Backward helpers (relu', gelu') sit next to their forwards.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/hostdevice.h"

namespace lm {

enum class UnaryOp : uint8_t { Neg, Exp, Log, Sqrt, Tanh, Relu, Gelu };
enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,  // arithmetic
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,  // comparisons: 1 where true, 0 where false, in the input dtype
  Max,
  Min,           // elementwise maximum / minimum
  ReluBackward,  // (x, g) -> g where x > 0 else 0
  GeluBackward,  // (x, g) -> g * gelu'(x)
};
const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);

// Bind the runtime op to a constexpr `OPV` and run the block: one compiled loop per op.
#define LM_CASE_OP_(Enum, name, ...) \
  case Enum::name: {                 \
    constexpr Enum OPV = Enum::name; \
    __VA_ARGS__;                     \
    break;                           \
  }
// These two lists are laid out by hand: clang-format 16 lays them out differently on each pass.
// clang-format off
#define LM_SWITCH_UNARY(op, ...)                          \
  switch (op) {                                           \
    LM_CASE_OP_(::lm::UnaryOp, Neg, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::UnaryOp, Exp, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::UnaryOp, Log, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::UnaryOp, Sqrt, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::UnaryOp, Tanh, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::UnaryOp, Relu, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::UnaryOp, Gelu, __VA_ARGS__)         \
  }
#define LM_SWITCH_BINARY(op, ...)                         \
  switch (op) {                                           \
    LM_CASE_OP_(::lm::BinaryOp, Add, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::BinaryOp, Sub, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::BinaryOp, Mul, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::BinaryOp, Div, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::BinaryOp, Eq, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::BinaryOp, Ne, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::BinaryOp, Lt, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::BinaryOp, Le, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::BinaryOp, Gt, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::BinaryOp, Ge, __VA_ARGS__)          \
    LM_CASE_OP_(::lm::BinaryOp, Max, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::BinaryOp, Min, __VA_ARGS__)         \
    LM_CASE_OP_(::lm::BinaryOp, ReluBackward, __VA_ARGS__) \
    LM_CASE_OP_(::lm::BinaryOp, GeluBackward, __VA_ARGS__) \
  }
// clang-format on

namespace math {

// The op is a template argument so each kernel loop is compiled for one op, with no branch per
// element; kernels turn the runtime enum into this argument once, outside their loops.
// exp for the softmax rows of the attention kernels (x <= 0 there: scores minus their maximum).
// f32: Cody-Waite range reduction (exp(x) = 2^n exp(r), |r| <= ln2/2, ln2 split so n*ln2_hi is
// exact) and a degree-6 polynomial for exp(r) (the classic Cephes expf coefficients), then 2^n
// from the exponent bits: within ~2 ulp of libm's expf, and a plain arithmetic function the
// compiler vectorises (libm's expf is a call per element). Inputs below -87.3 give about the
// smallest normal float (1.2e-38) instead of 0, which a softmax never notices; inputs above 88
// give exp(88) (a softmax never passes one above 0, and exp(0) is exactly 1). 2^n is built
// without a float-to-int conversion (undefined behaviour for NaN): adding 1.5 * 2^23 to n puts
// it in the low bits of the sum's mantissa, read as unsigned bits. So a NaN input is harmless
// and comes back as NaN through the polynomial, which the training loop's NaN guard relies on.
// (GCC 12 vectorises floorf only under -fno-trapping-math, which CMakeLists.txt sets for that.)
// f64: std::exp.
LM_HD float exp_softmax(float x) {
  x = x < -87.3365447504f ? -87.3365447504f : (x > 88.0f ? 88.0f : x);  // NaN passes through
  const float n = floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  // n is in [-126, 127] after the clamp: n + 1.5 * 2^23 is exact, and its bits minus those of
  // 1.5 * 2^23 (0x4B400000) are n; the biased exponent n + 127 is in [1, 254].
  const float shifted = n + 12582912.0f;
  uint32_t sbits;
#if defined(__CUDA_ARCH__)
  sbits = __float_as_uint(shifted);
#else
  __builtin_memcpy(&sbits, &shifted, sizeof sbits);
#endif
  const uint32_t bits = (sbits - 0x4B400000u + 127u) << 23;
  float scale;
#if defined(__CUDA_ARCH__)
  scale = __uint_as_float(bits);
#else
  __builtin_memcpy(&scale, &bits, sizeof scale);
#endif
  return e * scale;
}
LM_HD double exp_softmax(double x) { return std::exp(x); }

// Exact (erf-based) GELU, PyTorch's nn.GELU(approximate='none'): gelu(x) = x * Phi(x), Phi the
// standard normal CDF. f64 (and the gradient checker) uses std::erf; f32 uses normal_cdf below.
template <class Scalar>
LM_HD Scalar gelu(Scalar x) {
  const Scalar inv_sqrt2 = Scalar(0.70710678118654752440);
  return Scalar(0.5) * x * (Scalar(1) + std::erf(x * inv_sqrt2));
}
// d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the standard normal density.
template <class Scalar>
LM_HD Scalar gelu_grad(Scalar x) {
  const Scalar inv_sqrt2 = Scalar(0.70710678118654752440);
  const Scalar inv_sqrt2pi = Scalar(0.39894228040143267794);
  Scalar cdf = Scalar(0.5) * (Scalar(1) + std::erf(x * inv_sqrt2));
  Scalar pdf = inv_sqrt2pi * std::exp(Scalar(-0.5) * x * x);
  return cdf + x * pdf;
}

// Phi(x) in f32 for GELU, as plain arithmetic the compiler vectorises (libm's erff is a call per
// element: 12% of a long-prompt prefill and 7% of a GPT-2-sized training step went there). With
// z = |x| / sqrt 2 and t = 1 / (1 + z/2), the tail is written the classic way (the form of
// Numerical Recipes' erfcc): 0.5 erfc(z) = t exp(-z^2 + P(t)), P a degree-9 polynomial whose
// coefficients are our own least-squares fit of log(0.5 erfc(z) / t) + z^2 at Chebyshev nodes
// for z in [0, 10], made by scripts/fit_normal_cdf.py (fit error 5e-8 in the exponent; digits
// past f32's 24 bits do not matter). Then Phi(x) = tail for x < 0 and 1 - tail for x >= 0.
// Measured against Phi in f64 every 1/1024 over [-13, 7] (tests/test_elementwise.cpp): within
// 1.9e-7 absolute everywhere (3 ulp of Phi in [0.5, 1); 0.5 (1 + erff) is within 0.6e-7), and
// within 1.6e-5 relative on the left tail, where 0.5 (1 + erff(x / sqrt 2)) cancels to nothing
// (it is exactly 0 below about x = -5.5, where Phi is 2e-8). The relative error there comes from
// rounding z^2 (about 81 at the far end) in f32. Below x = -13.2 the result is 0, +inf gives 1,
// NaN stays NaN.
LM_HD float normal_cdf(float x) {
  const float z = fabsf(x) * 0.70710678118654752440f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 1.4493021368e-01f;
  p = p * t + -6.8082717759e-01f;
  p = p * t + 1.1567337567e+00f;
  p = p * t + -6.9625189840e-01f;
  p = p * t + -8.0280432565e-02f;
  p = p * t + 1.2675865552e-03f;
  p = p * t + 3.4602799946e-02f;
  p = p * t + 3.8664041216e-01f;
  p = p * t + 9.9863278334e-01f;
  p = p * t + -1.9585951775e+00f;  // includes log(0.5): P(1) = log(0.5), so Phi(0) = 0.5
  // Below an exponent of -87 the tail is under f32's smallest normal (|x| > 13.2): 0, rather than
  // t times exp_softmax's floor of 1.2e-38. A NaN fails the comparison and stays NaN.
  const float e = p - z * z;
  const float tail = e < -87.0f ? 0.0f : t * exp_softmax(e);
  return x < 0.0f ? tail : 1.0f - tail;
}
LM_HD float gelu(float x) { return x * normal_cdf(x); }
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi) is 0 in f32 once x^2 / 2 passes 87.3; exp_softmax's clamp
// would give 1.2e-38 there, and x * 1.2e-38 is not small for x near the f32 maximum.
LM_HD float gelu_grad(float x) {
  const float half_sq = 0.5f * x * x;
  const float pdf = half_sq < 87.0f ? 0.39894228040143267794f * exp_softmax(-half_sq) : 0.0f;
  return normal_cdf(x) + x * pdf;
}

template <UnaryOp OP, class Scalar>
LM_HD Scalar unary(Scalar x) {
  if constexpr (OP == UnaryOp::Neg)
    return -x;
  else if constexpr (OP == UnaryOp::Relu)
    return x > Scalar(0) ? x : Scalar(0);
  else if constexpr (OP == UnaryOp::Exp)
    return std::exp(x);
  else if constexpr (OP == UnaryOp::Log)
    return std::log(x);
  else if constexpr (OP == UnaryOp::Sqrt)
    return std::sqrt(x);
  else if constexpr (OP == UnaryOp::Tanh)
    return std::tanh(x);
  else
    return gelu(x);
}

template <BinaryOp OP, class Scalar>
LM_HD Scalar binary(Scalar a, Scalar b) {
  if constexpr (OP == BinaryOp::Add)
    return a + b;
  else if constexpr (OP == BinaryOp::Sub)
    return a - b;
  else if constexpr (OP == BinaryOp::Mul)
    return a * b;
  else if constexpr (OP == BinaryOp::Div)
    return a / b;
  else if constexpr (OP == BinaryOp::Eq)
    return Scalar(a == b);
  else if constexpr (OP == BinaryOp::Ne)
    return Scalar(a != b);
  else if constexpr (OP == BinaryOp::Lt)
    return Scalar(a < b);
  else if constexpr (OP == BinaryOp::Le)
    return Scalar(a <= b);
  else if constexpr (OP == BinaryOp::Gt)
    return Scalar(a > b);
  else if constexpr (OP == BinaryOp::Ge)
    return Scalar(a >= b);
  else if constexpr (OP == BinaryOp::Max)
    return a > b ? a : b;
  else if constexpr (OP == BinaryOp::Min)
    return a < b ? a : b;
  else if constexpr (OP == BinaryOp::ReluBackward)
    return a > Scalar(0) ? b : Scalar(0);
  else
    return b * gelu_grad(a);  // GeluBackward (floating types only; fronts check)
}

}  // namespace math
}  // namespace lm
