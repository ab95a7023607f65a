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

// The same tables for many calls without recomputing sines and cosines: rows for positions
// [0, P) are computed once (exactly as rotary_tables does) and grown on demand; tables for any
// list of non-negative positions are then row gathers. Inference uses one per session.
class RotaryCache {
 public:
  RotaryCache(int64_t head_size, double base, DType dtype, Device device);
  RotaryTables tables(const std::vector<int32_t>& positions);  // (1, n, HS/2)
  RotaryTables range(int64_t start, int64_t n);                 // positions start .. start+n-1
  // Raw rows (HS/2 values each, consecutive positions adjacent) for loops that rotate by hand;
  // valid until the next call that grows the cache. CPU caches only.
  template <class T> const T* cos_rows(int64_t start, int64_t n) { return rows<T>(cos_, start, n); }
  template <class T> const T* sin_rows(int64_t start, int64_t n) { return rows<T>(sin_, start, n); }
  // The same tables transposed, (HS/2, P): the cos of pair i at position p is
  // cos_cols()[i * col_stride() + p], so consecutive positions of one pair are adjacent (for
  // loops that vectorise over positions). Grown to at least `positions` first; valid until the
  // next call that grows the cache. CPU caches only.
  template <class T> const T* cos_cols(int64_t positions) { return cols<T>(cos_t_, positions); }
  template <class T> const T* sin_cols(int64_t positions) { return cols<T>(sin_t_, positions); }
  int64_t col_stride() const { return cos_.size(0); }

 private:
  void grow(int64_t positions);
  template <class T> const T* rows(const Tensor& table, int64_t start, int64_t n) {
    LM_CHECK(device_ == Device::CPU && start >= 0 && n >= 0, "RotaryCache: raw rows need a CPU cache and a valid range");
    grow(start + n);
    return table.template data<T>() + start * (head_size_ / 2);
  }
  template <class T> const T* cols(const Tensor& table_t, int64_t positions) {
    LM_CHECK(device_ == Device::CPU && positions >= 0, "RotaryCache: raw columns need a CPU cache and a valid count");
    grow(positions);  // reassigns the member table_t refers to, so read it after
    return table_t.template data<T>();
  }
  int64_t head_size_;
  double base_;
  DType dtype_;
  Device device_;
  Tensor cos_, sin_;      // (P, HS/2)
  Tensor cos_t_, sin_t_;  // (HS/2, P), CPU caches only
};

// x (B, NH, T, HS) rotated pairwise by the table angles (by minus the angles when inverse).
Tensor rotary(const Tensor& x, const RotaryTables& tables, bool inverse = false);
// Differentiable: a rotation's transpose is the inverse rotation, so dx = rotary(g, inverse).
Var rotary(const Var& x, const RotaryTables& tables);

// Fused causal attention: q, k, v (B, NH, T, HS) -> (B, NH, T, HS), scale 1/sqrt(HS).
Var causal_attention(const Var& q, const Var& k, const Var& v);
// The same function composed from matmul, where and softmax (autograd does the backward).
Var causal_attention_reference(const Var& q, const Var& k, const Var& v);

// Inverted dropout: zero each element with probability p and scale the rest by 1/(1-p); the
// mask comes from the project RNG (rng.h). Identity when !training or p == 0.
Var dropout(const Var& x, double p, bool training);

// One fused AdamW step on a parameter tensor (see nn/kernel_list.inc for the formula).
void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double lr, double beta1,
                  double beta2, double eps, double weight_decay, int64_t step);

}  // namespace lm
