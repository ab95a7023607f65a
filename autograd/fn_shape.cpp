// fn_shape.cpp: differentiable views and concat. A view's backward undoes the view on the
// gradient: reshape back, transpose back, inverse permutation, zero-pad a narrow, sum an expand.
#include "autograd/functions.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

Var reshape(const Var& x, const Shape& shape) {
  Shape s = x.shape();
  return make_op_result("reshape", x.value().reshape(shape), {x},
                        [s](const Tensor& g) { return std::vector<Tensor>{g.reshape(s)}; });
}

Var transpose(const Var& x, int64_t d0, int64_t d1) {
  return make_op_result("transpose", x.value().transpose(d0, d1), {x},
                        [d0, d1](const Tensor& g) { return std::vector<Tensor>{g.transpose(d0, d1)}; });
}

Var permute(const Var& x, const std::vector<int64_t>& dims) {
  Tensor y = x.value().permute(dims);
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[normalize_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  return make_op_result("permute", y, {x},
                        [inverse](const Tensor& g) { return std::vector<Tensor>{g.permute(inverse)}; });
}

// y = x[start : start + length] along dim  ->  dx = g placed in a zero tensor of x's shape
Var narrow(const Var& x, int64_t dim, int64_t start, int64_t length) {
  Shape s = x.shape();
  int64_t d = normalize_dim(dim, x.dim(), "narrow");
  return make_op_result("narrow", x.value().narrow(d, start, length), {x}, [s, d, start, length](const Tensor& g) {
    Tensor dx = zeros(s, g.dtype(), g.device());
    dx.narrow(d, start, length).copy_(g);
    return std::vector<Tensor>{dx};
  });
}

Var expand(const Var& x, const Shape& shape) {
  Shape s = x.shape();
  return make_op_result("expand", x.value().expand(shape), {x},
                        [s](const Tensor& g) { return std::vector<Tensor>{sum_to(g, s)}; });
}

Var unsqueeze(const Var& x, int64_t dim) {
  Shape s = x.shape();
  return make_op_result("unsqueeze", x.value().unsqueeze(dim), {x},
                        [s](const Tensor& g) { return std::vector<Tensor>{g.reshape(s)}; });
}

Var squeeze(const Var& x, int64_t dim) {
  Shape s = x.shape();
  return make_op_result("squeeze", x.value().squeeze(dim), {x},
                        [s](const Tensor& g) { return std::vector<Tensor>{g.reshape(s)}; });
}

Var contiguous(const Var& x) {
  return make_op_result("contiguous", x.value().contiguous(), {x},
                        [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

// y = [x0 | x1 | ...] along dim  ->  dxi = the matching slice of g
Var concat(const std::vector<Var>& xs, int64_t dim) {
  std::vector<Tensor> values;
  std::vector<int64_t> sizes;
  for (const Var& x : xs) {
    values.push_back(x.value());
    sizes.push_back(x.dim() > 0 ? x.size(dim) : 0);
  }
  Tensor y = concat(values, dim);
  int64_t d = normalize_dim(dim, y.dim(), "concat");
  return make_op_result("concat", y, xs, [sizes, d](const Tensor& g) {
    std::vector<Tensor> grads;
    int64_t at = 0;
    for (int64_t n : sizes) {
      grads.push_back(g.narrow(d, at, n).contiguous());
      at += n;
    }
    return grads;
  });
}

}  // namespace lm
