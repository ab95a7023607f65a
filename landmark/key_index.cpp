// Beyond the paper: the search of key_index.h (the paper scores every landmark key).
// key_index.cpp: LandmarkKeyIndex (key_index.h), the tiles of landmark keys with per-feature
// bounds, and the exact top-k search that skips tiles.
#include "landmark/key_index.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "landmark/retrieval.h"
#include "tensor/check.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/vec_dot.h"

namespace lm {

template <class Scalar>
LandmarkKeyIndex<Scalar>::LandmarkKeyIndex(int64_t HS, int64_t tile)
    : HS_(HS), S_(tile), absmax_(static_cast<size_t>(HS), Scalar(0)) {
  LM_CHECK(HS > 0 && tile > 0, "LandmarkKeyIndex: head size " << HS << " and tile " << tile << " must be positive");
}

template <class Scalar>
void LandmarkKeyIndex<Scalar>::append(const Scalar* rotated) {
  const int64_t at = end_ - base_, col = at % S_, tile = at / S_;
  if (col == 0) {  // a new tile: empty bounds (min +inf, max -inf) until its keys arrive
    tiles_.resize(static_cast<size_t>((tile + 1) * HS_ * S_), Scalar(0));
    mins_.resize(static_cast<size_t>((tile + 1) * HS_), std::numeric_limits<Scalar>::infinity());
    maxs_.resize(static_cast<size_t>((tile + 1) * HS_), -std::numeric_limits<Scalar>::infinity());
  }
  Scalar* t = tiles_.data() + tile * HS_ * S_;
  Scalar* mn = mins_.data() + tile * HS_;
  Scalar* mx = maxs_.data() + tile * HS_;
  for (int64_t d = 0; d < HS_; ++d) {
    const Scalar v = rotated[d];
    LM_CHECK(std::isfinite(static_cast<double>(v)),
             "LandmarkKeyIndex: a landmark key holds " << v << " at feature " << d);
    t[d * S_ + col] = v;
    mn[d] = std::min(mn[d], v);
    mx[d] = std::max(mx[d], v);
    absmax_[d] = std::max(absmax_[d], static_cast<Scalar>(std::fabs(v)));
  }
  ++end_;
}

template <class Scalar>
void LandmarkKeyIndex<Scalar>::drop_oldest(int64_t count) {
  LM_CHECK(count >= 0 && count <= size(), "LandmarkKeyIndex: cannot drop " << count << " of " << size() << " blocks");
  first_ += count;
  // Free whole tiles in front once they are at least half of what is stored: each block is moved
  // at most once per halving, so dropping costs O(1) per block on average.
  const int64_t dead = (first_ - base_) / S_, stored = (end_ - base_ + S_ - 1) / S_;
  if (dead > 0 && 2 * dead >= stored) {
    tiles_.erase(tiles_.begin(), tiles_.begin() + dead * HS_ * S_);
    mins_.erase(mins_.begin(), mins_.begin() + dead * HS_);
    maxs_.erase(maxs_.begin(), maxs_.begin() + dead * HS_);
    base_ += dead * S_;
  }
}

template <class Scalar>
const Scalar* LandmarkKeyIndex<Scalar>::rotated_key(int64_t b, int64_t* stride) const {
  LM_CHECK(b >= 0 && b < size(), "LandmarkKeyIndex: block " << b << " of " << size());
  const int64_t at = first_ + b - base_;
  *stride = S_;
  return tiles_.data() + (at / S_) * HS_ * S_ + at % S_;
}

namespace {

// scale * q . key for the blocks with absolute numbers [a0, a1), tile by tile, into out: the one
// scoring routine of both the scan and the search, so the two agree bit for bit.
template <class Scalar>
void score_span(const Scalar* q, Scalar scale, const Scalar* tiles, int64_t HS, int64_t S, int64_t base, int64_t a0,
                int64_t a1, Scalar* out) {
  for (int64_t a = a0; a < a1;) {
    const int64_t at = a - base, tile = at / S, col = at % S, cnt = std::min(S - col, a1 - a);
    cpu::vec_times_rows(q, tiles + tile * HS * S + col, HS, S, cnt, out);
    for (int64_t t = 0; t < cnt; ++t) out[t] *= scale;
    out += cnt;
    a += cnt;
  }
}

// The best blocks so far, best first: (score, block). `beats` is top-k's order: a higher score, or
// the same score and an older block.
template <class Scalar>
struct Best {
  int64_t k;
  std::vector<std::pair<Scalar, int32_t>> v;
  static bool beats(const std::pair<Scalar, int32_t>& a, const std::pair<Scalar, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  }
  bool full() const { return static_cast<int64_t>(v.size()) == k; }
  // The best min(k, count + extras) of `count` searched blocks and the extra candidates (numbered
  // from `count` on), seeded with the extras.
  Best(int64_t k_, int64_t count, const std::vector<std::pair<int32_t, Scalar>>& extra)
      : k(std::min<int64_t>(k_, count + static_cast<int64_t>(extra.size()))) {
    if (k == 0) return;
    v.reserve(static_cast<size_t>(k) + 1);
    for (const auto& e : extra) {
      LM_CHECK(e.first >= count,
               "LandmarkKeyIndex: an extra candidate, block " << e.first << ", is among the " << count << " searched");
      offer(e.second, e.first);
    }
  }
  void offer(Scalar score, int32_t block) {
    const std::pair<Scalar, int32_t> c{score, block};
    if (full() && !beats(c, v.back())) return;
    v.insert(std::upper_bound(v.begin(), v.end(), c, beats), c);
    if (static_cast<int64_t>(v.size()) > k) v.pop_back();
  }
  // Offers the n scores s of blocks first, first + 1, ...: when k are held already, a span whose
  // scores are all below the k-th is passed over whole (none of its blocks could enter; a tie
  // could, so a tie is offered).
  void offer_span(const Scalar* s, int64_t n, int32_t first) {
    if (full()) {
      const Scalar kth = v.back().first;
      int64_t below = 0;  // a count, not a running maximum, so that it vectorises (NaN: not below)
      for (int64_t j = 0; j < n; ++j) below += s[j] < kth ? 1 : 0;
      if (below == n) return;
    }
    for (int64_t j = 0; j < n; ++j) offer(s[j], first + static_cast<int32_t>(j));
  }
};

// The rounding allowance of one query's tile bounds, in the units of a score. A bound is computed
// in Scalar from a tile's min and max, a key's score from the key; each differs from its exact
// value by at most about HS unit roundoffs times A = sum over d of |q_d| * (largest |key_d| ever
// appended), and the bound's exact value is at least the key's exact score. Twice that, plus the
// scale's rounding, is added to a bound (already times the scale) before it is compared, in
// double: a tile is skipped, or an answer called proven, only when even its widest possible score
// loses. top_k and approx_top_k both go through it.
template <class Scalar>
struct BoundMargin {
  double margin, u;
  BoundMargin(const Scalar* q, const std::vector<Scalar>& absmax, double scale)
      : u(std::numeric_limits<Scalar>::epsilon() / 2) {
    const size_t HS = absmax.size();
    double A = 0;
    for (size_t d = 0; d < HS; ++d) A += std::fabs(static_cast<double>(q[d])) * static_cast<double>(absmax[d]);
    margin = scale * A * u * (4.0 * static_cast<double>(HS) + 8.0);
  }
  double widen(double scaled_bound) const { return scaled_bound + margin + 2 * u * std::fabs(scaled_bound); }
};

}  // namespace

template <class Scalar>
void LandmarkKeyIndex<Scalar>::scan_scores(const Scalar* q, Scalar scale, int64_t count, Scalar* out) const {
  LM_CHECK(count >= 0 && count <= size(), "LandmarkKeyIndex: scores of " << count << " blocks of " << size());
  score_span(q, scale, tiles_.data(), HS_, S_, base_, first_, first_ + count, out);
}

template <class Scalar>
std::vector<int32_t> LandmarkKeyIndex<Scalar>::top_k(const Scalar* q, Scalar scale, int64_t count, int64_t k,
                                                     const std::vector<std::pair<int32_t, Scalar>>& extra,
                                                     KeySearchStats* stats) const {
  LM_CHECK(count >= 0 && count <= size() && k >= 0,
           "LandmarkKeyIndex: top " << k << " of " << count << " blocks of " << size());
  Best<Scalar> best(k, count, extra);
  std::vector<int32_t> out;
  if (best.k == 0) return out;

  // Every tile's bound, widened by BoundMargin: a tile is skipped only when even its widest
  // possible score loses.
  const int64_t t0 = (first_ - base_) / S_, t1 = (first_ + count - base_ + S_ - 1) / S_;
  std::vector<Scalar> qp(static_cast<size_t>(HS_)), qn(static_cast<size_t>(HS_));
  for (int64_t d = 0; d < HS_; ++d) {
    qp[d] = std::max(q[d], Scalar(0));
    qn[d] = std::min(q[d], Scalar(0));
  }
  const double sc = static_cast<double>(scale);
  const BoundMargin<Scalar> widen(q, absmax_, sc);
  std::vector<std::pair<double, int64_t>> order;  // (no score in the tile can exceed this, tile)
  order.reserve(static_cast<size_t>(t1 - t0));
  for (int64_t t = t0; t < t1; ++t) {
    const Scalar* mn = mins_.data() + t * HS_;
    const Scalar* mx = maxs_.data() + t * HS_;
    Scalar b = 0;
    for (int64_t d = 0; d < HS_; ++d) b += qp[d] * mx[d] + qn[d] * mn[d];
    const double bd = static_cast<double>(b);
    order.emplace_back(widen.widen(sc * bd), t);
  }
  // Highest bound first; the walk ends at the first tile whose bound is below the k-th best so
  // far, since every later one is lower still (a tile whose bound only equals it is scored: one
  // of its blocks could tie and be older).
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  std::vector<Scalar> s(static_cast<size_t>(S_));
  int64_t visited = 0, scored = 0;
  for (const auto& [bound, t] : order) {
    if (best.full() && bound < static_cast<double>(best.v.back().first)) break;
    const int64_t a0 = std::max(first_, base_ + t * S_), a1 = std::min(first_ + count, base_ + (t + 1) * S_);
    score_span(q, scale, tiles_.data(), HS_, S_, base_, a0, a1, s.data());
    best.offer_span(s.data(), a1 - a0, static_cast<int32_t>(a0 - first_));
    ++visited;
    scored += a1 - a0;
  }
  if (stats) {
    ++stats->queries;
    stats->tiles_bounded += t1 - t0;
    stats->tiles_visited += visited;
    stats->keys_scored += scored;
  }
  for (const auto& e : best.v) out.push_back(e.second);
  std::sort(out.begin(), out.end());
  return out;
}

template <class Scalar>
void LandmarkKeyIndex<Scalar>::approx_top_k(const Scalar* Q, int64_t n, Scalar scale, int64_t count, int64_t k,
                                            int64_t tiles, const std::vector<std::pair<int32_t, Scalar>>* extras,
                                            std::vector<int32_t>* out, KeySearchStats* stats) const {
  LM_CHECK(count >= 0 && count <= size() && k >= 0 && n >= 0,
           "LandmarkKeyIndex: top " << k << " of " << count << " blocks of " << size() << " for " << n << " queries");
  LM_CHECK(tiles >= 1, "LandmarkKeyIndex: the approximate search needs a budget of at least one tile, got " << tiles);
  const int64_t t0 = (first_ - base_) / S_, t1 = (first_ + count - base_ + S_ - 1) / S_, T = count > 0 ? t1 - t0 : 0;
  // Per query: its positive and negative parts, for the two bound products.
  std::vector<Scalar> qp(static_cast<size_t>(n * HS_)), qn(static_cast<size_t>(n * HS_));
  for (int64_t j = 0; j < n * HS_; ++j) {
    qp[j] = std::max(Q[j], Scalar(0));
    qn[j] = std::min(Q[j], Scalar(0));
  }
  // Bounds in pieces of tiles (so the piece stays in cache), each query's TopKStream keeping the
  // tiles + 1 best: the tiles to score, and the highest bound of the rest (for the proof).
  // At least enough tiles to hold k keys (the two at the ends of the range may be partly outside).
  constexpr int64_t kPiece = 512;
  const int64_t budget = std::max(tiles, (k + S_ - 1) / S_ + 2), keep = std::min(budget + 1, T);
  std::vector<TopKStream<Scalar>> bestt = top_k_streams<Scalar>(n, keep);
  std::vector<Scalar> piece(static_cast<size_t>(n * std::min(kPiece, std::max<int64_t>(T, 1))));
  for (int64_t p0 = 0; p0 < T; p0 += kPiece) {
    const int64_t len = std::min(kPiece, T - p0), ld = std::min(kPiece, T);
    // Q+ (n x HS) times maxima^T (HS x len), then Q- times minima^T added: scale * bound.
    cpu::gemm_single<Scalar>(false, true, n, len, HS_, static_cast<double>(scale), qp.data(), HS_,
                             maxs_.data() + (t0 + p0) * HS_, HS_, 0.0, piece.data(), ld);
    cpu::gemm_single<Scalar>(false, true, n, len, HS_, static_cast<double>(scale), qn.data(), HS_,
                             mins_.data() + (t0 + p0) * HS_, HS_, 1.0, piece.data(), ld);
    for (int64_t i = 0; i < n; ++i) bestt[i].push(piece.data() + i * ld, p0, len);
  }
  const double sc = static_cast<double>(scale);
  std::vector<Scalar> s(static_cast<size_t>(S_));
  static const std::vector<std::pair<int32_t, Scalar>> none;
  for (int64_t i = 0; i < n; ++i) {
    const Scalar* q = Q + i * HS_;
    const std::vector<std::pair<int32_t, Scalar>>& extra = extras ? extras[i] : none;
    Best<Scalar> best(k, count, extra);
    out[i].clear();
    if (best.k == 0) continue;
    const std::vector<std::pair<int32_t, Scalar>> chosen = bestt[i].entries();  // best bound first
    const int64_t kept = static_cast<int64_t>(chosen.size());
    const BoundMargin<Scalar> margin(q, absmax_, sc);
    // Whether the next tile, and with it every tile after it, is out of reach: its bound (widened
    // by top_k's margin) below the k-th best. Then the answer is proven, and scoring stops early.
    auto out_of_reach = [&](int64_t v) {
      return best.full() &&
             margin.widen(static_cast<double>(chosen[v].second)) < static_cast<double>(best.v.back().first);
    };
    int64_t scored = 0, visit = 0;
    for (; visit < kept && visit < budget; ++visit) {
      if (visit >= tiles && best.full()) break;  // past the budget only until k keys are held
      if (out_of_reach(visit)) break;
      const int64_t t = t0 + chosen[visit].first;
      const int64_t a0 = std::max(first_, base_ + t * S_), a1 = std::min(first_ + count, base_ + (t + 1) * S_);
      score_span(q, scale, tiles_.data(), HS_, S_, base_, a0, a1, s.data());
      best.offer_span(s.data(), a1 - a0, static_cast<int32_t>(a0 - first_));
      scored += a1 - a0;
    }
    // Proven exact when every tile was scored, or every tile not scored has a bound below the k-th
    // best: the highest such bound is the next one in the stream.
    const bool proven = visit == T || (visit < kept && out_of_reach(visit));
    if (stats) {
      stats->tiles_visited += visit;
      stats->keys_scored += scored;
      stats->budget_stops += proven ? 0 : 1;
    }
    for (const auto& e : best.v) out[i].push_back(e.second);
    std::sort(out[i].begin(), out[i].end());
  }
  if (stats) {
    stats->queries += n;
    stats->tiles_bounded += n * T;
  }
}

template class LandmarkKeyIndex<float>;
template class LandmarkKeyIndex<double>;

}  // namespace lm
