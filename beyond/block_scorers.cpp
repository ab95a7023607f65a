// block_scorers.cpp: beyond the paper. Block summaries and the training-free scorers
// (block_scorers.h).
#include "beyond/block_scorers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "infer/rotary_cache.h"
#include "landmark/retrieval.h"
#include "nn/functional.h"
#include "tensor/check.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/tensor.h"

namespace lm {

BlockScorer parse_block_scorer(const std::string& s) {
  if (s == "landmark") return BlockScorer::Landmark;
  if (s == "mean") return BlockScorer::Mean;
  if (s == "quest") return BlockScorer::Quest;
  if (s == "reps") return BlockScorer::Reps;
  if (s == "oracle") return BlockScorer::Oracle;
  LM_FAIL("--scorer: unknown block scorer '" << s << "' (landmark, mean, quest, reps or oracle)");
}

const char* block_scorer_name(BlockScorer s) {
  switch (s) {
    case BlockScorer::Landmark:
      return "landmark";
    case BlockScorer::Mean:
      return "mean";
    case BlockScorer::Quest:
      return "quest";
    case BlockScorer::Reps:
      return "reps";
    case BlockScorer::Oracle:
      return "oracle";
  }
  return "?";
}

BlockSummaries::BlockSummaries(BlockScorer s, int64_t nh, int64_t f, int64_t hs, int64_t r, bool kk, DType dt)
    : scorer(s), NH(nh), F(f), HS(hs), reps(r), keep_keys(kk || s == BlockScorer::Oracle), dtype(dt) {
  LM_CHECK(s != BlockScorer::Landmark || kk,
           "BlockSummaries: the landmark scorer reads the landmark keys; summaries keep only the keys for it");
  LM_CHECK(dt == DType::F32 || dt == DType::F64, "BlockSummaries: f32 or f64 caches, not " << dtype_name(dt));
  LM_CHECK(s != BlockScorer::Reps || (r >= 1 && r <= f),
           "--reps: representatives per block must be in [1, F = " << f << "], got " << r);
  rows_f32_.resize(static_cast<size_t>(nh));
  keys_f32_.resize(static_cast<size_t>(nh));
  rows_f64_.resize(static_cast<size_t>(nh));
  keys_f64_.resize(static_cast<size_t>(nh));
  reps_at_.resize(static_cast<size_t>(nh));
}

int64_t BlockSummaries::rows_per_block(BlockScorer s) const {
  switch (s) {
    case BlockScorer::Mean:
      return 1;
    case BlockScorer::Quest:
      return 2;
    case BlockScorer::Reps:
      return reps;
    case BlockScorer::Oracle:
      return F;
    case BlockScorer::Landmark:
      break;
  }
  LM_FAIL("BlockSummaries: no summary rows for the landmark scorer");
}

template <>
std::vector<std::vector<float>>& BlockSummaries::store<float>(bool keys) {
  return keys ? keys_f32_ : rows_f32_;
}
template <>
std::vector<std::vector<double>>& BlockSummaries::store<double>(bool keys) {
  return keys ? keys_f64_ : rows_f64_;
}
template <>
const std::vector<std::vector<float>>& BlockSummaries::store<float>(bool keys) const {
  return keys ? keys_f32_ : rows_f32_;
}
template <>
const std::vector<std::vector<double>>& BlockSummaries::store<double>(bool keys) const {
  return keys ? keys_f64_ : rows_f64_;
}

template <class Scalar>
const Scalar* BlockSummaries::rows(BlockScorer s, int64_t h) const {
  LM_CHECK(s == scorer || (s == BlockScorer::Oracle && keep_keys), "BlockSummaries: rows of "
                                                                       << block_scorer_name(s) << " asked of a "
                                                                       << block_scorer_name(scorer) << " summary");
  return store<Scalar>(s == BlockScorer::Oracle)[static_cast<size_t>(h)].data();
}

template <class Scalar>
void BlockSummaries::append(const Scalar* keys, const Scalar* queries) {
  LM_CHECK(dtype == dtype_of<Scalar>(),
           "BlockSummaries: " << dtype_name(dtype_of<Scalar>()) << " keys for a " << dtype_name(dtype) << " summary");
  LM_CHECK(scorer != BlockScorer::Reps || queries != nullptr, "BlockSummaries: representatives need the queries");
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (int64_t h = 0; h < NH; ++h) {
    const Scalar* k = keys + h * F * HS;
    std::vector<Scalar>& out = store<Scalar>(false)[static_cast<size_t>(h)];
    if (keep_keys) {
      std::vector<Scalar>& kept = store<Scalar>(true)[static_cast<size_t>(h)];
      kept.insert(kept.end(), k, k + F * HS);
    }
    if (scorer == BlockScorer::Mean) {
      for (int64_t d = 0; d < HS; ++d) {
        double s = 0;
        for (int64_t t = 0; t < F; ++t) s += static_cast<double>(k[t * HS + d]);
        out.push_back(static_cast<Scalar>(s / static_cast<double>(F)));
      }
    } else if (scorer == BlockScorer::Quest) {
      const size_t at = out.size();
      out.resize(at + static_cast<size_t>(2 * HS));
      for (int64_t d = 0; d < HS; ++d) {
        Scalar mx = k[d], mn = k[d];
        for (int64_t t = 1; t < F; ++t) {
          mx = std::max(mx, k[t * HS + d]);
          mn = std::min(mn, k[t * HS + d]);
        }
        out[at + static_cast<size_t>(d)] = mx;
        out[at + static_cast<size_t>(HS + d)] = mn;
      }
    } else if (scorer == BlockScorer::Reps) {
      const std::vector<int32_t> at = representatives(queries + h * F * HS, k, F, HS, scale, reps);
      for (int32_t t : at) {
        out.insert(out.end(), k + t * HS, k + (t + 1) * HS);
        reps_at_[static_cast<size_t>(h)].push_back(t);
      }
    }
  }
  ++nb_;
}

void BlockSummaries::drop_oldest(int64_t count) {
  count = std::min(count, nb_);
  if (count <= 0) return;
  auto cut = [&](auto& per_head, int64_t per_block) {
    for (auto& v : per_head)
      if (!v.empty()) v.erase(v.begin(), v.begin() + count * per_block);
  };
  const int64_t own = own_rows() * HS;
  cut(rows_f32_, own);
  cut(rows_f64_, own);
  cut(keys_f32_, F * HS);
  cut(keys_f64_, F * HS);
  if (scorer == BlockScorer::Reps) cut(reps_at_, reps);
  nb_ -= count;
}

int64_t BlockSummaries::bytes_per_block() const {
  const int64_t rows = scorer == BlockScorer::Landmark ? 0 : rows_per_block(scorer);  // Oracle: the keys
  return NH * rows * HS * static_cast<int64_t>(dtype_size(dtype)) +
         (scorer == BlockScorer::Reps ? NH * reps * static_cast<int64_t>(sizeof(int32_t)) : 0);
}

void summarise_block(BlockSummaries& sum, const Tensor& k_loc, const Tensor* q_loc, int64_t begin, int64_t pos0,
                     RotaryCache& rope) {
  const int64_t F = sum.F;
  LM_CHECK(k_loc.dim() == 3 && k_loc.size(0) == sum.NH && k_loc.size(2) == sum.HS && begin + F <= k_loc.size(1) &&
               k_loc.device() == Device::CPU,
           "summarise_block: keys " << describe(k_loc) << " for a block of " << F << " at " << begin);
  std::vector<int32_t> pos(static_cast<size_t>(F));
  for (int64_t t = 0; t < F; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(pos0 + t);
  const RotaryTables rt = rope.tables(pos);
  auto rotated = [&](const Tensor& x) {
    return rotary(x.narrow(1, begin, F).unsqueeze(0), rt).squeeze(0).contiguous();
  };
  const Tensor k = rotated(k_loc);
  const bool need_q = sum.scorer == BlockScorer::Reps;
  LM_CHECK(!need_q || (q_loc && q_loc->shape() == k_loc.shape()),
           "summarise_block: representatives need the block's queries");
  const Tensor q = need_q ? rotated(*q_loc) : Tensor();
  LM_DISPATCH_FLOAT(k.dtype(), "summarise_block",
                    { sum.append<scalar_t>(k.data<scalar_t>(), need_q ? q.data<scalar_t>() : nullptr); });
}

template <class Scalar>
std::vector<int32_t> representatives(const Scalar* q, const Scalar* k, int64_t F, int64_t HS, double scale, int64_t r) {
  std::vector<double> received(static_cast<size_t>(F), 0.0), s(static_cast<size_t>(F));
  for (int64_t i = 0; i < F; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < HS; ++d) dot += static_cast<double>(q[i * HS + d]) * static_cast<double>(k[j * HS + d]);
      s[static_cast<size_t>(j)] = dot * scale;
      mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    double z = 0;
    for (int64_t j = 0; j <= i; ++j) z += std::exp(s[static_cast<size_t>(j)] - mx);
    for (int64_t j = 0; j <= i; ++j) received[static_cast<size_t>(j)] += std::exp(s[static_cast<size_t>(j)] - mx) / z;
  }
  // The mean over the queries that see token j (F - j of them): a plain sum would favour the first
  // tokens, which every later query sees (token 0 takes all of query 0's weight).
  for (int64_t j = 0; j < F; ++j) received[static_cast<size_t>(j)] /= static_cast<double>(F - j);
  std::vector<int32_t> order(static_cast<size_t>(F));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return received[static_cast<size_t>(a)] > received[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(std::min(r, F)));
  std::sort(order.begin(), order.end());
  return order;
}

template <class Scalar>
int64_t score_blocks(const BlockSummaries& sum, BlockScorer s, int64_t h, const Scalar* q, int64_t n, double scale,
                     Scalar* out) {
  const int64_t nb = sum.blocks(), HS = sum.HS, m = sum.rows_per_block(s), cols = nb * m;
  if (nb == 0 || n == 0) return 0;
  const Scalar* rows = sum.rows<Scalar>(s, h);
  if (s == BlockScorer::Mean) {  // the rows are the scores' columns: one product
    cpu::gemm_single<Scalar>(false, true, n, nb, HS, scale, q, HS, rows, HS, 0.0, out, nb);
    return cols;
  }
  static thread_local std::vector<Scalar> prod;
  if (prod.size() < static_cast<size_t>(n * cols)) prod.resize(static_cast<size_t>(n * cols));
  if (s == BlockScorer::Quest) {
    // sum_d max(q_d mn_d, q_d mx_d) = q+ . mx + q- . mn, with q+ = max(q, 0) and q- = min(q, 0):
    // q+ against every row, then q- added onto the products with the rows (the min rows are
    // those at odd places).
    static thread_local std::vector<Scalar> qp, qm, neg;
    qp.resize(static_cast<size_t>(n * HS));
    qm.resize(static_cast<size_t>(n * HS));
    if (neg.size() < static_cast<size_t>(n * cols)) neg.resize(static_cast<size_t>(n * cols));
    for (int64_t e = 0; e < n * HS; ++e) {
      qp[static_cast<size_t>(e)] = std::max(q[e], Scalar(0));
      qm[static_cast<size_t>(e)] = std::min(q[e], Scalar(0));
    }
    cpu::gemm_single<Scalar>(false, true, n, cols, HS, scale, qp.data(), HS, rows, HS, 0.0, prod.data(), cols);
    cpu::gemm_single<Scalar>(false, true, n, cols, HS, scale, qm.data(), HS, rows, HS, 0.0, neg.data(), cols);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t b = 0; b < nb; ++b)
        out[i * nb + b] = prod[static_cast<size_t>(i * cols + 2 * b)] + neg[static_cast<size_t>(i * cols + 2 * b + 1)];
    return 2 * nb;
  }
  cpu::gemm_single<Scalar>(false, true, n, cols, HS, scale, q, HS, rows, HS, 0.0, prod.data(), cols);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      const Scalar* p = prod.data() + i * cols + b * m;
      const Scalar mx = *std::max_element(p, p + m);
      if (s == BlockScorer::Reps) {
        out[i * nb + b] = mx;
      } else {  // Oracle: log sum exp
        double z = 0;
        for (int64_t t = 0; t < m; ++t) z += std::exp(static_cast<double>(p[t] - mx));
        out[i * nb + b] = static_cast<Scalar>(static_cast<double>(mx) + std::log(z));
      }
    }
  return cols;
}

