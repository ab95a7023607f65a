// functional.h: nn/'s fused ops as tensor fronts and as differentiable functions: rotary
// position embedding, fused causal attention (and its composed reference), dropout. The fused
// attention saves the softmax probabilities and has a closed-form backward; the reference is
// built from autograd ops and exists to test the fused one.
#pragma once

#include <vector>

#include "autograd/var.h"
#include "tensor/tensor.h"

namespace lm {

// cos/sin tables (PB, T, HS/2) for rotary embedding at integer positions (PB, T), PB = 1 when
// every batch row uses the same positions. angle(t, i) = pos[t] * base^(-2i / HS), computed in
// f64 and rounded once to `dtype`, so shifting positions is as exact as the dtype allows.
struct RotaryTables {
  Tensor cos, sin;
};
RotaryTables rotary_tables(const Tensor& positions, int64_t head_size, double base, DType dtype, Device device);
RotaryTables rotary_tables(int64_t T, int64_t head_size, double base, DType dtype, Device device);  // 0..T-1

// x (B, NH, T, HS) rotated pairwise by the table angles (by minus the angles when inverse).
Tensor rotary(const Tensor& x, const RotaryTables& tables, bool inverse = false);
// Differentiable: a rotation's transpose is the inverse rotation, so dx = rotary(g, inverse).
Var rotary(const Var& x, const RotaryTables& tables);

// Fused causal attention: q, k, v (B, NH, T, HS) -> (B, NH, T, HS), scale 1/sqrt(HS).
Var causal_attention(const Var& q, const Var& k, const Var& v);
// The same function composed from matmul, where and softmax (autograd does the backward).
Var causal_attention_reference(const Var& q, const Var& k, const Var& v);

// The heads of a fused q/k/v projection in one packed tensor: qkv (B, T, 3C), C = NH HS, q at
// columns [0, C), k at [C, 2C), v at [2C, 3C) -> (3, B, NH, T, HS) contiguous, part 0 the
// rotated q, part 1 the rotated k, part 2 v. The same values as narrow + reshape + transpose +
// contiguous + rotary per part; the backward writes the (B, T, 3C) gradient in one pass instead
// of padding three slices with zeros and adding them.
Var qkv_heads(const Var& qkv, int64_t NH, const RotaryTables& tables);
// causal_attention on qkv_heads' packed tensor: (3, B, NH, T, HS) -> (B, NH, T, HS). The backward
// writes dq, dk and dv into one packed gradient, so nothing is padded or summed on the way back.
Var causal_attention_packed(const Var& qkvh);

// Inverted dropout: zero each element with probability p and scale the rest by 1/(1-p); the
// mask comes from the project RNG (rng.h). Identity when !training or p == 0.
Var dropout(const Var& x, double p, bool training);

// One fused AdamW step on a parameter tensor (see nn/kernel_list.inc for the formula).
void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double lr, double beta1,
                  double beta2, double eps, double weight_decay, int64_t step);

}  // namespace lm
