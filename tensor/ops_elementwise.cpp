// ops_elementwise.cpp: fronts for unary, binary (broadcasting), scalar and where ops.
// Each checks dtypes/devices, broadcasts, allocates the output and calls the device kernel.
#include "tensor/dispatch.h"
#include "tensor/ops.h"

namespace lm {

namespace {
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  LM_CHECK(a.defined() && b.defined(), op << ": undefined input");
  LM_CHECK(a.dtype() == b.dtype(),
           op << ": dtypes differ (" << describe(a) << " vs " << describe(b) << "); convert one with to(dtype)");
  LM_CHECK(a.device() == b.device(), op << ": devices differ (" << describe(a) << " vs " << describe(b) << ")");
}
bool float_only(UnaryOp op) { return op != UnaryOp::Neg && op != UnaryOp::Relu; }
bool float_only(BinaryOp op) { return op == BinaryOp::Div || op == BinaryOp::GeluBackward; }
}  // namespace

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
      return "neg";
    case UnaryOp::Exp:
      return "exp";
    case UnaryOp::Log:
      return "log";
    case UnaryOp::Sqrt:
      return "sqrt";
    case UnaryOp::Tanh:
      return "tanh";
    case UnaryOp::Relu:
      return "relu";
    case UnaryOp::Gelu:
      return "gelu";
  }
  return "?";
}
const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
    case BinaryOp::Eq:
      return "eq";
    case BinaryOp::Ne:
      return "ne";
    case BinaryOp::Lt:
      return "lt";
    case BinaryOp::Le:
      return "le";
    case BinaryOp::Gt:
      return "gt";
    case BinaryOp::Ge:
      return "ge";
    case BinaryOp::Max:
      return "maximum";
    case BinaryOp::Min:
      return "minimum";
    case BinaryOp::ReluBackward:
      return "relu_backward";
    case BinaryOp::GeluBackward:
      return "gelu_backward";
  }
  return "?";
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* name = unary_op_name(op);
  LM_CHECK(x.defined(), name << ": undefined input");
  LM_CHECK(!float_only(op) || is_floating(x.dtype()), name << ": needs f32 or f64, got " << describe(x));
  Tensor xc = x.contiguous();
  Tensor out(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) LM_KERNEL(x.device(), unary, op, xc, out);
  return out;
}
Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
Tensor gelu(const Tensor& x) { return unary(UnaryOp::Gelu, x); }

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_pair(name, a, b);
  LM_CHECK(!float_only(op) || is_floating(a.dtype()), name << ": needs f32 or f64, got " << describe(a));
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out(shape, a.dtype(), a.device());
  if (out.numel() > 0) LM_KERNEL(a.device(), binary, op, a.expand(shape), b.expand(shape), out);
  return out;
}
Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Max, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Min, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }

Tensor relu_backward(const Tensor& x, const Tensor& g) {
  LM_CHECK(x.shape() == g.shape(), "relu_backward: x " << describe(x) << " and grad " << describe(g) << " differ");
  return binary(BinaryOp::ReluBackward, x, g);
}
Tensor gelu_backward(const Tensor& x, const Tensor& g) {
  LM_CHECK(x.shape() == g.shape(), "gelu_backward: x " << describe(x) << " and grad " << describe(g) << " differ");
  return binary(BinaryOp::GeluBackward, x, g);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_pair("where", a, b);
  LM_CHECK(cond.defined() && cond.device() == a.device(),
           "where: condition " << describe(cond) << " must be on the same device as " << describe(a));
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out(shape, a.dtype(), a.device());
  if (out.numel() > 0) LM_KERNEL(a.device(), where, cond.expand(shape), a.expand(shape), b.expand(shape), out);
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_left) {
  const char* name = binary_op_name(op);
  LM_CHECK(x.defined(), name << ": undefined input");
  LM_CHECK(!float_only(op) || is_floating(x.dtype()), name << ": needs f32 or f64, got " << describe(x));
  LM_CHECK(is_floating(x.dtype()) || s == static_cast<double>(static_cast<int32_t>(s)),
           name << ": scalar " << s << " is not an i32 value, but the tensor is " << describe(x));
  Tensor xc = x.contiguous();
  Tensor out(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) LM_KERNEL(x.device(), binary_scalar, op, xc, s, scalar_left, out);
  return out;
}
Tensor add(const Tensor& x, double s) { return binary_scalar(BinaryOp::Add, x, s); }
Tensor sub(const Tensor& x, double s) { return binary_scalar(BinaryOp::Sub, x, s); }
Tensor mul(const Tensor& x, double s) { return binary_scalar(BinaryOp::Mul, x, s); }
Tensor div(const Tensor& x, double s) { return binary_scalar(BinaryOp::Div, x, s); }
Tensor rsub(double s, const Tensor& x) { return binary_scalar(BinaryOp::Sub, x, s, true); }
Tensor rdiv(double s, const Tensor& x) { return binary_scalar(BinaryOp::Div, x, s, true); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& x, double s) { return add(x, s); }
Tensor operator-(const Tensor& x, double s) { return sub(x, s); }
Tensor operator*(const Tensor& x, double s) { return mul(x, s); }
Tensor operator/(const Tensor& x, double s) { return div(x, s); }
Tensor operator*(double s, const Tensor& x) { return mul(x, s); }

}  // namespace lm
