// retrieval.cpp: block selection and stingy positions (retrieval.h).
#include "landmark/retrieval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "tensor/check.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"

namespace lm {

Granularity parse_granularity(const std::string& s) {
  if (s == "token-head") return Granularity::TokenHead;
  if (s == "token") return Granularity::Token;
  if (s == "head") return Granularity::Head;
  LM_FAIL("unknown retrieval granularity '" << s << "' (expected token-head, token or head)");
}

const char* granularity_name(Granularity g) {
  return g == Granularity::TokenHead ? "token-head" : g == Granularity::Token ? "token" : "head";
}

namespace {
// Indices of the k largest values (ties: smaller index first), returned in ascending order: the
// whole row as one piece of a TopKStream.
template <class Scalar>
std::vector<int32_t> top_k(const Scalar* v, int64_t nb, int64_t k) {
  TopKStream<Scalar> stream(std::min(k, nb));
  stream.push(v, 0, nb);
  return stream.take();
}

// Softmax over the nb landmark scores of one (head, query), into out.
template <class Scalar>
void softmax_row(const Scalar* s, int64_t nb, double* out) {
  double m = -INFINITY, z = 0;
  for (int64_t b = 0; b < nb; ++b) m = std::max(m, static_cast<double>(s[b]));
  for (int64_t b = 0; b < nb; ++b) z += out[b] = std::exp(static_cast<double>(s[b]) - m);
  for (int64_t b = 0; b < nb; ++b) out[b] /= z;
}
}  // namespace

// One pass keeping the best k in a small array sorted best-first: most values lose against the
// current k-th best with one comparison, so this is O(nb) for the small k retrieval uses. Once k
// are held, a newcomer (a larger index than all of them) must be strictly above the k-th best
// value (`worst_`). At long contexts almost no value is, so runs of kRun values are tested
// against it together first, four full-width vector compares OR-ed (GCC vector extensions, as in
// tensor/cpu/vec_dot.h), and only a run with a candidate is walked value by value.
template <class Scalar>
void TopKStream<Scalar>::insert(Scalar value, int64_t index) {
  auto beats = [](const Entry& a, const Entry& b) {
    return a.value > b.value || (a.value == b.value && a.index < b.index);
  };
  const Entry e{value, static_cast<int32_t>(index)};
  best_.insert(std::upper_bound(best_.begin(), best_.end(), e, beats), e);
  if (static_cast<int64_t>(best_.size()) > k_) best_.pop_back();
  worst_ = best_.back().value;
}

template <class Scalar>
void TopKStream<Scalar>::push(const Scalar* v, int64_t first, int64_t len) {
  if (k_ <= 0) return;
  int64_t j = 0;
  for (; j < len && static_cast<int64_t>(best_.size()) < k_; ++j) insert(v[j], first + j);  // filling up
  typedef Scalar vec __attribute__((vector_size(cpu::kDotVecBytes)));
  typedef decltype(vec{} > vec{}) mask;  // lanes of all ones where the compare holds
  constexpr int64_t VL = cpu::kDotVecBytes / static_cast<int64_t>(sizeof(Scalar)), kRun = 4 * VL;
  for (; j + kRun <= len; j += kRun) {
    const vec w = vec{} + worst_;
    vec x[4];
    std::memcpy(x, v + j, sizeof(x));
    const mask any = (x[0] > w) | (x[1] > w) | (x[2] > w) | (x[3] > w);
    bool hit = false;
    for (int64_t u = 0; u < VL; ++u) hit |= any[u] != 0;
    if (!hit) continue;
    for (int64_t t = j; t < j + kRun; ++t)
      if (v[t] > worst_) insert(v[t], first + t);
  }
  for (; j < len; ++j)
    if (v[j] > worst_) insert(v[j], first + j);
}

template <class Scalar>
std::vector<int32_t> TopKStream<Scalar>::take() const {
  std::vector<int32_t> out;
  out.reserve(best_.size());
  for (const Entry& e : best_) out.push_back(e.index);
  std::sort(out.begin(), out.end());
  return out;
}

template <class Scalar>
std::vector<std::pair<int32_t, Scalar>> TopKStream<Scalar>::entries() const {
  std::vector<std::pair<int32_t, Scalar>> out;
  out.reserve(best_.size());
  for (const Entry& e : best_) out.emplace_back(e.index, e.value);
  return out;
}

template class TopKStream<float>;
template class TopKStream<double>;

template <class Scalar>
std::vector<std::vector<int32_t>> select_blocks(const Scalar* scores, int64_t NH, int64_t n, int64_t nb, int64_t k,
                                                Granularity g) {
  LM_CHECK(NH > 0 && n >= 0 && nb >= 0 && k >= 0,
           "select_blocks: bad sizes NH=" << NH << " n=" << n << " nb=" << nb << " k=" << k);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(NH * n));
  if (nb == 0 || k == 0 || n == 0) return out;
  if (g == Granularity::TokenHead) {  // rows apart, split across threads (each row's answer is its own)
    cpu::parallel_for(NH * n, nb, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) out[r] = top_k(scores + r * nb, nb, k);
    });
    return out;
  }
  // Shared sets compare blocks by their softmax probability, so heads (or tokens) with different
  // score scales weigh in alike; the max keeps a block any one of them strongly wants.
  std::vector<double> p(static_cast<size_t>(nb)), best;
  if (g == Granularity::Token) {
    for (int64_t i = 0; i < n; ++i) {
      best.assign(static_cast<size_t>(nb), 0.0);
      for (int64_t h = 0; h < NH; ++h) {
        softmax_row(scores + (h * n + i) * nb, nb, p.data());
        for (int64_t b = 0; b < nb; ++b) best[b] = std::max(best[b], p[b]);
      }
      std::vector<int32_t> chosen = top_k(best.data(), nb, k);
      for (int64_t h = 0; h < NH; ++h) out[h * n + i] = chosen;
    }
  } else {
    for (int64_t h = 0; h < NH; ++h) {
      best.assign(static_cast<size_t>(nb), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        softmax_row(scores + (h * n + i) * nb, nb, p.data());
        for (int64_t b = 0; b < nb; ++b) best[b] = std::max(best[b], p[b]);
      }
      std::vector<int32_t> chosen = top_k(best.data(), nb, k);
      for (int64_t i = 0; i < n; ++i) out[h * n + i] = chosen;
    }
  }
  return out;
}

