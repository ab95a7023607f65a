// xl_attention.h: causal attention after a constant prefix, the attention of Transformer-XL's
// cache (GPTConfig::xl_cache): the current window's queries see the M cached keys of the
// positions before it and the window's own keys up to themselves. The cache is a plain Tensor, a
// constant: no gradient flows into it (Transformer-XL's stop-gradient). Two versions, as for the
// plain causal attention (nn/functional.h): a fused op with a closed-form backward (CPU kernel in
// nn/cpu/xl_attention.cpp; no CUDA kernel, a CUDA tensor is refused) and a composed reference.
#pragma once

#include "autograd/var.h"
#include "tensor/tensor.h"

namespace lm {

// q, k, v (B, NH, T, HS) the current window (after rotary); ck, cv (B, NH, M, HS) the cached keys
// (after rotary) and values, M >= 0 (undefined tensors: M = 0) -> (B, NH, T, HS), scale
// 1/sqrt(HS). Query i attends to every cached key and to the current keys j <= i. Gradients flow
// to q, k and v only. With M = 0 it is causal_attention, bit for bit.
Var prefix_attention(const Var& q, const Var& k, const Var& v, const Tensor& ck, const Tensor& cv);
// The same function composed from concat, matmul, where and softmax (autograd does the backward).
Var prefix_attention_reference(const Var& q, const Var& k, const Var& v, const Tensor& ck, const Tensor& cv);

}  // namespace lm
