// ops_reduce.cpp: fronts for reductions over one dim, sum_to (the adjoint of broadcasting) and
// the softmax family.
#include "tensor/create.h"
#include "tensor/dispatch.h"
#include "tensor/ops.h"

namespace lm {

namespace {
const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Argmax:
      return "argmax";
  }
  return "?";
}

Tensor reduce_dim(ReduceOp op, const Tensor& x, int64_t dim, bool keepdim) {
  const char* name = reduce_name(op);
  LM_CHECK(x.defined(), name << ": undefined input");
  LM_CHECK(op != ReduceOp::Mean || is_floating(x.dtype()), name << ": needs f32 or f64, got " << describe(x));
  if (x.dim() == 0) return op == ReduceOp::Argmax ? zeros({}, DType::I32, x.device()) : x.clone();
  const int64_t d = normalize_dim(dim, x.dim(), name);
  const int64_t n = x.size(d);
  LM_CHECK(n > 0 || op == ReduceOp::Sum,
           name << ": cannot reduce over dim " << d << " of size 0 (" << describe(x) << ")");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  Shape out_shape = x.shape();
  out_shape[d] = 1;
  Tensor out(out_shape, op == ReduceOp::Argmax ? DType::I32 : x.dtype(), x.device());
  if (out.numel() > 0) {
    if (n == 0)
      out.zero_();
    else
      LM_KERNEL(x.device(), reduce, op, x.contiguous(), outer, n, inner, out);
  }
  return keepdim ? out : out.squeeze(d);
}
}  // namespace

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return reduce_dim(ReduceOp::Sum, x, dim, keepdim); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return reduce_dim(ReduceOp::Mean, x, dim, keepdim); }
Tensor max(const Tensor& x, int64_t dim, bool keepdim) { return reduce_dim(ReduceOp::Max, x, dim, keepdim); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return reduce_dim(ReduceOp::Argmax, x, dim, keepdim); }
Tensor sum(const Tensor& x) { return reduce_dim(ReduceOp::Sum, x.reshape({x.numel()}), 0, false); }
Tensor mean(const Tensor& x) {
  LM_CHECK(x.numel() > 0, "mean: tensor " << describe(x) << " has no elements");
  return reduce_dim(ReduceOp::Mean, x.reshape({x.numel()}), 0, false);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  LM_CHECK(static_cast<int64_t>(shape.size()) <= x.dim(),
           "sum_to: cannot sum " << describe(x) << " down to the larger shape " << shape_str(shape));
  Tensor t = x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  for (int64_t i = 0; i < lead; ++i) t = sum(t, 0, false);  // dims broadcasting added in front
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (shape[i] == 1 && t.size(i) != 1)
      t = sum(t, i, true);
    else
      LM_CHECK(shape[i] == t.size(i), "sum_to: " << describe(x) << " does not broadcast from " << shape_str(shape));
  }
  return t;
}

namespace {
Tensor softmax_front(const Tensor& x, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  LM_CHECK(x.defined() && x.dim() >= 1, name << ": needs at least a 1-d tensor, got " << describe(x));
  LM_CHECK(is_floating(x.dtype()), name << ": needs f32 or f64, got " << describe(x));
  Tensor xc = x.contiguous();
  Tensor out(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) LM_KERNEL(x.device(), softmax, xc, out, log);
  return out;
}
Tensor softmax_backward_front(const Tensor& y, const Tensor& g, bool log) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  LM_CHECK(y.defined() && g.defined() && y.shape() == g.shape() && y.dtype() == g.dtype() && y.device() == g.device(),
           name << ": output " << describe(y) << " and its gradient " << describe(g) << " must match");
  Tensor dx(y.shape(), y.dtype(), y.device());
  if (dx.numel() > 0) LM_KERNEL(y.device(), softmax_backward, y.contiguous(), g.contiguous(), dx, log);
  return dx;
}
}  // namespace

Tensor softmax(const Tensor& x) { return softmax_front(x, false); }
Tensor log_softmax(const Tensor& x) { return softmax_front(x, true); }
Tensor softmax_backward(const Tensor& y, const Tensor& g) { return softmax_backward_front(y, g, false); }
Tensor log_softmax_backward(const Tensor& y, const Tensor& g) { return softmax_backward_front(y, g, true); }

}  // namespace lm