template std::vector<std::vector<int32_t>> select_blocks<float>(const float*, int64_t, int64_t, int64_t, int64_t,
                                                                Granularity);
template std::vector<std::vector<int32_t>> select_blocks<double>(const double*, int64_t, int64_t, int64_t, int64_t,
                                                                 Granularity);

std::vector<int32_t> stingy_score_slots(int64_t n, int64_t k) {
  LM_CHECK(n >= 0 && k >= 0, "stingy_score_slots: n and k must be >= 0, got " << n << ", " << k);
  // The newest block sits in slot k, the one before in k - 1, ..., the k-th newest in slot 1.
  std::vector<int32_t> slot(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) slot[b] = static_cast<int32_t>(stingy_score_slot(b, n, k));
  return slot;
}

std::vector<int32_t> stingy_attention_slots(const std::vector<int32_t>& chosen, int64_t n, int64_t k) {
  LM_CHECK(static_cast<int64_t>(chosen.size()) <= std::min(k, n),
           "stingy_attention_slots: " << chosen.size() << " blocks chosen from " << n << " cached with k = " << k);
  // A recent block sits one slot further right than its rank, and further still when fewer than
  // k blocks are cached, so that the newest block always ends up in slot k next to the context.
  const int64_t recent_shift = 1 + k - std::min(k, n);
  std::vector<int32_t> out(chosen.size());
  for (size_t j = 0; j < chosen.size(); ++j) {
    LM_CHECK(chosen[j] >= 0 && chosen[j] < n && (j == 0 || chosen[j] > chosen[j - 1]),
             "stingy_attention_slots: chosen blocks must be distinct, ascending and in 0.."
                 << n - 1 << "; got " << chosen[j] << " at " << j);
    const bool recent = stingy_score_slot(chosen[j], n, k) > 0;
    out[j] = static_cast<int32_t>(static_cast<int64_t>(j) + (recent ? recent_shift : 0));
  }
  return out;
}

}  // namespace lm
