// attention_record.cpp: what a chunk's attention reports (attention_record.h).
#include "infer/attention_record.h"

#include <utility>

namespace lm {

template <class Scalar>
AttentionCapture::Row capture_row(const ChunkContext& ctx, const RetrievalPlan& plan,
                                  const std::vector<int32_t>& chosen, int64_t i, int64_t tl, int64_t first,
                                  const Scalar* w) {
  const int64_t B1 = ctx.F + 1, kb = static_cast<int64_t>(chosen.size());
  AttentionCapture::Row row;
  row.query = ctx.aug_start + i;
  w += first;
  for (int64_t c = 0; c < kb; ++c) {
    row.retrieved.push_back(plan.first_gid + chosen[c]);
    for (int64_t t = 0; t < B1; ++t) {
      row.keys.push_back((plan.first_gid + chosen[c]) * B1 + t);  // true global positions
      row.weights.push_back(static_cast<double>(w[c * B1 + t]));
    }
  }
  for (int64_t j = 0; j < tl + i + 1; ++j) {
    row.keys.push_back(ctx.aug_start - tl + j);
    row.weights.push_back(static_cast<double>(w[kb * B1 + j]));
  }
  return row;
}

template <class Scalar>
std::vector<double> row_mass(const Scalar* w, int64_t first, int64_t kb, int64_t B1, int64_t tl, int64_t nloc) {
  std::vector<double> mass(static_cast<size_t>(kb + 2), 0.0);
  for (int64_t j = 0; j < kb * B1; ++j) mass[j / B1] += static_cast<double>(w[first + j]);
  for (int64_t j = 0; j < nloc; ++j) mass[kb + (j < tl ? 0 : 1)] += static_cast<double>(w[first + kb * B1 + j]);
  return mass;
}

RetrievalTrace::Step trace_step(const ChunkContext& ctx, const RetrievalPlan& plan, int64_t n, RowMass* mass) {
  RetrievalTrace::Step step{ctx.layer, ctx.aug_start, plan.first_gid, plan.nb, n, plan.sel, {}, {}};
  if (mass) {
    step.score = plan.score;
    step.mass = std::move(*mass);
  }
  return step;
}

int64_t fetched_blocks(const std::vector<std::vector<int32_t>>& sel, int64_t n, Granularity granularity) {
  int64_t fetched = 0;
  for (int64_t r = 0; r < static_cast<int64_t>(sel.size()); ++r) {
    const bool counts = granularity == Granularity::TokenHead || (granularity == Granularity::Token && r < n) ||
                        (granularity == Granularity::Head && r % n == 0);
    if (counts) fetched += static_cast<int64_t>(sel[r].size());
  }
  return fetched;
}

RetrievalRecord retrieval_record(const ChunkContext& ctx, const RetrievalPlan& plan, int64_t n, const CmtCount& cmt) {
  const int64_t fetched = fetched_blocks(plan.sel, n, ctx.granularity);
  // Distinct blocks over all rows: one sorted vector (this runs per layer and token).
  const int64_t unique = static_cast<int64_t>(plan_blocks(plan).size());
  RetrievalRecord rec;
  rec.chunk = ctx.chunk;
  rec.layer = ctx.layer;
  rec.cached = plan.nb;
  rec.unique = unique;
  rec.queries = n;
  rec.fetched = fetched;
  rec.cmt_rows = cmt.rows;
  rec.cmt_dropped = cmt.dropped;
  rec.keys_scored = plan.keys_scored;
  rec.budget_cut = plan.budget_cut;
  return rec;
}

template AttentionCapture::Row capture_row<float>(const ChunkContext&, const RetrievalPlan&,
                                                  const std::vector<int32_t>&, int64_t, int64_t, int64_t, const float*);
template AttentionCapture::Row capture_row<double>(const ChunkContext&, const RetrievalPlan&,
                                                   const std::vector<int32_t>&, int64_t, int64_t, int64_t,
                                                   const double*);
template std::vector<double> row_mass<float>(const float*, int64_t, int64_t, int64_t, int64_t, int64_t);
template std::vector<double> row_mass<double>(const double*, int64_t, int64_t, int64_t, int64_t, int64_t);

}  // namespace lm
