// optim.h: AdamW with decoupled weight decay (applied only to parameters the model marks, i.e.
// Linear weights), gradient clipping by global norm, and the learning-rate schedules: the one
// the paper's code uses (PyTorch OneCycleLR: start at lr/100, cosine warm-up over the first 2% of
// steps, cosine down to lr/5) and a plain linear-warmup + cosine decay.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"

namespace lm {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.001;
};

class AdamW {
 public:
  // Keeps pointers to the model's parameters (the model must outlive the optimizer).
  AdamW(Module& model, const AdamWConfig& cfg);
  // One update with learning rate lr from each parameter's accumulated .grad() (parameters with
  // no gradient are skipped, their moments untouched). Advances steps().
  void step(double lr);
  int64_t steps() const { return step_; }
  void set_steps(int64_t s) { step_ = s; }
  const AdamWConfig& config() const { return cfg_; }

  // Moment tensors by parameter name ("<name>.exp_avg", "<name>.exp_avg_sq"), for checkpoints.
  std::vector<std::pair<std::string, Tensor*>> named_state();
  void to(Device device);

 private:
  struct Slot {
    std::string name;
    Var* param;
    bool decay;
    Tensor m, v;
  };
  std::vector<Slot> slots_;
  AdamWConfig cfg_;
  int64_t step_ = 0;
};

// Scale every gradient so their joint L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm(Module& model, double max_norm);
// The joint L2 norm of all gradients (0 when there are none).
double grad_norm(Module& model);

// Learning rate at step s (0-based) of `total` steps.
double lr_one_cycle(int64_t s, int64_t total, double max_lr, double pct_start = 0.02, double div_factor = 100.0,
                    double final_div_factor = 0.05);
double lr_warmup_cosine(int64_t s, int64_t total, double max_lr, int64_t warmup, double min_lr);

}  // namespace lm
