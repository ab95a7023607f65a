// trainer_batch.cpp: one batch through the model (BatchLoss, trainer_internal.h): the mean loss of
// a standard or landmark batch, its forward and backward in training, and validation's mean over
// fixed batches. Not the sampling of windows (batch.h, landmark_batch.h), nor a Transformer-XL
// model's segments (trainer_xl.cpp) or a rank's share of a batch (trainer_ranks.cpp).
#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "landmark/attention.h"
#include "sparse/attention.h"
#include "tensor/ops.h"
#include "train/batch.h"
#include "train/trainer_internal.h"

namespace lm::trainer_internal {

Var BatchLoss::operator()(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                          uint64_t cursor, bool training) const {
  if (mc.xl_cache > 0) return xl_mean_loss(model, data, starts, seed, cursor);
  if (!mc.landmark()) {
    Batch b = sample_batch(data, o.batch_size, mc.block_size, seed, cursor, starts);
    return model.loss(shard(b.x), shard(b.y));
  }
  LandmarkBatch b = sample_landmark_batch(data, o.batch_size, mc.block_size, lmo, seed, cursor, training, starts);
  // The loss is a mean over the scored targets (landmarks and the CMT are not scored), whose
  // number may differ between rows: each rank's mean is weighted by its share of the batch's
  // targets, so the mean over ranks is the batch's mean.
  const double weight = ranks == 1 ? 1.0 : shard_weight(b.y);
  b.x = shard(b.x);
  b.y = shard(b.y);
  b.kinds = shard(b.kinds);
  b.positions = shard(b.positions);
  LandmarkLayout layout = make_layout(b.kinds, model.device());
  if (!training && mc.context_miss) {
    layout.cmt_cutoff = o.cmt_cutoff;
    layout.cmt_stats = cmt_stats;
  }
  Var loss = model.loss(b.x, b.y, b.positions.to(model.device()), kIgnoreIndex, attention_core(layout, training));
  return weight == 1.0 ? loss : mul(loss, weight);
}

// The paper's dense landmark attention, or with --train-top-k the top-k op (training and
// validation alike: the validation loss is the objective being trained). Under the "all" gates a
// training batch's left-out shares are added into left_out, one entry per layer.
AttentionFn BatchLoss::attention_core(const LandmarkLayout& layout, bool training) const {
  if (o.train_top_k == 0) return landmark_attention_core(layout);
  SparseOptions so;
  so.top_k = o.train_top_k;
  so.gates = parse_sparse_gates(o.train_top_k_gates);
  const bool record = training && so.gates == SparseGates::All;
  if (record) left_out->calls = 0;  // a new forward: its l-th call is layer l again
  return sparse_attention_core(layout, so, record ? left_out : nullptr);
}

void check_loss(double lv, int64_t step) {
  LM_CHECK(std::isfinite(lv), "train: the loss became " << lv << " at step " << step + 1 << " (tensor: loss)");
}

double BatchLoss::forward_backward(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                                   uint64_t cursor, int64_t step) const {
  if (mc.xl_cache > 0) return xl_forward_backward(model, data, starts, seed, cursor, step);
  const double accum = static_cast<double>(o.grad_accum);
  Var loss = (*this)(model, data, starts, seed, cursor, true);
  const double lv = loss.item();
  check_loss(lv, step);
  (o.grad_accum == 1 ? loss : mul(loss, 1.0 / accum)).backward();
  return lv;
}

BatchLoss make_batch_loss(const TrainOptions& o, const GPTConfig& mc, const Tokenizer& tok,
                          const std::string& tok_path) {
  BatchLoss bl{o, mc, LandmarkDataOptions{}};
  if (!mc.landmark()) return bl;
  bl.lmo.every = mc.landmark_every;
  bl.lmo.landmark_id = tok.special_id("<|landmark|>");
  bl.lmo.context_miss = mc.context_miss;
  bl.lmo.cmt_id = tok.special_id("<|cmt|>");
  bl.lmo.cmt_prob = o.cmt_prob;
  bl.lmo.jump_max = o.jump_max;
  LM_CHECK(bl.lmo.landmark_id >= 0,
           "train: the tokenizer in " << tok_path << " has no <|landmark|> token; re-run `landmark prepare`");
  LM_CHECK(!mc.context_miss || bl.lmo.cmt_id >= 0,
           "train: the tokenizer in " << tok_path << " has no <|cmt|> token; re-run `landmark prepare`");
  return bl;
}

// Mean loss over a fixed set of validation windows (same windows at every evaluation).
double evaluate(GPT& model, const TokenFile& val, const std::vector<int64_t>* starts, const TrainOptions& o,
                const BatchLoss& batch_loss) {
  NoGradGuard ng;
  model.eval();
  *batch_loss.cmt_stats = CmtStats{};
  double total = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i)
    total +=
        batch_loss(model, val, starts, o.seed ^ 0x5EEDEFA1ULL, static_cast<uint64_t>(i * o.batch_size), false).item();
  model.train();
  double mean = total / static_cast<double>(o.eval_batches);
  if (batch_loss.ranks > 1) mean = validation_over_ranks(mean, *batch_loss.cmt_stats, batch_loss.ranks);
  return mean;
}

}  // namespace lm::trainer_internal
