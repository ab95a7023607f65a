// fn_layers.cpp: differentiable matmul, embedding, layer norm and cross-entropy.
#include "autograd/functions.h"
#include "tensor/ops.h"

namespace lm {

// C = op(A) op(B). With G = dL/dC:  d op(A) = G op(B)^T,  d op(B) = op(A)^T G; when A was used
// transposed its gradient is the transpose of that, which the trans flags express without copies.
// A weight B shared across the batch (2-d) gets the sum over the batch: fold the batch into M.
Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b) {
  Tensor av = a.value(), bv = b.value();
  Tensor y = matmul(av, bv, trans_a, trans_b);
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  Tensor sa = need_b ? av : Tensor(), sb = need_a ? bv : Tensor();
  return make_op_result("matmul", y, {a, b}, [sa, sb, trans_a, trans_b, need_a, need_b](const Tensor& g) {
    Tensor ga, gb;
    if (need_a) {
      if (!trans_a)
        ga = matmul(g, sb, false, !trans_b);
      else if (sb.dim() == g.dim())
        ga = matmul(sb, g, trans_b, true);
      else
        ga = matmul(g, sb, false, !trans_b).transpose(-1, -2).contiguous();  // shared B, batched g
    }
    if (need_b) {
      Tensor A = sa, G = g;
      if (sb.dim() == 2 && sa.dim() > 2) {  // shared weight: stack the batch into rows
        A = trans_a ? sa.reshape({-1, sa.size(-2), sa.size(-1)}) : sa.reshape({-1, sa.size(-1)});
        G = g.reshape({-1, g.size(-1)});
        if (trans_a) {  // rows of op(A) are columns of each batch's A: no single 2-d fold, sum per batch
          Tensor parts = matmul(A, G.reshape({A.size(0), -1, G.size(-1)}), false, false);
          gb = sum(parts, 0);
          if (trans_b) gb = gb.transpose(0, 1).contiguous();
          return std::vector<Tensor>{ga, gb};
        }
      }
      gb = trans_b ? matmul(G, A, true, trans_a) : matmul(A, G, !trans_a, false);
    }
    return std::vector<Tensor>{ga, gb};
  });
}

// y[n] = W[idx[n]]  ->  dW[v] = sum over n with idx[n] == v of g[n]
Var embedding(const Var& weight, const Tensor& idx) {
  int64_t V = weight.size(0);
  return make_op_result("embedding", embedding(weight.value(), idx), {weight},
                        [idx, V](const Tensor& g) { return std::vector<Tensor>{embedding_backward(g, idx, V)}; });
}

// y = (x - mean) * rstd * w + b  ->  closed form in layernorm_backward (tensor/cpu/nn.cpp)
Var layernorm(const Var& x, const Var& w, const Var& b, double eps) {
  LayerNormResult r = layernorm(x.value(), w.value(), b.value(), eps);
  Tensor xv = x.value(), wv = w.value(), mean = r.mean, rstd = r.rstd;
  return make_op_result("layernorm", r.out, {x, w, b}, [xv, wv, mean, rstd](const Tensor& g) {
    LayerNormGrads d = layernorm_backward(g, xv, wv, mean, rstd);
    return std::vector<Tensor>{d.dx, d.dw, d.db};
  });
}

// loss = mean over kept rows of (logsumexp(l) - l[target])  ->  dl = g (softmax(l) - onehot) / kept
// The forward keeps each row's max and sum of exponentials for the backward (one pass over the
// logits instead of three; on GPT-2 124M's 4096 x 50257 logits that pass is 823 MB in f32).
Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index) {
  Tensor lv = logits.value();
  if (!grad_enabled() || !logits.requires_grad()) return Var(cross_entropy(lv, targets, ignore_index));
  CrossEntropyResult r = cross_entropy_with_stats(lv, targets, ignore_index);
  Tensor loss = r.loss;
  r.loss = Tensor();  // the backward needs the statistics and the count, not the loss
  return make_op_result("cross_entropy", loss, {logits}, [lv, targets, ignore_index, r](const Tensor& g) {
    return std::vector<Tensor>{cross_entropy_backward(lv, targets, g.item(), ignore_index, r)};
  });
}

}  // namespace lm
