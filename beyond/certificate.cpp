// certificate.cpp: beyond the paper. The left-out share of a row's gates and the bound it
// certifies (certificate.h); the per-layer statistics eval and passkey print under --certify.
#include "beyond/certificate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "landmark/tokens.h"
#include "tensor/tensor.h"

namespace lm {

namespace {

// Whether entry j of the row is in the group of the gates of cached blocks, for the query at the
// row's end (in block qb): with a CMT the controlled landmarks of earlier blocks; without one the
// query's top group, i.e. its own block's regular tokens and the free landmarks of earlier blocks
// (the grouped softmax's groups, landmark/grouped_softmax.h).
bool in_gates_group(const RowLayout& L, int64_t j, int32_t qb) {
  const int32_t kind = L.kind[j], b = L.block_of[j];
  if (L.cmt >= 0) return kind == kControlledLandmark && b < qb;
  return (kind == kRegular && b == qb) || (kind == kLandmark && b < qb);
}

}  // namespace

template <class Scalar>
double left_out_share(const LayerCache& cache, const RowInput<Scalar>& in, const RowLayout& layout, const Scalar* s,
                      int64_t len) {
  const int64_t HS = cache.HS, nb = cache.blocks();
  const std::vector<int32_t>& chosen = *in.chosen;
  if (static_cast<int64_t>(chosen.size()) >= nb) return 0.0;  // nothing left out
  const int32_t qb = layout.block_of[len - 1];
  const double scale = score_scale(cache.dtype, HS);
  // The left-out gates' scores, each by its kept key (exact positions: at its true place).
  std::vector<double> r;
  r.reserve(static_cast<size_t>(nb - static_cast<int64_t>(chosen.size())));
  size_t c = 0;
  for (int64_t b = 0; b < nb; ++b) {
    if (c < chosen.size() && chosen[c] == b) {
      ++c;
      continue;
    }
    int64_t stride = 0;
    const Scalar* key = cache.scored_key<Scalar>(in.head, b, &stride);
    double dot = 0;
    for (int64_t d = 0; d < HS; ++d) dot += static_cast<double>(in.q[d]) * static_cast<double>(key[d * stride]);
    r.push_back(dot * scale);
  }
  // m = E / (Z + E), both sums taken from one maximum so that neither overflows.
  double mx = -std::numeric_limits<double>::infinity();
  for (double x : r) mx = std::max(mx, x);
  for (int64_t j = 0; j < len; ++j)
    if (in_gates_group(layout, j, qb)) mx = std::max(mx, static_cast<double>(s[j]));
  double Z = 0, E = 0;
  for (double x : r) E += std::exp(x - mx);
  for (int64_t j = 0; j < len; ++j)
    if (in_gates_group(layout, j, qb)) Z += std::exp(static_cast<double>(s[j]) - mx);
  return E / (Z + E);
}

template <class Scalar>
double certified_bound(double M, double vmax, bool cmt, const Scalar* y, int64_t HS) {
  if (M == 0) return 0;
  if (cmt) return 2 * M * vmax;
  double norm = 0;
  for (int64_t d = 0; d < HS; ++d) norm += static_cast<double>(y[d]) * static_cast<double>(y[d]);
  return M * (vmax + std::sqrt(norm));
}

void CertificateStats::add(int64_t layer, const std::vector<double>& row_mass, double row_bound_max) {
  if (static_cast<int64_t>(mass.size()) <= layer) {
    mass.resize(static_cast<size_t>(layer + 1));
    bound_max.resize(static_cast<size_t>(layer + 1), 0.0);
  }
  std::vector<float>& m = mass[static_cast<size_t>(layer)];
  for (double x : row_mass) m.push_back(static_cast<float>(x));
  bound_max[static_cast<size_t>(layer)] = std::max(bound_max[static_cast<size_t>(layer)], row_bound_max);
}

std::vector<CertificateStats::Layer> CertificateStats::summary() const {
  std::vector<Layer> out;
  for (size_t l = 0; l < mass.size(); ++l) {
    Layer s;
    std::vector<float> m = mass[l];
    s.rows = static_cast<int64_t>(m.size());
    s.bound_max = bound_max[l];
    if (!m.empty()) {
      double sum = 0;
      for (float x : m) sum += x;
      s.mean = sum / static_cast<double>(m.size());
      // The 99th percentile: the smallest value with at least 99% of the rows at or below it.
      const size_t at = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(m.size()))) - 1;
      std::nth_element(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(at), m.end());
      s.p99 = m[at];
      s.max = *std::max_element(m.begin(), m.end());
    }
    out.push_back(s);
  }
  return out;
}

void CertificateStats::add(const CertificateStats& other) {
  for (size_t l = 0; l < other.mass.size(); ++l) {
    std::vector<double> m(other.mass[l].begin(), other.mass[l].end());
    add(static_cast<int64_t>(l), m, other.bound_max[l]);
  }
}

