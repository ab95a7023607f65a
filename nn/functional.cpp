// functional.cpp: fronts and autograd wrappers for nn/'s fused ops (functional.h).
#include "nn/functional.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "nn/kernels.h"
#include "tensor/create.h"
#include "tensor/dispatch.h"
#include "tensor/ops.h"

namespace lm {

RotaryTables rotary_tables(const Tensor& positions, int64_t head_size, double base, DType dtype, Device device) {
  LM_CHECK(positions.defined() && positions.dim() == 2 && positions.dtype() == DType::I32,
           "rotary_tables: positions must be i32 (PB, T), got " << describe(positions));
  LM_CHECK(head_size > 0 && head_size % 2 == 0,
           "rotary_tables: head size must be even and positive, got " << head_size);
  LM_CHECK(base > 1, "rotary_tables: base must be > 1, got " << base);
  const int64_t PB = positions.size(0), T = positions.size(1), half = head_size / 2;
  std::vector<int32_t> pos = positions.to_vector<int32_t>();
  std::vector<double> inv_freq(half);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_size));
  std::vector<double> c(PB * T * half), s(PB * T * half);
  for (int64_t r = 0; r < PB * T; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[r]) * inv_freq[i];
      c[r * half + i] = std::cos(angle);
      s[r * half + i] = std::sin(angle);
    }
  RotaryTables t{from_vector(c, {PB, T, half}).to(dtype).to(device),
                 from_vector(s, {PB, T, half}).to(dtype).to(device)};
  return t;
}

RotaryTables rotary_tables(int64_t T, int64_t head_size, double base, DType dtype, Device device) {
  return rotary_tables(arange(T, DType::I32).reshape({1, T}), head_size, base, dtype, device);
}

namespace {
// The tables fit heads of batch B, length T, head size HS, in x's dtype and on x's device.
void check_tables(const char* op, const RotaryTables& t, const Tensor& x, int64_t B, int64_t T, int64_t HS) {
  LM_CHECK(t.cos.defined() && t.cos.dim() == 3 && (t.cos.size(0) == 1 || t.cos.size(0) == B) && t.cos.size(1) == T &&
               t.cos.size(2) * 2 == HS && t.sin.shape() == t.cos.shape(),
           op << ": tables " << describe(t.cos) << " do not fit x " << describe(x) << " (need (1 or " << B << ", " << T
              << ", " << HS / 2 << "))");
  LM_CHECK(t.cos.dtype() == x.dtype() && t.cos.device() == x.device(),
           op << ": tables " << describe(t.cos) << " must match x " << describe(x) << " in dtype and device");
}
}  // namespace

Tensor rotary(const Tensor& x, const RotaryTables& t, bool inverse) {
  LM_CHECK(x.defined() && x.dim() == 4 && is_floating(x.dtype()),
           "rotary: x must be float (B, NH, T, HS), got " << describe(x));
  check_tables("rotary", t, x, x.size(0), x.size(2), x.size(3));
  Tensor out(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0)
    LM_KERNEL(x.device(), rotary, x.contiguous(), t.cos.contiguous(), t.sin.contiguous(), inverse, out);
  return out;
}

// y = R(angle) x per pair  ->  dx = R(angle)^T g = R(-angle) g
Var rotary(const Var& x, const RotaryTables& t) {
  return make_op_result("rotary", rotary(x.value(), t, false), {x},
                        [t](const Tensor& g) { return std::vector<Tensor>{rotary(g, t, true)}; });
}

namespace {
void check_qkv(const Var& q, const Var& k, const Var& v) {
  LM_CHECK(q.dim() == 4 && is_floating(q.dtype()),
           "causal_attention: q must be float (B, NH, T, HS), got " << describe(q.value()));
  LM_CHECK(k.shape() == q.shape() && v.shape() == q.shape() && k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
               k.device() == q.device() && v.device() == q.device(),
           "causal_attention: q " << describe(q.value()) << ", k " << describe(k.value()) << ", v "
                                  << describe(v.value()) << " must share shape, dtype and device");
}
}  // namespace

// S = scale q k^T (causal), P = softmax(S), y = P v. Backward (kernel_list.inc):
// dv = P^T dy, dP = dy v^T, dS = P (dP - rowsum(P dP)), dq = scale dS k, dk = scale dS^T q.
Var causal_attention(const Var& q, const Var& k, const Var& v) {
  check_qkv(q, k, v);
  const int64_t B = q.size(0), NH = q.size(1), T = q.size(2), HS = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Tensor q3 = q.value().contiguous().view({B * NH, T, HS}), k3 = k.value().contiguous().view({B * NH, T, HS}),
         v3 = v.value().contiguous().view({B * NH, T, HS});
  Tensor probs({B * NH, T, T}, q.dtype(), q.device());
  Tensor out({B * NH, T, HS}, q.dtype(), q.device());
  if (out.numel() > 0) LM_KERNEL(q.device(), causal_attention_forward, q3, k3, v3, scale, probs, out);
  Shape shape = q.shape();
  return make_op_result("causal_attention", out.view(shape), {q, k, v},
                        [q3, k3, v3, probs, scale, shape](const Tensor& g) {
                          Tensor dq(q3.shape(), q3.dtype(), q3.device()), dk(q3.shape(), q3.dtype(), q3.device()),
                              dv(q3.shape(), q3.dtype(), q3.device());
                          if (dq.numel() > 0)
                            LM_KERNEL(q3.device(), causal_attention_backward, q3, k3, v3, probs,
                                      g.contiguous().view(q3.shape()), scale, dq, dk, dv);
                          return std::vector<Tensor>{dq.view(shape), dk.view(shape), dv.view(shape)};
                        });
}

