// nn/cuda/rotary.cu: rotary position embedding on CUDA, one thread per interleaved pair (dims 2i,
// 2i+1) in a grid-stride loop. The rotation itself is nnmath::rotate_pair (nn/nn_math.h), the
// same unfused arithmetic as the CPU twin nn/cpu/rotary.cpp, so both give identical bits. Not
// fused with the q/k split or the attention that follows: clarity first.
#include "nn/kernels.h"
#include "nn/nn_math.h"
#include "tensor/cuda/common.cuh"

namespace lm {
namespace cuda {

namespace {

// x, out (B, NH, T, HS) contiguous, seen as (B * NH * T rows, half pairs); cos, sin (PB, T, half)
// with PB == 1 (every batch row shares the positions) or PB == B.
template <class Scalar>
__global__ void rotary_kernel(const Scalar* x, const Scalar* cos, const Scalar* sin, Scalar sign, Scalar* out,
                              int64_t NH, int64_t T, int64_t half, bool per_batch, int64_t pairs) {
  LM_CUDA_FOR(i, pairs) {
    const int64_t r = i / half, pair = i % half;  // row (b, h, t) and pair index within the row
    const int64_t t = r % T, b = r / (NH * T);
    const int64_t tab = ((per_batch ? b : 0) * T + t) * half + pair;
    nnmath::rotate_pair(x[2 * i], x[2 * i + 1], cos[tab], sign * sin[tab], out[2 * i], out[2 * i + 1]);
  }
}

// The packed heads (nn/kernel_list.inc, qkv_heads): one thread per pair of the packed
// (3, B, NH, T, HS) tensor. Pair i is in row r = i / half = (part, b, h, t); the row's values sit
// in the (B, T, 3, NH, HS) projection at ((b T + t) 3 + part) C + h HS. `to_packed` reads the
// projection and writes the packed tensor, else the reverse; v (part 2) is copied.
template <class Scalar>
__global__ void move_heads_kernel(const Scalar* src, const Scalar* cos, const Scalar* sin, Scalar sign, bool to_packed,
                                  int64_t B, int64_t NH, int64_t T, int64_t half, bool per_batch, Scalar* dst,
                                  int64_t pairs) {
  const int64_t HS = 2 * half, C = NH * HS;
  LM_CUDA_FOR(i, pairs) {
    const int64_t r = i / half, pair = i % half;
    const int64_t t = r % T, h = r / T % NH, b = r / (T * NH) % B, part = r / (T * NH * B);
    const int64_t at = ((b * T + t) * 3 + part) * C + h * HS + 2 * pair, packed = 2 * i;
    const Scalar* x = src + (to_packed ? at : packed);
    Scalar* y = dst + (to_packed ? packed : at);
    if (part == 2) {
      y[0] = x[0];
      y[1] = x[1];
    } else {
      const int64_t tab = ((per_batch ? b : 0) * T + t) * half + pair;
      nnmath::rotate_pair(x[0], x[1], cos[tab], sign * sin[tab], y[0], y[1]);
    }
  }
}

}  // namespace

void qkv_heads(const Tensor& qkv, const Tensor& cos, const Tensor& sin, int64_t NH, const Tensor& out) {
  const int64_t B = out.size(1), T = out.size(3), half = out.size(4) / 2, pairs = out.numel() / 2;
  if (pairs == 0) return;
  LM_DISPATCH_FLOAT(qkv.dtype(), "qkv_heads", {
    move_heads_kernel<scalar_t><<<blocks_for(pairs), kThreads>>>(qkv.data<scalar_t>(), cos.data<scalar_t>(),
                                                                 sin.data<scalar_t>(), scalar_t(1), true, B, NH, T,
                                                                 half, cos.size(0) != 1, out.data<scalar_t>(), pairs);
    LM_CUDA_CHECK_LAUNCH("move_heads_kernel");
  });
}

void qkv_heads_backward(const Tensor& g, const Tensor& cos, const Tensor& sin, int64_t NH, const Tensor& dqkv) {
  const int64_t B = g.size(1), T = g.size(3), half = g.size(4) / 2, pairs = g.numel() / 2;
  if (pairs == 0) return;
  LM_DISPATCH_FLOAT(g.dtype(), "qkv_heads_backward", {
    move_heads_kernel<scalar_t><<<blocks_for(pairs), kThreads>>>(g.data<scalar_t>(), cos.data<scalar_t>(),
                                                                 sin.data<scalar_t>(), scalar_t(-1), false, B, NH, T,
                                                                 half, cos.size(0) != 1, dqkv.data<scalar_t>(), pairs);
    LM_CUDA_CHECK_LAUNCH("move_heads_kernel");
  });
}

void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  const int64_t NH = x.size(1), T = x.size(2), half = x.size(3) / 2;
  const int64_t pairs = x.numel() / 2;
  if (pairs == 0) return;
  const bool per_batch = cos.size(0) != 1;
  LM_DISPATCH_FLOAT(x.dtype(), "rotary", {
    const scalar_t sign = inverse ? scalar_t(-1) : scalar_t(1);
    rotary_kernel<scalar_t><<<blocks_for(pairs), kThreads>>>(x.data<scalar_t>(), cos.data<scalar_t>(),
                                                             sin.data<scalar_t>(), sign, out.data<scalar_t>(), NH, T,
                                                             half, per_batch, pairs);
    LM_CUDA_CHECK_LAUNCH("rotary_kernel");
  });
}

}  // namespace cuda
}  // namespace lm
