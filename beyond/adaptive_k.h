// adaptive_k.h: beyond the paper. Adaptive k (--left-out E, exact positions): each row keeps the
// fewest of its best-scored blocks whose left-out weight M (certificate.h) is at most E, and at
// most the k it chose. It attaches at the "which chosen blocks are kept" point of infer/hooks.h and
// ranks by the plan's own scores (RetrievalPlan::all_scores): no landmark is scored twice.
#pragma once

#include <cstdint>
#include <vector>

#include "beyond/local_gates.h"
#include "infer/hooks.h"
#include "infer/retrieval_plan.h"

namespace lm {

// Adaptive k: rows over which it ran, the blocks they kept, and those that kept all they had
// chosen while their left-out weight was still above E (capped by k).
struct AdaptiveCount {
  int64_t rows = 0, blocks = 0, capped = 0;
  void add(const AdaptiveCount& o) {
    rows += o.rows;
    blocks += o.blocks;
    capped += o.capped;
  }
};

// Cuts each row of `plan` (a scan's top k, exact positions) to the fewest of its blocks, best score
// first (ties: the older block), whose left-out weight is at most E. `scores` (NH, n, nb): every
// cached block's score as the scan ranked them. A row the CMT gates off keeps none (its M is 0
// whatever it reads).
AdaptiveCount trim_to_left_out(const ChunkContext& ctx, const std::vector<double>& scores, const LocalGates& g,
                               double E, RetrievalPlan& plan);

// The hook. `gates`: shared with the CMT skip (cmt_skip.h) when both are attached.
class AdaptiveK : public RetrievalHooks {
 public:
  AdaptiveK(double E, LocalGatesOnce* gates) : E_(E), gates_(gates) {}
  bool needs_scores(const ChunkContext&) const override { return true; }
  void keep(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
            RetrievalPlan& plan) override;
  void end_chunk(const LayerCache&, const ChunkContext&, const RetrievalPlan&, const RetrievalPlan&) override {
    gates_->clear();
  }
  AdaptiveCount count;  // over every (chunk, layer) of the chunk path

 private:
  double E_;
  LocalGatesOnce* gates_;
};

}  // namespace lm
