// fn_elementwise.cpp: differentiable elementwise ops. For broadcasting binary ops the gradient
// of an input is summed back to that input's shape (sum_to), the adjoint of broadcasting.
#include "autograd/functions.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

namespace {
// The saved tensor when `needed`, else an empty handle: backward keeps only what it uses.
Tensor keep_if(bool needed, const Tensor& t) { return needed ? t : Tensor(); }
}  // namespace

// y = -x  ->  dx = -g
Var neg(const Var& x) {
  return make_op_result("neg", neg(x.value()), {x}, [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

// y = exp(x)  ->  dx = g * y
Var exp(const Var& x) {
  Tensor y = exp(x.value());
  return make_op_result("exp", y, {x}, [y](const Tensor& g) { return std::vector<Tensor>{mul(g, y)}; });
}

// y = log(x)  ->  dx = g / x
Var log(const Var& x) {
  Tensor xv = x.value();
  return make_op_result("log", log(xv), {x}, [xv](const Tensor& g) { return std::vector<Tensor>{div(g, xv)}; });
}

// y = sqrt(x)  ->  dx = g / (2 y)
Var sqrt(const Var& x) {
  Tensor y = sqrt(x.value());
  return make_op_result("sqrt", y, {x}, [y](const Tensor& g) { return std::vector<Tensor>{div(g, mul(y, 2.0))}; });
}

// y = tanh(x)  ->  dx = g * (1 - y^2)
Var tanh(const Var& x) {
  Tensor y = tanh(x.value());
  return make_op_result("tanh", y, {x},
                        [y](const Tensor& g) { return std::vector<Tensor>{mul(g, rsub(1.0, mul(y, y)))}; });
}

// y = max(x, 0)  ->  dx = g where x > 0
Var relu(const Var& x) {
  Tensor xv = x.value();
  return make_op_result("relu", relu(xv), {x},
                        [xv](const Tensor& g) { return std::vector<Tensor>{relu_backward(xv, g)}; });
}

// y = x Phi(x)  ->  dx = g (Phi(x) + x phi(x))   (math::gelu_grad)
Var gelu(const Var& x) {
  Tensor xv = x.value();
  return make_op_result("gelu", gelu(xv), {x},
                        [xv](const Tensor& g) { return std::vector<Tensor>{gelu_backward(xv, g)}; });
}

// y = a + b  ->  da = g, db = g (each summed to its shape)
Var add(const Var& a, const Var& b) {
  Shape sa = a.shape(), sb = b.shape();
  return make_op_result("add", add(a.value(), b.value()), {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)};
  });
}

// y = a - b  ->  da = g, db = -g
Var sub(const Var& a, const Var& b) {
  Shape sa = a.shape(), sb = b.shape();
  return make_op_result("sub", sub(a.value(), b.value()), {a, b}, [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, sa), neg(sum_to(g, sb))};
  });
}

// y = a * b  ->  da = g * b, db = g * a
Var mul(const Var& a, const Var& b) {
  Tensor av = keep_if(b.requires_grad(), a.value()), bv = keep_if(a.requires_grad(), b.value());
  Shape sa = a.shape(), sb = b.shape();
  return make_op_result("mul", mul(a.value(), b.value()), {a, b}, [av, bv, sa, sb](const Tensor& g) {
    return std::vector<Tensor>{bv.defined() ? sum_to(mul(g, bv), sa) : Tensor(),
                               av.defined() ? sum_to(mul(g, av), sb) : Tensor()};
  });
}

// y = a / b  ->  da = g / b, db = -g a / b^2 = -g y / b
Var div(const Var& a, const Var& b) {
  Tensor y = div(a.value(), b.value());
  Tensor bv = b.value();
  Shape sa = a.shape(), sb = b.shape();
  bool need_b = b.requires_grad();
  return make_op_result("div", y, {a, b}, [y, bv, sa, sb, need_b](const Tensor& g) {
    Tensor gb = div(g, bv);
    return std::vector<Tensor>{sum_to(gb, sa), need_b ? sum_to(neg(mul(gb, y)), sb) : Tensor()};
  });
}

// y = max(a, b)  ->  da = g where a >= b, db = g where a < b
Var maximum(const Var& a, const Var& b) {
  Tensor pick_a = ge(a.value(), b.value());
  Shape sa = a.shape(), sb = b.shape();
  return make_op_result("maximum", maximum(a.value(), b.value()), {a, b}, [pick_a, sa, sb](const Tensor& g) {
    Tensor z = zeros({}, g.dtype(), g.device());
    return std::vector<Tensor>{sum_to(where(pick_a, g, z), sa), sum_to(where(pick_a, z, g), sb)};
  });
}

// y = min(a, b)  ->  da = g where a <= b, db = g where a > b
Var minimum(const Var& a, const Var& b) {
  Tensor pick_a = le(a.value(), b.value());
  Shape sa = a.shape(), sb = b.shape();
  return make_op_result("minimum", minimum(a.value(), b.value()), {a, b}, [pick_a, sa, sb](const Tensor& g) {
    Tensor z = zeros({}, g.dtype(), g.device());
    return std::vector<Tensor>{sum_to(where(pick_a, g, z), sa), sum_to(where(pick_a, z, g), sb)};
  });
}

// y = cond ? a : b  ->  da = g where cond, db = g where !cond
Var where(const Tensor& cond, const Var& a, const Var& b) {
  Shape sa = a.shape(), sb = b.shape();
  return make_op_result("where", where(cond, a.value(), b.value()), {a, b}, [cond, sa, sb](const Tensor& g) {
    Tensor z = zeros({}, g.dtype(), g.device());
    return std::vector<Tensor>{sum_to(where(cond, g, z), sa), sum_to(where(cond, z, g), sb)};
  });
}

// Scalar forms: y = x + s, x - s  ->  dx = g;  y = x * s  ->  dx = g s;  y = x / s  ->  dx = g / s;
// y = s - x  ->  dx = -g.
Var add(const Var& x, double s) {
  return make_op_result("add_scalar", add(x.value(), s), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}
Var sub(const Var& x, double s) {
  return make_op_result("sub_scalar", sub(x.value(), s), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}
Var mul(const Var& x, double s) {
  return make_op_result("mul_scalar", mul(x.value(), s), {x},
                        [s](const Tensor& g) { return std::vector<Tensor>{mul(g, s)}; });
}
Var div(const Var& x, double s) {
  return make_op_result("div_scalar", div(x.value(), s), {x},
                        [s](const Tensor& g) { return std::vector<Tensor>{div(g, s)}; });
}
Var rsub(double s, const Var& x) {
  return make_op_result("rsub_scalar", rsub(s, x.value()), {x},
                        [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Var operator+(const Var& a, const Var& b) { return add(a, b); }
Var operator-(const Var& a, const Var& b) { return sub(a, b); }
Var operator*(const Var& a, const Var& b) { return mul(a, b); }
Var operator/(const Var& a, const Var& b) { return div(a, b); }
Var operator-(const Var& x) { return neg(x); }
Var operator+(const Var& x, double s) { return add(x, s); }
Var operator-(const Var& x, double s) { return sub(x, s); }
Var operator*(const Var& x, double s) { return mul(x, s); }
Var operator/(const Var& x, double s) { return div(x, s); }
Var operator*(double s, const Var& x) { return mul(x, s); }

}  // namespace lm
