// adaptive_k.cpp: beyond the paper. Each row cut to the blocks its left-out weight needs
// (adaptive_k.h).
#include "beyond/adaptive_k.h"

#include <algorithm>
#include <cmath>

#include "infer/cpu_rows.h"
#include "tensor/tensor.h"

namespace lm {

AdaptiveCount trim_to_left_out(const ChunkContext& ctx, const std::vector<double>& scores, const LocalGates& g,
                               double E, RetrievalPlan& plan) {
  AdaptiveCount count;
  const int64_t nb = plan.nb, rows = static_cast<int64_t>(plan.sel.size());
  if (nb == 0 || ctx.k == 0) return count;
  LM_CHECK(static_cast<int64_t>(scores.size()) == rows * nb,
           "adaptive k: " << scores.size() << " scores for " << rows << " rows of " << nb << " cached blocks");
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t>& sel = plan.sel[static_cast<size_t>(r)];
    const double* sr = scores.data() + r * nb;
    ++count.rows;
    const double P = g.p_cmt.empty() ? 1.0 : g.p_cmt[static_cast<size_t>(r)];
    if (gated_off(g, ctx.cmt_cutoff, static_cast<size_t>(r))) {  // M = 0 whatever it reads
      sel.clear();
      plan.places[static_cast<size_t>(r)].clear();
      if (!plan.score.empty()) plan.score[static_cast<size_t>(r)].clear();
      continue;
    }
    // Its blocks best first (ties: the older block, as the top k breaks them).
    std::vector<int32_t> best = sel;
    std::stable_sort(best.begin(), best.end(), [&](int32_t a, int32_t b) { return sr[a] > sr[b]; });
    // e^{score - mx} for the blocks outside the chosen ones, and for each chosen one.
    double mx = g.log_rest[static_cast<size_t>(r)];
    for (int64_t b = 0; b < nb; ++b) mx = std::max(mx, sr[b]);
    double outside = 0, all = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const double e = std::exp(sr[b] - mx);
      all += e;
      if (!std::binary_search(sel.begin(), sel.end(), static_cast<int32_t>(b))) outside += e;
    }
    // M with the j best kept: (outside + the chosen ones from j on) / normaliser, where the
    // normaliser is the whole gates' group (no CMT: the local members too) and M carries P'(CMT).
    const double norm = g.p_cmt.empty() ? all + std::exp(g.log_rest[static_cast<size_t>(r)] - mx) : all;
    std::vector<double> tail(best.size() + 1, outside);  // tail[j]: left out when j are kept
    for (size_t j = best.size(); j-- > 0;) tail[j] = tail[j + 1] + std::exp(sr[best[j]] - mx);
    size_t keep = best.size();
    for (size_t j = 0; j <= best.size(); ++j)
      if (P * tail[j] / norm <= E) {
        keep = j;
        break;
      }
    count.capped += keep == best.size() && P * tail[keep] / norm > E;
    best.resize(keep);
    std::sort(best.begin(), best.end());
    sel = best;
    plan.places[static_cast<size_t>(r)] = block_places(sel, ctx, nb, plan.first_gid);
    if (!plan.score.empty()) {  // a detailed trace: the kept blocks' scores, as sel
      std::vector<double>& sc = plan.score[static_cast<size_t>(r)];
      sc.clear();
      for (int32_t b : sel) sc.push_back(sr[b]);
    }
    count.blocks += static_cast<int64_t>(keep);
  }
  return count;
}

void AdaptiveK::keep(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                     RetrievalPlan& plan) {
  if (q_rot.device() != Device::CPU || plan.nb == 0) return;
  count.add(trim_to_left_out(ctx, plan.all_scores, gates_->of(cache, ctx, q_rot, k_rot), E_, plan));
}

}  // namespace lm
