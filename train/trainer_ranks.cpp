// trainer_ranks.cpp: data-parallel training's part in the loop (docs/distributed.md): a rank's
// rows of each batch and their weight, the loss and gradients averaged over the ranks, one clock
// and one stop for all. Not the transport (MPI and NCCL are distributed.h's), nor the step itself
// (trainer.cpp); with one rank every function here is a no-op or the identity.
#include <ostream>
#include <vector>

#include "nn/functional.h"
#include "train/distributed.h"
#include "train/trainer_internal.h"

namespace lm::trainer_internal {

Tensor BatchLoss::shard(const Tensor& t) const {
  if (ranks == 1) return t;
  const int64_t rows = t.size(0) / ranks;
  return t.narrow(0, rank * rows, rows).contiguous();
}

double BatchLoss::shard_weight(const Tensor& y) const {
  const std::vector<int32_t> v = y.to_vector<int32_t>();
  const int64_t T = y.size(1), rows = y.size(0) / ranks;
  int64_t mine = 0, all = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    if (v[static_cast<size_t>(i)] == kIgnoreIndex) continue;
    ++all;
    if (i / T / rows == rank) ++mine;
  }
  return all == 0 ? 1.0 : static_cast<double>(ranks) * static_cast<double>(mine) / static_cast<double>(all);
}

double validation_over_ranks(double mean, CmtStats& c, int ranks) {
  std::vector<double> v{mean, static_cast<double>(c.rows), static_cast<double>(c.dropped)};
  dist::allreduce_sum(v);
  c.rows = static_cast<int64_t>(v[1]);
  c.dropped = static_cast<int64_t>(v[2]);
  return v[0] / static_cast<double>(ranks);
}

double average_over_ranks(GPT& model, double loss, int ranks) {
  std::vector<Tensor> grads;
  for (Var* p : model.parameters()) grads.push_back(p->grad());
  dist::average_gradients(grads);
  std::vector<double> l{loss};
  dist::allreduce_sum(l);
  return l[0] / static_cast<double>(ranks);
}

void log_data_parallel(std::ostream& log, GPT& model, const TrainOptions& o, const dist::World& world) {
  if (world.size <= 1) return;
  int64_t grad_bytes = 0;
  for (Var* p : model.parameters())
    grad_bytes += p->value().numel() * static_cast<int64_t>(dtype_size(p->value().dtype()));
  log << "data parallel: " << world.size << " ranks of " << o.batch_size / world.size << " rows each; " << grad_bytes
      << " bytes of gradients summed across ranks per step (one all-reduce)\n";
}

bool stop_on_any_rank(bool stop, const dist::World& world) {
  if (world.size <= 1) return stop;
  std::vector<double> f{stop ? 1.0 : 0.0};
  dist::allreduce_sum(f);
  return f[0] > 0;
}

void follow_root_clock(double& clock_s, bool& over_limit, const dist::World& world) {
  if (world.size <= 1) return;
  std::vector<double> c{clock_s, over_limit ? 1.0 : 0.0};
  dist::broadcast(c);
  clock_s = c[0];
  over_limit = c[1] != 0;
}

}  // namespace lm::trainer_internal
