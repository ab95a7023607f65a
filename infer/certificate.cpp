// certificate.cpp: beyond the paper. The left-out share of a row's gates and the bound it
// certifies (certificate.h); the per-layer statistics eval and passkey print under --certify.
#include "infer/certificate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "landmark/tokens.h"

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

template double left_out_share<float>(const LayerCache&, const RowInput<float>&, const RowLayout&, const float*,
                                      int64_t);
template double left_out_share<double>(const LayerCache&, const RowInput<double>&, const RowLayout&, const double*,
                                       int64_t);
template double certified_bound<float>(double, double, bool, const float*, int64_t);
template double certified_bound<double>(double, double, bool, const double*, int64_t);

}  // namespace lm
