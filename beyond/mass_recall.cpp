// mass_recall.cpp: beyond the paper. Each chunk's choices against the oracle's (mass_recall.h).
#include "beyond/mass_recall.h"

#include "infer/cpu_rows.h"
#include "infer/layer_cache.h"
#include "landmark/tokens.h"
#include "tensor/check.h"

namespace lm {

MassRecall::MassRecall(int64_t n_layer, int64_t NH, int64_t F, int64_t HS, DType dtype) {
  for (int64_t l = 0; l < n_layer; ++l) keys_.emplace_back(BlockScorer::Landmark, NH, F, HS, 1, true, dtype);
}

void MassRecall::keep(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor&,
                      RetrievalPlan& plan) {
  if (plan.nb == 0 || ctx.k == 0) return;
  const BlockSummaries& keys = keys_[static_cast<size_t>(ctx.layer)];
  LM_CHECK(keys.blocks() == plan.nb && q_rot.device() == Device::CPU,
           "mass recall: " << keys.blocks() << " blocks' keys kept for " << plan.nb << " cached (the CPU only)");
  const Tensor q = q_rot.contiguous();
  LM_DISPATCH_FLOAT(q.dtype(), "mass recall", {
    agreements.push_back(oracle_agreement<scalar_t>(keys, q.data<scalar_t>(), q.size(0), q.size(1),
                                                    score_scale(cache.dtype, cache.HS), plan.sel));
  });
}

void MassRecall::absorbed(const LayerCache& cache, const ChunkContext& ctx, const Tensor& k_loc, const Tensor&,
                          const std::vector<int32_t>& kinds) {
  BlockSummaries& keys = keys_[static_cast<size_t>(ctx.layer)];
  // As LayerCache::absorb: a block ends at each landmark; its keys seen where its landmark key is
  // scored (slot 0 with stingy positions, its true place with exact ones).
  int64_t begin = 0, gid = ctx.blocks_done;
  for (int64_t j = 0; j < static_cast<int64_t>(kinds.size()); ++j) {
    if (kinds[static_cast<size_t>(j)] != kLandmark) continue;
    summarise_block(keys, k_loc, nullptr, begin, ctx.positions == PositionMode::Exact ? gid * (ctx.F + 1) : 0,
                    *ctx.rope);
    begin = j + 1;
    ++gid;
  }
  keys.drop_oldest(keys.blocks() - cache.blocks());
}

}  // namespace lm
