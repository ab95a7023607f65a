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
// those cached: with a capacity, blocks evicted earlier are in neither row.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/cpu_rows.h"
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

// Per (head, query) row of a chunk: M and its bound (attend_plan fills them under ctx.certify).
struct RowCertificates {
  std::vector<double> mass, bound;
};

// Over many chunks, per layer: the rows' M (kept as f32 for the percentile) and the largest
// bound. Rows of chunks with no block cached are not counted (nothing could be left out).
struct CertificateStats {
  std::vector<std::vector<float>> mass;  // per layer
  std::vector<double> bound_max;         // per layer
  void add(int64_t layer, const std::vector<double>& row_mass, double row_bound_max);
  struct Layer {
    int64_t rows = 0;
    double mean = 0, p99 = 0, max = 0, bound_max = 0;
  };
  std::vector<Layer> summary() const;  // one entry per layer seen
};

}  // namespace lm
