// ops.h: every tensor op the library has, as a "front": it checks shapes, dtypes and devices
// (errors name the op and the shapes), allocates the result on the inputs' device and calls the
// CPU or CUDA kernel (tensor/kernels.h). Ops never modify their inputs and return contiguous
// results. Differentiable versions of these ops live in autograd/functions.h.
#pragma once

#include <vector>

#include "tensor/elementwise_math.h"
#include "tensor/tensor.h"

namespace lm {

// ---- elementwise unary: out has x's shape ----
Tensor unary(UnaryOp op, const Tensor& x);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x * Phi(x)

// ---- elementwise binary with broadcasting (PyTorch rules) ----
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Comparisons give 1 where true and 0 where false, in the inputs' dtype (no bool dtype).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// cond != 0 ? a : b, all three broadcast together; a and b share a dtype, cond may differ.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Backward helpers: relu'(x) * g and gelu'(x) * g (same shapes).
Tensor relu_backward(const Tensor& x, const Tensor& g);
Tensor gelu_backward(const Tensor& x, const Tensor& g);

// ---- with a scalar: x op s (or s op x for rsub/rdiv) ----
Tensor binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_left = false);
Tensor add(const Tensor& x, double s);
Tensor sub(const Tensor& x, double s);
Tensor mul(const Tensor& x, double s);
Tensor div(const Tensor& x, double s);
Tensor rsub(double s, const Tensor& x);  // s - x
Tensor rdiv(double s, const Tensor& x);  // s / x

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& x, double s);
Tensor operator-(const Tensor& x, double s);
Tensor operator*(const Tensor& x, double s);
Tensor operator/(const Tensor& x, double s);
Tensor operator*(double s, const Tensor& x);

// ---- reductions over one dim (negative dims count from the end) ----
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);     // values
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i32 indices, first max wins
Tensor sum(const Tensor& x);                                        // all elements -> 0-d
Tensor mean(const Tensor& x);                                       // all elements -> 0-d
// Sum x down to `shape` (the inverse of broadcasting `shape` up to x.shape()).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- softmax family over the last dim ----
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor softmax_backward(const Tensor& y, const Tensor& g);      // y = softmax(x)
Tensor log_softmax_backward(const Tensor& y, const Tensor& g);  // y = log_softmax(x)

// ---- matrix products ----
// a (..., M, K) [(..., K, M) if trans_a], b (..., K, N) [(..., N, K) if trans_b] -> (..., M, N).
// Leading (batch) dims of a and b must be equal, or b may be 2-d and shared by every batch.
// Views that are transposes of contiguous matrices are used in place, not copied.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// ---- indexing ----
// weight (V, C), idx i32 of any shape (...) -> (..., C). Out-of-range indices are an error.
Tensor embedding(const Tensor& weight, const Tensor& idx);
// Scatter-add: gout (..., C), idx (...) -> dweight (V, C) with dweight[idx[n]] += gout[n].
Tensor embedding_backward(const Tensor& gout, const Tensor& idx, int64_t num_embeddings);
// Join tensors along `dim`; all other sizes, the dtype and the device must agree.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

// ---- fused layers ----
struct LayerNormResult {
  Tensor out, mean, rstd;
};  // mean, rstd: x.shape() without the last dim
LayerNormResult layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);
struct LayerNormGrads {
  Tensor dx, dw, db;
};
LayerNormGrads layernorm_backward(const Tensor& gout, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd);

// Mean cross-entropy over rows whose target != ignore_index: logits (N, V), targets i32 (N) -> 0-d.
// When every row is ignored the loss is 0 (not NaN) and so is its gradient.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// d(loss)/d(logits) times the incoming scalar gradient `gloss`.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, double gloss, int64_t ignore_index = -100);
// The loss and what its backward can reuse: each row's max and sum of exp(logit - max) (N, 2),
// and the number of rows that carry a loss. Given those, the backward reads the logits once and
// counts nothing (autograd's cross_entropy does this); the result is the same bits.
struct CrossEntropyResult {
  Tensor loss, stats;
  int64_t kept = 0;
};
CrossEntropyResult cross_entropy_with_stats(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, double gloss, int64_t ignore_index,
                              const CrossEntropyResult& forward);

}  // namespace lm
