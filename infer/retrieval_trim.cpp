// retrieval_trim.cpp: beyond the paper. Rows gated off by the context-miss token drop their blocks
// before the fetch; adaptive k cuts each row to the blocks its left-out weight needs
// (retrieval_trim.h).
#include "infer/retrieval_trim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "infer/cpu_rows.h"
#include "landmark/tokens.h"

namespace lm {

namespace {

double dot(const std::vector<double>& a, int64_t ia, const std::vector<double>& b, int64_t ib, int64_t HS) {
  double s = 0;
  for (int64_t d = 0; d < HS; ++d) s += a[static_cast<size_t>(ia + d)] * b[static_cast<size_t>(ib + d)];
  return s;
}

// log(sum e^x) of xs (-inf when empty).
double log_sum_exp(const std::vector<double>& xs) {
  double mx = -std::numeric_limits<double>::infinity();
  for (double x : xs) mx = std::max(mx, x);
  if (!std::isfinite(mx)) return mx;
  double s = 0;
  for (double x : xs) s += std::exp(x - mx);
  return mx + std::log(s);
}

}  // namespace

LocalGates local_gates(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const std::vector<double> q = q_rot.to_double_vector(), k = k_rot.to_double_vector();
  const bool cmt = cache.cmt_key_rot.defined();
  const std::vector<double> ck = cmt ? cache.cmt_key_rot.to_double_vector() : std::vector<double>();
  const double scale = score_scale(cache.dtype, HS);
  // The block of each local key: a block ends at each landmark (virtual_row_layout's rule).
  const std::vector<int32_t>& kinds = *ctx.local_kinds;
  std::vector<int64_t> blk(static_cast<size_t>(L));
  for (int64_t j = 0, b = 0; j < L; ++j) {
    blk[static_cast<size_t>(j)] = b;
    if (kinds[static_cast<size_t>(j)] == kLandmark || kinds[static_cast<size_t>(j)] == kControlledLandmark) ++b;
  }
  LocalGates g;
  g.log_rest.resize(static_cast<size_t>(NH * n));
  if (cmt) g.p_cmt.resize(static_cast<size_t>(NH * n));
  std::vector<double> s;
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = h * n + i, qi = tl + i, qb = blk[static_cast<size_t>(qi)];
      s.clear();
      for (int64_t j = 0; j <= qi; ++j) {
        const int32_t kd = kinds[static_cast<size_t>(j)];
        const int64_t b = blk[static_cast<size_t>(j)];
        if ((kd == kRegular && b == qb) || (kd == kLandmark && b < qb))
          s.push_back(scale * dot(q, r * HS, k, (h * L + j) * HS, HS));
      }
      g.log_rest[static_cast<size_t>(r)] = log_sum_exp(s);
      if (cmt) {  // P'(CMT) = e^{s_cmt} / (e^{s_cmt} + e^{log_rest})
        const double sc = scale * dot(q, r * HS, ck, h * HS, HS), lr = g.log_rest[static_cast<size_t>(r)];
        g.p_cmt[static_cast<size_t>(r)] = std::isfinite(lr) ? 1.0 / (1.0 + std::exp(lr - sc)) : 1.0;
      }
    }
  return g;
}

namespace {
bool gated_off(const LocalGates& g, double cutoff, size_t r) {
  return !g.p_cmt.empty() && (cutoff >= 1.0 || g.p_cmt[r] < cutoff * (1.0 - 1e-4));
}
}  // namespace

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

AdaptiveCount trim_to_left_out(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot,
                               const LocalGates& g, double E, RetrievalPlan& plan) {
  AdaptiveCount count;
  const int64_t nb = plan.nb, rows = static_cast<int64_t>(plan.sel.size());
  if (nb == 0 || ctx.k == 0) return count;
  // Every cached landmark's score, as the scan ranked them (exact positions: the kept keys).
  const std::vector<double> scores = retrieval_scores(cache, ctx, q_rot).to_double_vector();  // (NH, n, nb)
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

}  // namespace lm
