// fn_reduce.cpp: differentiable reductions and the softmax family.
#include "autograd/functions.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

namespace {
// The gradient of a reduction over `dim`, broadcast back to the input shape.
Tensor spread(const Tensor& g, const Shape& in_shape, int64_t dim, bool keepdim) {
  Tensor gk = keepdim || in_shape.empty() ? g : g.unsqueeze(dim);
  return gk.expand(in_shape);
}
}  // namespace

// y = sum_d x  ->  dx = g broadcast along d
Var sum(const Var& x, int64_t dim, bool keepdim) {
  Shape s = x.shape();
  int64_t d = s.empty() ? 0 : normalize_dim(dim, x.dim(), "sum");
  return make_op_result("sum", sum(x.value(), dim, keepdim), {x}, [s, d, keepdim](const Tensor& g) {
    return std::vector<Tensor>{spread(g, s, d, keepdim).contiguous()};
  });
}

// y = mean_d x  ->  dx = g / n broadcast along d
Var mean(const Var& x, int64_t dim, bool keepdim) {
  Shape s = x.shape();
  int64_t d = s.empty() ? 0 : normalize_dim(dim, x.dim(), "mean");
  double n = s.empty() ? 1.0 : static_cast<double>(s[d]);
  return make_op_result("mean", mean(x.value(), dim, keepdim), {x}, [s, d, keepdim, n](const Tensor& g) {
    return std::vector<Tensor>{div(spread(g, s, d, keepdim), n)};
  });
}

// y = max_d x  ->  dx = g at the first maximum of each slice, 0 elsewhere
Var max(const Var& x, int64_t dim, bool keepdim) {
  Shape s = x.shape();
  if (s.empty())
    return make_op_result("max", x.value().clone(), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  int64_t d = normalize_dim(dim, x.dim(), "max");
  Tensor where_max = argmax(x.value(), d, true);  // i32, size 1 along d
  return make_op_result("max", max(x.value(), dim, keepdim), {x}, [s, d, keepdim, where_max](const Tensor& g) {
    // one-hot along d: position index == argmax
    Shape pos_shape(s.size(), 1);
    pos_shape[d] = s[d];
    Tensor pos = arange(s[d], DType::I32, g.device()).reshape(pos_shape);
    Tensor onehot = eq(pos, where_max).to(g.dtype());  // broadcasts to s
    return std::vector<Tensor>{mul(onehot, spread(g, s, d, keepdim))};
  });
}

Var sum(const Var& x) { return sum(reshape(x, {x.numel()}), 0, false); }
Var mean(const Var& x) { return mean(reshape(x, {x.numel()}), 0, false); }

// y = softmax(x)  ->  dx = y (g - sum(g y))   (softmax_backward kernel)
Var softmax(const Var& x) {
  Tensor y = softmax(x.value());
  return make_op_result("softmax", y, {x},
                        [y](const Tensor& g) { return std::vector<Tensor>{softmax_backward(y, g)}; });
}

// y = x - logsumexp(x)  ->  dx = g - exp(y) sum(g)
Var log_softmax(const Var& x) {
  Tensor y = log_softmax(x.value());
  return make_op_result("log_softmax", y, {x},
                        [y](const Tensor& g) { return std::vector<Tensor>{log_softmax_backward(y, g)}; });
}

}  // namespace lm
