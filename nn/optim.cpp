// optim.cpp: AdamW, gradient clipping and learning-rate schedules (optim.h).
#include "nn/optim.h"

#include <cmath>

#include "nn/functional.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

AdamW::AdamW(Module& model, const AdamWConfig& cfg) : cfg_(cfg) {
  LM_CHECK(cfg.beta1 >= 0 && cfg.beta1 < 1 && cfg.beta2 >= 0 && cfg.beta2 < 1,
           "AdamW: betas must be in [0, 1), got " << cfg.beta1 << ", " << cfg.beta2);
  LM_CHECK(cfg.eps > 0 && cfg.weight_decay >= 0, "AdamW: need eps > 0 and weight_decay >= 0");
  for (auto& [name, p] : model.named_parameters())
    slots_.push_back(Slot{name, p, model.decays(p), zeros_like(p->value()), zeros_like(p->value())});
}

void AdamW::step(double lr) {
  LM_CHECK(std::isfinite(lr) && lr >= 0, "AdamW: learning rate must be finite and >= 0, got " << lr);
  ++step_;
  for (Slot& s : slots_) {
    const Tensor& g = s.param->grad();
    if (!g.defined()) continue;
    adamw_update(s.param->value(), g, s.m, s.v, lr, cfg_.beta1, cfg_.beta2, cfg_.eps, s.decay ? cfg_.weight_decay : 0.0,
                 step_);
  }
}

std::vector<std::pair<std::string, Tensor*>> AdamW::named_state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (Slot& s : slots_) {
    out.emplace_back(s.name + ".exp_avg", &s.m);
    out.emplace_back(s.name + ".exp_avg_sq", &s.v);
  }
  return out;
}

void AdamW::to(Device device) {
  for (Slot& s : slots_) {
    s.m = s.m.to(device);
    s.v = s.v.to(device);
  }
}

double grad_norm(Module& model) {
  double total = 0;
  for (Var* p : model.parameters()) {
    const Tensor& g = p->grad();
    if (g.defined()) total += sum(mul(g, g)).to(DType::F64).item();
  }
  return std::sqrt(total);
}

double clip_grad_norm(Module& model, double max_norm) {
  LM_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got " << max_norm);
  const double norm = grad_norm(model);
  if (norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (Var* p : model.parameters())
      if (p->grad().defined()) p->set_grad(mul(p->grad(), scale));
  }
  return norm;
}

namespace {
// Cosine interpolation from `start` (pct 0) to `end` (pct 1), as in PyTorch's OneCycleLR.
double anneal_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1.0);
}
}  // namespace

double lr_one_cycle(int64_t s, int64_t total, double max_lr, double pct_start, double div_factor,
                    double final_div_factor) {
  LM_CHECK(total > 1 && s >= 0 && s < total, "lr_one_cycle: step " << s << " outside [0, " << total << ")");
  const double initial = max_lr / div_factor, min_lr = initial / final_div_factor;
  const double end1 = pct_start * static_cast<double>(total) - 1.0, end2 = static_cast<double>(total) - 1.0;
  const double x = static_cast<double>(s);
  if (x <= end1) return anneal_cos(initial, max_lr, end1 <= 0 ? 1.0 : x / end1);
  return anneal_cos(max_lr, min_lr, (x - end1) / (end2 - end1));
}

double lr_warmup_cosine(int64_t s, int64_t total, double max_lr, int64_t warmup, double min_lr) {
  LM_CHECK(total > 0 && s >= 0 && s < total, "lr_warmup_cosine: step " << s << " outside [0, " << total << ")");
  if (s < warmup) return max_lr * static_cast<double>(s + 1) / static_cast<double>(warmup);
  const double pct =
      total - warmup <= 1 ? 1.0 : static_cast<double>(s - warmup) / static_cast<double>(total - warmup - 1);
  return anneal_cos(max_lr, min_lr, pct);
}

}  // namespace lm
