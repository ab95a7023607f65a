// cpu/layernorm_row.h: layer norm of one row, the arithmetic of the CPU layernorm kernel
// (tensor/cpu/nn.cpp), also called by the one-token decode step (beyond/decode_step.cpp), so that
// both give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

namespace lm {
namespace cpu {

// y = (x - mean) * rstd * w + b over the C values of x; mean and variance in two passes in f64
// (stable even when |mean| >> std), rounded to Scalar once. Returns mean and rstd through the
// pointers when given (the backward pass needs them).
template <class Scalar>
inline void layernorm_row(const Scalar* x, const Scalar* w, const Scalar* b, int64_t C, double eps, Scalar* y,
                          Scalar* mean_out = nullptr, Scalar* rstd_out = nullptr) {
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += x[c];
  const double m = s / static_cast<double>(C);
  double v = 0;
  for (int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
  v /= static_cast<double>(C);
  const Scalar mu = static_cast<Scalar>(m), rs = static_cast<Scalar>(1.0 / std::sqrt(v + eps));
  for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - mu) * rs * w[c] + b[c];
  if (mean_out) *mean_out = mu;
  if (rstd_out) *rstd_out = rs;
}

}  // namespace cpu
}  // namespace lm