template <class Scalar>
void agree_with_oracle(const Scalar* lse, int64_t nb, const std::vector<int32_t>& sel, OracleAgreement* acc) {
  if (nb == 0) return;
  const Scalar mx = *std::max_element(lse, lse + nb);
  double z = 0, got = 0;
  for (int64_t b = 0; b < nb; ++b) z += std::exp(static_cast<double>(lse[b] - mx));
  for (int32_t b : sel) got += std::exp(static_cast<double>(lse[b] - mx));
  const std::vector<int32_t> best =
      select_blocks<Scalar>(lse, 1, 1, nb, static_cast<int64_t>(sel.size()), Granularity::TokenHead)[0];
  int64_t both = 0;
  for (int32_t b : sel) both += std::binary_search(best.begin(), best.end(), b);
  const int64_t uni = static_cast<int64_t>(sel.size() + best.size()) - both;
  acc->recall_sum += got / z;
  acc->iou_sum += uni > 0 ? static_cast<double>(both) / static_cast<double>(uni) : 1.0;
  acc->rows += 1;
}

template <class Scalar>
int64_t score_all_heads(const BlockSummaries& sum, BlockScorer s, const Scalar* q, int64_t NH, int64_t n, double scale,
                        std::vector<Scalar>& out) {
  const int64_t HS = sum.HS, nb = sum.blocks();
  out.resize(static_cast<size_t>(NH * n * nb));
  std::vector<int64_t> scored(static_cast<size_t>(NH), 0);
  cpu::parallel_for(NH, n * nb * HS * sum.rows_per_block(s), [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      scored[static_cast<size_t>(h)] =
          n * score_blocks<Scalar>(sum, s, h, q + h * n * HS, n, scale, out.data() + h * n * nb);
  });
  int64_t all = 0;
  for (int64_t v : scored) all += v;
  return all;
}

