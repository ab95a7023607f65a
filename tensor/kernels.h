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

namespace cpu {
#include "tensor/kernel_list.inc"
}  // namespace cpu

namespace cuda {
#include "tensor/kernel_list.inc"
}  // namespace cuda

}  // namespace lm
