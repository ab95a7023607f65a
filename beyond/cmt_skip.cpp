// cmt_skip.cpp: beyond the paper. Rows gated off by the context-miss token read no block
// (cmt_skip.h).
#include "beyond/cmt_skip.h"

#include "infer/layer_cache.h"
#include "tensor/tensor.h"

namespace lm {

int64_t drop_gated_off(const LocalGates& g, double cutoff, RetrievalPlan& plan) {
  int64_t emptied = 0;
  if (g.p_cmt.empty() || cutoff <= 0) return 0;
  for (size_t r = 0; r < plan.sel.size(); ++r)
    if (gated_off(g, cutoff, r) && !plan.sel[r].empty()) {
      plan.sel[r].clear();
      plan.places[r].clear();
      ++emptied;
    }
  return emptied;
}

bool CmtSkip::read_fewer(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                         const RetrievalPlan& plan, RetrievalPlan& read) {
  const bool cpu = q_rot.device() == Device::CPU && plan.nb > 0;
  if (!(skip_ && cpu && cache.cmt_key_rot.defined() && ctx.cmt_cutoff > 0 && !ctx.trace && !ctx.capture)) return false;
  read = plan;
  drop_gated_off(gates_->of(cache, ctx, q_rot, k_rot), ctx.cmt_cutoff, read);
  return true;
}

void CmtSkip::end_chunk(const LayerCache&, const ChunkContext&, const RetrievalPlan& plan, const RetrievalPlan& read) {
  if (plan.nb > 0) attended += static_cast<int64_t>(plan_blocks(read).size());
  gates_->clear();
}

}  // namespace lm
