// functions.h: the differentiable version of every tensor op. Each one computes its value with
// the tensor op of the same name (tensor/ops.h) and records a backward function written in
// tensor ops, placed right below its forward in the fn_*.cpp files. Views (reshape, transpose,
// narrow, ...) are differentiable too. Non-differentiable ops (comparisons, argmax) are not here:
// call them on var.value().
#pragma once

#include <vector>

#include "autograd/var.h"
#include "tensor/elementwise_math.h"

namespace lm {

// ---- elementwise (fn_elementwise.cpp) ----
Var neg(const Var& x);
Var exp(const Var& x);
Var log(const Var& x);
Var sqrt(const Var& x);
Var tanh(const Var& x);
Var relu(const Var& x);
Var gelu(const Var& x);
Var add(const Var& a, const Var& b);  // broadcasting, like the tensor ops
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var div(const Var& a, const Var& b);
Var maximum(const Var& a, const Var& b);  // ties send the gradient to a
Var minimum(const Var& a, const Var& b);  // ties send the gradient to a
Var where(const Tensor& cond, const Var& a, const Var& b);
Var add(const Var& x, double s);
Var sub(const Var& x, double s);
Var mul(const Var& x, double s);
Var div(const Var& x, double s);
Var rsub(double s, const Var& x);  // s - x

Var operator+(const Var& a, const Var& b);
Var operator-(const Var& a, const Var& b);
Var operator*(const Var& a, const Var& b);
Var operator/(const Var& a, const Var& b);
Var operator-(const Var& x);
Var operator+(const Var& x, double s);
Var operator-(const Var& x, double s);
Var operator*(const Var& x, double s);
Var operator/(const Var& x, double s);
Var operator*(double s, const Var& x);

// ---- reductions and softmax (fn_reduce.cpp) ----
Var sum(const Var& x, int64_t dim, bool keepdim = false);
Var mean(const Var& x, int64_t dim, bool keepdim = false);
Var max(const Var& x, int64_t dim, bool keepdim = false);  // gradient to the first maximum
Var sum(const Var& x);
Var mean(const Var& x);
Var softmax(const Var& x);
Var log_softmax(const Var& x);

// ---- shape and views (fn_shape.cpp) ----
Var reshape(const Var& x, const Shape& shape);
Var transpose(const Var& x, int64_t d0, int64_t d1);
Var permute(const Var& x, const std::vector<int64_t>& dims);
Var narrow(const Var& x, int64_t dim, int64_t start, int64_t length);
Var expand(const Var& x, const Shape& shape);
Var unsqueeze(const Var& x, int64_t dim);
Var squeeze(const Var& x, int64_t dim);
Var contiguous(const Var& x);
Var concat(const std::vector<Var>& xs, int64_t dim);

// ---- matmul, embedding and fused layers (fn_layers.cpp) ----
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);
Var embedding(const Var& weight, const Tensor& idx);
Var layernorm(const Var& x, const Var& w, const Var& b, double eps = 1e-5);
Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace lm