void Certifier::begin_rows(const LayerCache& cache, const ChunkContext& ctx, int64_t rows) {
  LM_CHECK(ctx.positions == PositionMode::Exact && cache.device == Device::CPU,
           "chunk attention: the left-out certificate needs exact positions and the CPU rows (--positions exact, "
           "--device cpu)");
  layer_ = ctx.layer;
  last.mass.assign(static_cast<size_t>(rows), 0.0);
  last.bound.assign(static_cast<size_t>(rows), 0.0);
  if (static_cast<int64_t>(value_norm_max_.size()) <= layer_) value_norm_max_.resize(static_cast<size_t>(layer_ + 1));
  value_norm_max_[static_cast<size_t>(layer_)].resize(static_cast<size_t>(cache.NH), 0.0);
}

void Certifier::row_scores(const LayerCache& cache, const RowInput<float>& in, const RowLayout& layout, const float* s,
                           int64_t len, int64_t r) {
  last.mass[static_cast<size_t>(r)] = left_out_share(cache, in, layout, s, len);  // m; M once P'(CMT) is known
}
void Certifier::row_scores(const LayerCache& cache, const RowInput<double>& in, const RowLayout& layout,
                           const double* s, int64_t len, int64_t r) {
  last.mass[static_cast<size_t>(r)] = left_out_share(cache, in, layout, s, len);
}

template <class Scalar>
void Certifier::done(const LayerCache& cache, int64_t r, int64_t h, double p_cmt, bool cut, const Scalar* y) {
  const bool cmt = cache.cmt_key_rot.defined();
  double& M = last.mass[static_cast<size_t>(r)];
  M = !cmt ? M : cut ? 0.0 : p_cmt * M;
  last.bound[static_cast<size_t>(r)] =
      certified_bound(M, value_norm_max_[static_cast<size_t>(layer_)][static_cast<size_t>(h)], cmt, y, cache.HS);
}
void Certifier::row_done(const LayerCache& cache, int64_t r, int64_t h, double p_cmt, bool cut, const float* y) {
  done(cache, r, h, p_cmt, cut, y);
}
void Certifier::row_done(const LayerCache& cache, int64_t r, int64_t h, double p_cmt, bool cut, const double* y) {
  done(cache, r, h, p_cmt, cut, y);
}

void Certifier::end_chunk(const LayerCache&, const ChunkContext& ctx, const RetrievalPlan& plan, const RetrievalPlan&) {
  if (plan.nb == 0) return;  // nothing could be left out
  double bound_max = 0;
  for (double b : last.bound) bound_max = std::max(bound_max, b);
  stats.add(ctx.layer, last.mass, bound_max);
}

namespace {
// Each head's largest value norm among the regular tokens of v (NH, L, HS, host) up to `end`.
template <class Scalar>
void note_value_norms(const Tensor& v, const std::vector<int32_t>& kinds, int64_t end, std::vector<double>& vmax) {
  const Tensor c = v.contiguous();
  const int64_t NH = c.size(0), L = c.size(1), HS = c.size(2);
  vmax.resize(static_cast<size_t>(NH), 0.0);
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t j = 0; j < end; ++j) {
      if (kinds[static_cast<size_t>(j)] != kRegular) continue;
      const Scalar* x = c.data<Scalar>() + (h * L + j) * HS;
      double sq = 0;
      for (int64_t d = 0; d < HS; ++d) sq += static_cast<double>(x[d]) * static_cast<double>(x[d]);
      vmax[static_cast<size_t>(h)] = std::max(vmax[static_cast<size_t>(h)], std::sqrt(sq));
    }
}
}  // namespace

void Certifier::absorbed(const LayerCache& cache, const ChunkContext& ctx, const Tensor&, const Tensor& v_loc,
                         const std::vector<int32_t>& kinds) {
  const int64_t layer = ctx.layer;
  int64_t end = 0;  // the finished blocks: everything up to the last landmark
  for (int64_t j = 0; j < static_cast<int64_t>(kinds.size()); ++j)
    if (kinds[static_cast<size_t>(j)] == kLandmark) end = j + 1;
  if (end == 0 || cache.store->device() != Device::CPU) return;
  if (static_cast<int64_t>(value_norm_max_.size()) <= layer) value_norm_max_.resize(static_cast<size_t>(layer + 1));
  LM_DISPATCH_FLOAT(cache.dtype, "Certifier::absorbed",
                    { note_value_norms<scalar_t>(v_loc, kinds, end, value_norm_max_[static_cast<size_t>(layer)]); });
}

template double left_out_share<float>(const LayerCache&, const RowInput<float>&, const RowLayout&, const float*,
                                      int64_t);
template double left_out_share<double>(const LayerCache&, const RowInput<double>&, const RowLayout&, const double*,
                                       int64_t);
template double certified_bound<float>(double, double, bool, const float*, int64_t);
template double certified_bound<double>(double, double, bool, const double*, int64_t);

}  // namespace lm
