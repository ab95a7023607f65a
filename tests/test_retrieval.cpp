// test_retrieval.cpp: the pure retrieval math of landmark/retrieval.h: top-k selection at the
// three granularities (hand-made score tables, a full stable sort with ties) and the stingy
// positions (hand-worked placements for k 1..8, and the invariants over every chosen subset).
#include "tests/helpers.h"

#include <algorithm>
#include <cmath>

#include "landmark/retrieval.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("retrieval: granularities select what they should", "[infer][retrieval]") {
  // NH 2, n 2 queries, nb 4 blocks; scores chosen by hand.
  const double s[] = {/* h0 q0 */ 5, 1, 0, 4, /* h0 q1 */ 0, 6, 1, 0,
                      /* h1 q0 */ 0, 0, 7, 0, /* h1 q1 */ 3, 0, 0, 2};
  auto th = select_blocks<double>(s, 2, 2, 4, 2, Granularity::TokenHead);
  CHECK(th[0] == std::vector<int32_t>{0, 3});  // chronological order, not score order
  CHECK(th[1] == std::vector<int32_t>{1, 2});
  CHECK(th[2] == std::vector<int32_t>{0, 2});  // ties among zeros go to the older block
  CHECK(th[3] == std::vector<int32_t>{0, 3});
  // Token: per token, max over heads of the per-head softmax. q0: h1's 7 dominates block 2 (p~0.997),
  // h0 gives block 0 p~0.72: {0, 2}. q1: h0's block 1 p~0.99, h1's block 0 p~0.69: {0, 1}.
  auto tok = select_blocks<double>(s, 2, 2, 4, 2, Granularity::Token);
  CHECK(tok[0] == std::vector<int32_t>{0, 2});
  CHECK(tok[2] == std::vector<int32_t>{0, 2});  // shared by both heads
  CHECK(tok[1] == std::vector<int32_t>{0, 1});
  // Head: per head, max over the chunk's tokens. h0: block 1 (0.99 from q1), block 0 (0.72 from q0).
  auto head = select_blocks<double>(s, 2, 2, 4, 2, Granularity::Head);
  CHECK(head[0] == std::vector<int32_t>{0, 1});
  CHECK(head[1] == std::vector<int32_t>{0, 1});  // shared by both tokens of head 0
  CHECK(head[2] == std::vector<int32_t>{0, 2});  // h1: block 2 (q0), block 0 (q1)
  CHECK(select_blocks<double>(s, 2, 2, 4, 9, Granularity::TokenHead)[0].size() == 4);  // k clamped
  CHECK_THROWS_AS(parse_granularity("tokens"), Error);
}

