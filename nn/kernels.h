// nn/kernels.h: declarations of nn/'s device kernels from the single list in kernel_list.inc.
// They join tensor/'s kernels in namespaces lm::cpu and lm::cuda (namespace = device, folder =
// layer), so fronts dispatch with the same LM_KERNEL macro (tensor/dispatch.h).
#pragma once

#include "tensor/tensor.h"

namespace lm {
namespace cpu {
#include "nn/kernel_list.inc"

// CPU only, no CUDA twin (so not in kernel_list.inc): causal attention after a constant prefix,
// Transformer-XL's cache (nn/xl_attention.h; implementation nn/cpu/xl_attention.cpp).
// q, k, v (BH, T, HS) the current window, ck, cv (BH, M, HS) the cached keys and values, all
// contiguous, M >= 0. Query i sees every cached key and the current keys j <= i. probs
// (BH, T, M + T) receives P = softmax(scale q [ck | k]^T), 0 at the masked columns j > M + i
// (saved for the backward); out (BH, T, HS) = P [cv | v].
void prefix_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& ck, const Tensor& cv,
                              double scale, const Tensor& probs, const Tensor& out);
// Given dout (BH, T, HS), with the cache a constant: dv = P[:, M:]^T dout; dP = dout [cv | v]^T;
// dS = P * (dP - rowsum(P * dP)); dq = scale dS [ck | k]; dk = scale dS[:, M:]^T q. All outputs
// (BH, T, HS), fully overwritten.
void prefix_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& ck, const Tensor& cv,
                               const Tensor& probs, const Tensor& dout, double scale, const Tensor& dq,
                               const Tensor& dk, const Tensor& dv);
}  // namespace cpu
namespace cuda {
#include "nn/kernel_list.inc"
}  // namespace cuda
}  // namespace lm
