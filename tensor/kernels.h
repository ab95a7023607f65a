// kernels.h: declarations of the per-device kernels (tensor/cpu/*.cpp and tensor/cuda/*.cu),
// generated from the single list in kernel_list.inc. Only op fronts include this header.
#pragma once

#include <cstdint>

#include "tensor/elementwise_math.h"
#include "tensor/tensor.h"

namespace lm {

enum class ReduceOp : uint8_t { Sum, Mean, Max, Argmax };

// One batched GEMM in row-major terms. Matrix b of A starts at A + b * stride_a; element (i, k)
// of op(A) is A[i * lda + k] when !trans_a and A[k * lda + i] when trans_a (likewise B with
// (k, j)). stride_b == 0 shares one B across the batch (a weight matrix).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  double alpha = 1.0, beta = 0.0;
};

// One GEMM for every head h of BH: C_h = alpha op(A_h) op(B_h), each per-head matrix row-major
// with T rows ((T, HS) or (T, T)); x_cols is operand x's column count, so its leading dimension
// is x_cols and head h's matrix starts x_cols * T elements after head h - 1's. C is overwritten.
// Used by the attention kernels on CUDA (nn/cuda/attention.cu, landmark/cuda/attention.cu).
inline GemmArgs per_head_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t a_cols,
                              int64_t b_cols, int64_t c_cols, int64_t T, int64_t BH, double alpha) {
  GemmArgs g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.M = M;
  g.N = N;
  g.K = K;
  g.batch = BH;
  g.lda = a_cols;
  g.ldb = b_cols;
  g.ldc = c_cols;
  g.stride_a = a_cols * T;
  g.stride_b = b_cols * T;
  g.stride_c = c_cols * T;
  g.alpha = alpha;
  g.beta = 0.0;
  return g;
}

namespace cpu {
#include "tensor/kernel_list.inc"
}  // namespace cpu

namespace cuda {
#include "tensor/kernel_list.inc"
}  // namespace cuda

}  // namespace lm
