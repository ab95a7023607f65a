// ops_nn.cpp: fronts for the fused layers: layer norm and cross-entropy, forward and backward.
#include "tensor/create.h"
#include "tensor/dispatch.h"
#include "tensor/ops.h"

namespace lm {

LayerNormResult layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  LM_CHECK(x.defined() && x.dim() >= 1 && is_floating(x.dtype()),
           "layernorm: input must be a float tensor, got " << describe(x));
  const int64_t C = x.size(-1);
  for (const Tensor* p : {&w, &b})
    LM_CHECK(p->defined() && p->shape() == Shape{C} && p->dtype() == x.dtype() && p->device() == x.device(),
             "layernorm: weight and bias must be " << dtype_name(x.dtype()) << " " << device_name(x.device()) << " ["
                                                   << C << "], got " << describe(*p));
  LM_CHECK(eps > 0, "layernorm: eps must be positive, got " << eps);
  Shape row_shape(x.shape().begin(), x.shape().end() - 1);
  LayerNormResult r{Tensor(x.shape(), x.dtype(), x.device()), Tensor(row_shape, x.dtype(), x.device()),
                    Tensor(row_shape, x.dtype(), x.device())};
  if (x.numel() > 0)
    LM_KERNEL(x.device(), layernorm, x.contiguous(), w.contiguous(), b.contiguous(), eps, r.out, r.mean, r.rstd);
  return r;
}

LayerNormGrads layernorm_backward(const Tensor& gout, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd) {
  LM_CHECK(gout.defined() && gout.shape() == x.shape() && gout.dtype() == x.dtype(),
           "layernorm_backward: gradient " << describe(gout) << " must match input " << describe(x));
  const int64_t C = x.size(-1);
  LayerNormGrads g{Tensor(x.shape(), x.dtype(), x.device()), Tensor({C}, x.dtype(), x.device()),
                   Tensor({C}, x.dtype(), x.device())};
  if (x.numel() == 0) {
    g.dw.zero_();
    g.db.zero_();
    return g;
  }
  LM_KERNEL(x.device(), layernorm_backward, gout.contiguous(), x.contiguous(), w.contiguous(), mean.contiguous(),
            rstd.contiguous(), g.dx, g.dw, g.db);
  return g;
}

namespace {
void check_ce(const char* name, const Tensor& logits, const Tensor& targets) {
  LM_CHECK(logits.defined() && logits.dim() == 2 && is_floating(logits.dtype()),
           name << ": logits must be a float (N, V) tensor, got " << describe(logits));
  LM_CHECK(targets.defined() && targets.dtype() == DType::I32 && targets.shape() == Shape{logits.size(0)},
           name << ": targets must be i32 [" << logits.size(0) << "] for logits " << describe(logits) << ", got "
                << describe(targets));
  LM_CHECK(targets.device() == logits.device(), name << ": logits and targets are on different devices");
  LM_CHECK(logits.size(1) > 0, name << ": logits have no classes: " << describe(logits));
}
// Number of rows that carry a loss.
int64_t count_kept(const Tensor& targets, int64_t ignore_index) {
  Tensor keep = ne(targets, full({}, static_cast<double>(ignore_index), DType::I32, targets.device()));
  return static_cast<int64_t>(sum(keep).item());
}
}  // namespace

namespace {
CrossEntropyResult cross_entropy_impl(const Tensor& logits, const Tensor& targets, int64_t ignore_index, bool stats) {
  check_ce("cross_entropy", logits, targets);
  const int64_t N = logits.size(0);
  CrossEntropyResult r;
  if (N == 0) {
    r.loss = zeros({}, logits.dtype(), logits.device());
    return r;
  }
  Tensor losses({N}, logits.dtype(), logits.device());
  if (stats) r.stats = Tensor({N, 2}, logits.dtype(), logits.device());
  Tensor tc = targets.contiguous();
  int64_t bad = LM_KERNEL(logits.device(), cross_entropy, logits.contiguous(), tc, ignore_index, losses, r.stats);
  if (bad >= 0) {
    int32_t t = tc.narrow(0, bad, 1).to_vector<int32_t>()[0];
    LM_FAIL("cross_entropy: target " << t << " in row " << bad << " is out of range [0, " << logits.size(1)
                                     << ") and is not the ignore index " << ignore_index);
  }
  r.kept = count_kept(tc, ignore_index);
  r.loss = r.kept == 0 ? zeros({}, logits.dtype(), logits.device()) : div(sum(losses), static_cast<double>(r.kept));
  return r;
}

Tensor cross_entropy_backward_impl(const Tensor& logits, const Tensor& targets, double gloss, int64_t ignore_index,
                                   const CrossEntropyResult* forward) {
  check_ce("cross_entropy_backward", logits, targets);
  Tensor d(logits.shape(), logits.dtype(), logits.device());
  if (d.numel() == 0) return d;
  Tensor tc = targets.contiguous();
  Tensor stats;
  if (forward != nullptr && forward->stats.defined()) {
    LM_CHECK(forward->stats.shape() == (Shape{logits.size(0), 2}) && forward->stats.dtype() == logits.dtype() &&
                 forward->stats.device() == logits.device(),
             "cross_entropy_backward: the forward's statistics " << describe(forward->stats) << " do not fit logits "
                                                                 << describe(logits));
    stats = forward->stats.contiguous();
  }
  const int64_t kept = forward != nullptr ? forward->kept : count_kept(tc, ignore_index);
  const double scale = kept == 0 ? 0.0 : gloss / static_cast<double>(kept);
  LM_KERNEL(logits.device(), cross_entropy_backward, logits.contiguous(), tc, ignore_index, scale, stats, d);
  return d;
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  return cross_entropy_impl(logits, targets, ignore_index, false).loss;
}

CrossEntropyResult cross_entropy_with_stats(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  return cross_entropy_impl(logits, targets, ignore_index, true);
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, double gloss, int64_t ignore_index) {
  return cross_entropy_backward_impl(logits, targets, gloss, ignore_index, nullptr);
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, double gloss, int64_t ignore_index,
                              const CrossEntropyResult& forward) {
  return cross_entropy_backward_impl(logits, targets, gloss, ignore_index, &forward);
}

}  // namespace lm
