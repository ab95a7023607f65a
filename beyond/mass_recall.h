// mass_recall.h: beyond the paper. How much of the oracle's block mass a row's chosen blocks hold
// (--mass-recall): every cached block's keys are kept beside the cache, and each (head, query)
// row's chosen blocks are held against the top k of a full attention's block mass
// (block_scorers.h: agree_with_oracle). It attaches at the "which chosen blocks are kept" point of
// infer/hooks.h, first, so that it sees what retrieval chose before any other hook cuts it, and
// changes nothing; and at the cache, to keep the keys.
#pragma once

#include <cstdint>
#include <vector>

#include "beyond/block_scorers.h"
#include "infer/hooks.h"
#include "infer/retrieval_plan.h"

namespace lm {

class MassRecall : public RetrievalHooks {
 public:
  MassRecall(int64_t n_layer, int64_t NH, int64_t F, int64_t HS, DType dtype);
  void keep(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
            RetrievalPlan& plan) override;
  void absorbed(const LayerCache& cache, const ChunkContext& ctx, const Tensor& k_loc, const Tensor& v_loc,
                const std::vector<int32_t>& kinds) override;
  // One entry per (chunk, layer) of the chunk path that had blocks to choose from, in reading order.
  std::vector<OracleAgreement> agreements;

 private:
  std::vector<BlockSummaries> keys_;  // per layer: every cached block's keys (the oracle's rows)
};

}  // namespace lm