template <class Scalar>
OracleAgreement oracle_agreement(const BlockSummaries& sum, const Scalar* q, int64_t NH, int64_t n, double scale,
                                 const std::vector<std::vector<int32_t>>& sel) {
  std::vector<Scalar> lse;
  score_all_heads<Scalar>(sum, BlockScorer::Oracle, q, NH, n, scale, lse);
  OracleAgreement acc;
  const int64_t nb = sum.blocks();
  for (size_t r = 0; r < sel.size(); ++r)
    agree_with_oracle<Scalar>(lse.data() + r * static_cast<size_t>(nb), nb, sel[r], &acc);
  return acc;
}

#define LM_SCORERS_INSTANTIATE(S)                                                                               \
  template void BlockSummaries::append<S>(const S*, const S*);                                                  \
  template const S* BlockSummaries::rows<S>(BlockScorer, int64_t) const;                                        \
  template std::vector<int32_t> representatives<S>(const S*, const S*, int64_t, int64_t, double, int64_t);      \
  template int64_t score_blocks<S>(const BlockSummaries&, BlockScorer, int64_t, const S*, int64_t, double, S*); \
  template void agree_with_oracle<S>(const S*, int64_t, const std::vector<int32_t>&, OracleAgreement*);         \
  template int64_t score_all_heads<S>(const BlockSummaries&, BlockScorer, const S*, int64_t, int64_t, double,   \
                                      std::vector<S>&);                                                         \
  template OracleAgreement oracle_agreement<S>(const BlockSummaries&, const S*, int64_t, int64_t, double,       \
                                               const std::vector<std::vector<int32_t>>&);
LM_SCORERS_INSTANTIATE(float)
LM_SCORERS_INSTANTIATE(double)
#undef LM_SCORERS_INSTANTIATE

int64_t SummaryScoring::score(const Tensor& q_rot, double scale, std::vector<float>& out) const {
  const Tensor q = q_rot.contiguous();
  return score_all_heads<float>(sum_, sum_.scorer, q.data<float>(), q.size(0), q.size(1), scale, out);
}
int64_t SummaryScoring::score(const Tensor& q_rot, double scale, std::vector<double>& out) const {
  const Tensor q = q_rot.contiguous();
  return score_all_heads<double>(sum_, sum_.scorer, q.data<double>(), q.size(0), q.size(1), scale, out);
}

}  // namespace lm
