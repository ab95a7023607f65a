// nn_math.h: the per-element arithmetic of nn/'s kernels (the rotary pair rotation and the AdamW
// update), written once for host and device (tensor/hostdevice.h) and called by both nn/cpu/*.cpp
// and nn/cuda/*.cu. Not a kernel: no loops, no memory layout. Every product and sum is rounded on
// its own, never fused into an FMA, so the two devices give the same bits for the same inputs.
#pragma once

#include <cmath>

#include "tensor/hostdevice.h"

namespace lm {
namespace nnmath {

// a * b, a + b and a - b, each rounded once to nearest. The CPU build never contracts (the
// top-level CMakeLists.txt passes -ffp-contract=off); nvcc fuses a * b + c into an FMA unless the
// _rn intrinsics are used, which is what would make the GPU differ from the CPU in the last bit.
LM_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LM_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
LM_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
LM_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
LM_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
LM_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// ---- rotary embedding ----
// One interleaved pair (x0, x1) = (x[2i], x[2i+1]) rotated by the angle whose cosine and sine are
// c and s (the caller negates s for the inverse rotation):
//   y0 = x0 c - x1 s,   y1 = x0 s + x1 c.
template <class Scalar>
LM_HD void rotate_pair(Scalar x0, Scalar x1, Scalar c, Scalar s, Scalar& y0, Scalar& y1) {
  y0 = sub_rn(mul_rn(x0, c), mul_rn(x1, s));
  y1 = add_rn(mul_rn(x0, s), mul_rn(x1, c));
}

// ---- AdamW ----
// The per-step constants of one AdamW update, derived on the host in f64 and rounded once to the
// parameter dtype (so both devices start from the same values).
template <class Scalar>
struct AdamWCoeffs {
  Scalar beta1, beta2;  // moment decay rates
  Scalar decay;         // 1 - lr * weight_decay (decoupled weight decay)
  Scalar step;          // lr / bc1, bc1 = 1 - beta1^t
  Scalar inv_sqrt_bc2;  // 1 / sqrt(bc2), bc2 = 1 - beta2^t
  Scalar eps;
};

template <class Scalar>
inline AdamWCoeffs<Scalar> adamw_coeffs(double lr, double beta1, double beta2, double eps, double weight_decay,
                                        double bc1, double bc2) {
  AdamWCoeffs<Scalar> c;
  c.beta1 = static_cast<Scalar>(beta1);
  c.beta2 = static_cast<Scalar>(beta2);
  c.decay = static_cast<Scalar>(1.0 - lr * weight_decay);
  c.step = static_cast<Scalar>(lr / bc1);
  c.inv_sqrt_bc2 = static_cast<Scalar>(1.0 / std::sqrt(bc2));
  c.eps = static_cast<Scalar>(eps);
  return c;
}

// One element, in place, in PyTorch's order:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g g;
//   p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
// sqrt and / are correctly rounded on both devices (nvcc without --use_fast_math), so with the
// unfused products and sums above the result is bit-identical on CPU and CUDA.
template <class Scalar>
LM_HD void adamw_element(Scalar& p, Scalar& m, Scalar& v, Scalar g, const AdamWCoeffs<Scalar>& c) {
  m = add_rn(mul_rn(c.beta1, m), mul_rn(sub_rn(Scalar(1), c.beta1), g));
  v = add_rn(mul_rn(c.beta2, v), mul_rn(mul_rn(sub_rn(Scalar(1), c.beta2), g), g));
  const Scalar denom = add_rn(mul_rn(std::sqrt(v), c.inv_sqrt_bc2), c.eps);
  p = sub_rn(mul_rn(p, c.decay), mul_rn(c.step, m) / denom);
}

}  // namespace nnmath
}  // namespace lm
