// certificate.h: beyond the paper. The exact weight a row would give the cached blocks it left
// out, and the error bound it certifies (`--certify` on eval and passkey).
//
// A query retrieves the cached blocks S and leaves out the others, O. Every landmark is a gate in
// one softmax group (the query's top group; with a context-miss token, the group of the controlled
// landmarks, itself gated by the CMT's share P'(CMT)). With exact positions a left-out block's
// landmark scores the same whether it is retrieved or not, so the row that reads every cached
// block differs from the row that reads S only by O's entries, and the share of the gates' group
// that O would take is
//     m = sum_{g in O} e^{r_g} / (Z_S + sum_{g in O} e^{r_g}),
// Z_S the gates' group's sum of e^{score} in the S row. The weight the every-block row puts on O is
// M = m (no CMT) or M = P'(CMT) m (0 when the cutoff dropped the row), and
//     y_all = (1 - M) y_S + M y_out                    (no CMT)
//     y_all = y_S + M (y_out - ybar_S)                 (CMT; ybar_S: what the gates bring in y_S)
// with y_out a weighted mean of O's values. So |y_all - y_S| <= M (Vmax + |y_S|) without a CMT and
// <= 2 M Vmax with one, Vmax the largest value norm among the cached blocks' tokens: the bound each
// row certifies (certified_bound). docs/infer.md works a two-block example by hand.
//
// Only with exact positions (stingy positions score a gate at one slot and attend it at another,
// so no row the model reads has the scored weights), on the CPU rows. The blocks left out are
// those cached: with a capacity, blocks evicted earlier are in neither row. It attaches as an
// observer of the rows and of the cache (infer/hooks.h): Certifier.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/cpu_rows.h"
#include "infer/hooks.h"
#include "landmark/grouped_softmax.h"

namespace lm {

// m for one row of attend_row: `s` the row's scaled scores [CMT | chosen blocks | local keys]
// (len entries, before the grouped softmax), `layout` its virtual_row_layout. Scores each cached
// block not in in.chosen by its kept landmark key (exact positions: kept at its true place, where
// the every-block row would attend it) and returns the share of the gates' group it would take.
template <class Scalar>
double left_out_share(const LayerCache& cache, const RowInput<Scalar>& in, const RowLayout& layout, const Scalar* s,
                      int64_t len);

// The bound of the header for a row with left-out weight M and output y_S (HS values).
template <class Scalar>
double certified_bound(double M, double vmax, bool cmt, const Scalar* y, int64_t HS);

// Per (head, query) row of a chunk: M and its bound (the Certifier's record of the last chunk).
struct RowCertificates {
  std::vector<double> mass, bound;
};

// Over many chunks, per layer: the rows' M (kept as f32 for the percentile) and the largest
// bound. Rows of chunks with no block cached are not counted (nothing could be left out).
struct CertificateStats {
  std::vector<std::vector<float>> mass;  // per layer
  std::vector<double> bound_max;         // per layer
  void add(int64_t layer, const std::vector<double>& row_mass, double row_bound_max);
  void add(const CertificateStats& other);  // other's rows after these, layer by layer
  struct Layer {
    int64_t rows = 0;
    double mean = 0, p99 = 0, max = 0, bound_max = 0;
  };
  std::vector<Layer> summary() const;  // one entry per layer seen
};

// The hook (--certify, and --left-out, which implies it): every row's M and bound, the rows of
// chunks with a cache gathered per layer. Exact positions, the CPU rows, a host store.
class Certifier : public RetrievalHooks {
 public:
  bool observes_rows(const ChunkContext&) const override { return true; }
  void begin_rows(const LayerCache& cache, const ChunkContext& ctx, int64_t rows) override;
  void row_scores(const LayerCache& cache, const RowInput<float>& in, const RowLayout& layout, const float* s,
                  int64_t len, int64_t r) override;
  void row_scores(const LayerCache& cache, const RowInput<double>& in, const RowLayout& layout, const double* s,
                  int64_t len, int64_t r) override;
  void row_done(const LayerCache& cache, int64_t r, int64_t h, double p_cmt, bool cut, const float* y) override;
  void row_done(const LayerCache& cache, int64_t r, int64_t h, double p_cmt, bool cut, const double* y) override;
  void end_chunk(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                 const RetrievalPlan& read) override;
  void absorbed(const LayerCache& cache, const ChunkContext& ctx, const Tensor& k_loc, const Tensor& v_loc,
                const std::vector<int32_t>& kinds) override;

  RowCertificates last;    // the rows of the last chunk and layer
  CertificateStats stats;  // every chunk with a cache, per layer

 private:
  template <class Scalar>
  void done(const LayerCache& cache, int64_t r, int64_t h, double p_cmt, bool cut, const Scalar* y);
  // Per layer and head, the largest L2 norm of a regular token's value among every block absorbed
  // so far (evicted ones included: still an upper bound for those held): Vmax of the bound.
  std::vector<std::vector<double>> value_norm_max_;
  int64_t layer_ = 0;
};

}  // namespace lm