TEST_CASE("retrieval: top-k per (head, query) equals a full stable sort, ties included", "[infer][retrieval]") {
  // Independent answer: sort all blocks by (score descending, index ascending), keep k, order
  // chronologically. Scores from {0, 1, 2, 3} so ties are everywhere.
  manual_seed(5);
  for (int64_t nb : {1, 2, 7, 40, 300}) {
    for (int64_t k : {1, 2, 4, 9}) {
      std::vector<double> s = values(rand({nb}, DType::F64));
      for (double& x : s) x = std::floor(4.0 * x);
      std::vector<int32_t> order(static_cast<size_t>(nb));
      for (int32_t i = 0; i < static_cast<int32_t>(nb); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
      order.resize(static_cast<size_t>(std::min(k, nb)));
      std::sort(order.begin(), order.end());
      INFO("nb " << nb << " k " << k);
      CHECK(select_blocks<double>(s.data(), 1, 1, nb, k, Granularity::TokenHead)[0] == order);
    }
  }
  // Long rows (the selection tests runs of 16 scores at once once it holds k): a rising trend
  // brings new candidates inside runs and in the ragged end; f32 as inference uses it.
  for (int64_t nb : {16, 17, 1000, 1003}) {
    for (double trend : {0.0, 0.002, -0.002}) {
      std::vector<float> s(static_cast<size_t>(nb));
      std::vector<double> r = values(rand({nb}, DType::F64));
      for (int64_t i = 0; i < nb; ++i) s[i] = static_cast<float>(r[i] + trend * static_cast<double>(i));
      std::vector<int32_t> order(static_cast<size_t>(nb));
      for (int32_t i = 0; i < static_cast<int32_t>(nb); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
      order.resize(4);
      std::sort(order.begin(), order.end());
      INFO("nb " << nb << " trend " << trend);
      CHECK(select_blocks<float>(s.data(), 1, 1, nb, 4, Granularity::TokenHead)[0] == order);
    }
  }
}

TEST_CASE("retrieval: the top k fed in pieces equals the whole row, ties and NaN included", "[infer][retrieval]") {
  // Independent answer: select_blocks on the whole row (itself checked against a full stable sort
  // above). Scores from {0..3} (ties everywhere), with a NaN and infinities sprinkled in; pieces
  // of random sizes, including empty ones and pieces shorter than the runs TopKStream tests
  // together (four vectors of values: 64 f32 under AVX-512).
  manual_seed(17);
  for (int64_t nb : {1, 5, 33, 1000, 4099}) {
    for (int64_t k : {1, 4, 7}) {
      std::vector<float> s(static_cast<size_t>(nb));
      std::vector<double> r = values(rand({nb}, DType::F64));
      for (int64_t i = 0; i < nb; ++i) s[i] = std::floor(4.0f * static_cast<float>(r[i]));
      if (nb > 10) {
        s[3] = NAN;
        s[nb / 2] = INFINITY;
        s[nb - 1] = -INFINITY;
      }
      const std::vector<int32_t> want = select_blocks<float>(s.data(), 1, 1, nb, k, Granularity::TokenHead)[0];
      for (int trial = 0; trial < 3; ++trial) {
        TopKStream<float> stream(std::min(k, nb));
        int64_t at = 0;
        std::vector<double> cuts = values(rand({nb + 1}, DType::F64));
        size_t c = 0;
        while (at < nb) {
          const int64_t len = std::min<int64_t>(nb - at, static_cast<int64_t>(cuts[c++ % cuts.size()] * (trial == 0 ? 40 : 1100)));
          stream.push(s.data() + at, at, len);
          at += len;
        }
        INFO("nb " << nb << " k " << k << " trial " << trial);
        CHECK(stream.take() == want);
      }
    }
  }
  TopKStream<double> none(0);
  const double one = 1.0;
  none.push(&one, 0, 1);
  CHECK(none.take().empty());
}

TEST_CASE("retrieval: stingy scoring slots", "[retrieval]") {
  // 5 cached blocks, k = 2: the two newest score at their true slots 1 and 2, the rest at slot 0.
  CHECK(stingy_score_slots(5, 2) == std::vector<int32_t>{0, 0, 0, 1, 2});
  CHECK(stingy_score_slots(2, 4) == std::vector<int32_t>{3, 4});  // fewer cached than k: still true slots
  CHECK(stingy_score_slots(3, 0) == std::vector<int32_t>{0, 0, 0});
  for (int64_t b = 0; b < 5; ++b) CHECK(stingy_score_slot(b, 5, 2) == stingy_score_slots(5, 2)[b]);
}

TEST_CASE("stingy placement keeps chronological order", "[retrieval]") {
  using V = std::vector<int32_t>;
  // Hand-worked, from the rule "the j-th chosen block goes to slot j, plus 1 if it is one of the k
  // newest" (plus k - n more for those when only n < k blocks are cached).
  // k 1: one slot for old blocks, slot 1 for the newest.
  CHECK(stingy_attention_slots({4}, 5, 1) == V{1});
  CHECK(stingy_attention_slots({2}, 5, 1) == V{0});
  CHECK(stingy_attention_slots({0}, 1, 1) == V{1});
  // k 2, 5 cached (the paper's Figure 2 setting).
  CHECK(stingy_attention_slots({1, 4}, 5, 2) == V{0, 2});  // the empty slot 1 separates old from recent
  CHECK(stingy_attention_slots({0, 3}, 5, 2) == V{0, 2});  // block 3 moves right of the gap, not to its score slot 1
  CHECK(stingy_attention_slots({3, 4}, 5, 2) == V{1, 2});  // the two newest: their true slots
  CHECK(stingy_attention_slots({0, 2}, 5, 2) == V{0, 1});  // all old
  CHECK(stingy_attention_slots({0}, 1, 2) == V{2});        // fewer cached than k: true slot
  // k 3, 10 cached: the example, and the cases around it.
  CHECK(stingy_attention_slots({0, 1, 7}, 10, 3) == V{0, 1, 3});  // the old rule gave 0, 2, 1
  CHECK(stingy_attention_slots({7, 8, 9}, 10, 3) == V{1, 2, 3});
  CHECK(stingy_attention_slots({0, 1, 2}, 10, 3) == V{0, 1, 2});
  CHECK(stingy_attention_slots({2, 8, 9}, 10, 3) == V{0, 2, 3});
  CHECK(stingy_attention_slots({0, 5, 9}, 10, 3) == V{0, 1, 3});
  CHECK(stingy_attention_slots({0, 1}, 2, 3) == V{2, 3});
  // k 4.
  CHECK(stingy_attention_slots({0, 1, 2, 5}, 6, 4) == V{0, 1, 3, 4});
  CHECK(stingy_attention_slots({1, 3, 4, 5}, 6, 4) == V{0, 2, 3, 4});
  CHECK(stingy_attention_slots({0, 1, 2}, 3, 4) == V{2, 3, 4});
  // k 5, 20 cached: three old, two recent.
  CHECK(stingy_attention_slots({0, 4, 9, 16, 19}, 20, 5) == V{0, 1, 2, 4, 5});
  // k 6, 7 cached: only block 0 is old.
  CHECK(stingy_attention_slots({0, 1, 2, 3, 4, 5}, 7, 6) == V{0, 2, 3, 4, 5, 6});
  // k 7, 30 cached, all old.
  CHECK(stingy_attention_slots({0, 3, 6, 9, 12, 15, 18}, 30, 7) == V{0, 1, 2, 3, 4, 5, 6});
  // k 8: exactly 8 cached and all chosen; 5 cached and all chosen.
  CHECK(stingy_attention_slots({0, 1, 2, 3, 4, 5, 6, 7}, 8, 8) == V{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(stingy_attention_slots({0, 1, 2, 3, 4}, 5, 8) == V{4, 5, 6, 7, 8});

  // Every chosen subset of n <= 12 cached blocks with k <= 6 (subsets of at most min(k, n)).
  int64_t cases = 0;
  for (int64_t k = 1; k <= 6; ++k)
    for (int64_t n = 1; n <= 12; ++n) {
      const int64_t kk = std::min(k, n);
      V newest;
      for (int64_t b = n - kk; b < n; ++b) newest.push_back(static_cast<int32_t>(b));
      for (uint32_t mask = 1; mask < (1u << n); ++mask) {
        V chosen;
        for (int64_t b = 0; b < n; ++b)
          if (mask & (1u << b)) chosen.push_back(static_cast<int32_t>(b));
        if (static_cast<int64_t>(chosen.size()) > kk) continue;
        const V slot = stingy_attention_slots(chosen, n, k);
        ++cases;
        INFO("n " << n << " k " << k << " mask " << mask);
        REQUIRE(slot.size() == chosen.size());
        bool ok = true;
        for (size_t j = 0; j < slot.size(); ++j) {
          ok = ok && slot[j] >= 0 && slot[j] <= k;        // inside the k + 1 reserved slots
          if (j > 0) ok = ok && slot[j] > slot[j - 1];    // distinct, and chronological order kept
          const bool recent = n - 1 - chosen[j] < k;
          if (!recent) ok = ok && slot[j] == static_cast<int32_t>(j);  // old blocks fill slots from 0
        }
        if (chosen == newest)  // exactly the k newest: their true (scoring) slots
          for (size_t j = 0; j < slot.size(); ++j) ok = ok && slot[j] == stingy_score_slot(chosen[j], n, k);
        CHECK(ok);
      }
    }
  CHECK(cases > 10000);
  // Bad input: more blocks than k, a block outside the cache, an unsorted list.
  CHECK_THROWS_WITH(stingy_attention_slots({0, 1, 2}, 5, 2), Catch::Contains("3 blocks chosen"));
  CHECK_THROWS_WITH(stingy_attention_slots({5}, 5, 2), Catch::Contains("ascending"));
  CHECK_THROWS_WITH(stingy_attention_slots({3, 1}, 5, 2), Catch::Contains("ascending"));
}