Var qkv_heads(const Var& qkv, int64_t NH, const RotaryTables& t) {
  LM_CHECK(
      qkv.dim() == 3 && is_floating(qkv.dtype()) && NH > 0 && qkv.size(2) % (3 * NH) == 0 &&
          qkv.size(2) / (3 * NH) % 2 == 0,
      "qkv_heads: qkv must be float (B, T, 3 NH HS) with NH = " << NH << " and HS even, got " << describe(qkv.value()));
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, HS = C / NH;
  check_tables("qkv_heads", t, qkv.value(), B, T, HS);
  const Tensor cos = t.cos.contiguous(), sin = t.sin.contiguous();
  Tensor packed({3, B, NH, T, HS}, qkv.dtype(), qkv.device());
  if (packed.numel() > 0) LM_KERNEL(qkv.device(), qkv_heads, qkv.value().contiguous(), cos, sin, NH, packed);
  return make_op_result("qkv_heads", packed, {qkv}, [cos, sin, B, T, C, NH](const Tensor& g) {
    Tensor d({B, T, 3 * C}, g.dtype(), g.device());
    if (d.numel() > 0) LM_KERNEL(g.device(), qkv_heads_backward, g.contiguous(), cos, sin, NH, d);
    return std::vector<Tensor>{d};
  });
}

Var causal_attention_packed(const Var& qkvh) {
  LM_CHECK(qkvh.dim() == 5 && qkvh.size(0) == 3 && is_floating(qkvh.dtype()),
           "causal_attention_packed: expected float (3, B, NH, T, HS) from qkv_heads, got " << describe(qkvh.value()));
  const int64_t B = qkvh.size(1), NH = qkvh.size(2), T = qkvh.size(3), HS = qkvh.size(4);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Tensor all = qkvh.value().contiguous().view({3, B * NH, T, HS});
  Tensor q3 = all.select(0, 0), k3 = all.select(0, 1), v3 = all.select(0, 2);
  Tensor probs({B * NH, T, T}, qkvh.dtype(), qkvh.device()), out({B * NH, T, HS}, qkvh.dtype(), qkvh.device());
  if (out.numel() > 0) LM_KERNEL(qkvh.device(), causal_attention_forward, q3, k3, v3, scale, probs, out);
  return make_op_result(
      "causal_attention", out.view({B, NH, T, HS}), {qkvh}, [all, probs, scale, B, NH, T, HS](const Tensor& g) {
        Tensor d(all.shape(), all.dtype(), all.device());
        if (d.numel() > 0)
          LM_KERNEL(all.device(), causal_attention_backward, all.select(0, 0), all.select(0, 1), all.select(0, 2),
                    probs, g.contiguous().view({B * NH, T, HS}), scale, d.select(0, 0), d.select(0, 1), d.select(0, 2));
        return std::vector<Tensor>{d.view({3, B, NH, T, HS})};
      });
}

Var causal_attention_reference(const Var& q, const Var& k, const Var& v) {
  check_qkv(q, k, v);
  const int64_t T = q.size(2), HS = q.size(3);
  Var scores = mul(matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(HS)));  // (B, NH, T, T)
  // Causal mask: key j is visible to query i when j <= i.
  Tensor rows = arange(T, DType::I32, q.device()).reshape({T, 1}),
         cols = arange(T, DType::I32, q.device()).reshape({1, T});
  Tensor visible = le(cols, rows);
  Var masked = where(visible, scores, Var(full({}, -INFINITY, q.dtype(), q.device())));
  return matmul(softmax(masked), v);
}

Var dropout(const Var& x, double p, bool training) {
  LM_CHECK(p >= 0 && p < 1, "dropout: probability must be in [0, 1), got " << p);
  if (!training || p == 0) return x;
  Tensor keep = lt(rand(x.shape(), x.dtype(), x.device()), full({}, 1.0 - p, x.dtype(), x.device()));
  Tensor scale = div(keep, 1.0 - p);
  return mul(x, Var(scale));
}

void adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double lr, double beta1,
                  double beta2, double eps, double weight_decay, int64_t step) {
  LM_CHECK(p.is_contiguous() && m.is_contiguous() && v.is_contiguous(),
           "adamw_update: state tensors must be contiguous");
  LM_CHECK(g.shape() == p.shape() && m.shape() == p.shape() && v.shape() == p.shape() && g.dtype() == p.dtype() &&
               g.device() == p.device(),
           "adamw_update: gradient " << describe(g) << " / moments do not match parameter " << describe(p));
  LM_CHECK(step >= 1, "adamw_update: step counts from 1, got " << step);
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step)),
               bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  if (p.numel() > 0)
    LM_KERNEL(p.device(), adamw_step, p, g.contiguous(), m, v, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

}  // namespace lm
