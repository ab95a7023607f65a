// local_gates.cpp: beyond the paper. The local part of each row's gates (local_gates.h).
#include "beyond/local_gates.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

bool gated_off(const LocalGates& g, double cutoff, size_t r) {
  return !g.p_cmt.empty() && (cutoff >= 1.0 || g.p_cmt[r] < cutoff * (1.0 - 1e-4));
}

const LocalGates& LocalGatesOnce::of(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot,
                                     const Tensor& k_rot) {
  if (!valid_) {
    gates_ = local_gates(cache, ctx, q_rot, k_rot);
    valid_ = true;
  }
  return gates_;
}

}  // namespace lm
