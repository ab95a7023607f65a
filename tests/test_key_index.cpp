// test_key_index.cpp: the bounded top-k over landmark keys (landmark/key_index.h) against every
// key scored and sorted (random keys, near-identical keys like filler text, ties, extra
// candidates, dropped blocks), its scores against a plain f64 dot product, and whole inference
// sessions with the bounded search against the scan (the same blocks, the same logits); the
// approximate search (a tile budget): exact when the budget did not cut, a hand-worked miss.
#include "tests/helpers.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "infer/session.h"
#include "landmark/key_index.h"
#include "tests/infer_fixtures.h"

using namespace lm;
using lm::test::values;

namespace {

// The answer by definition: score every key (scan_scores), add the extras, sort by score
// (higher first; ties to the smaller index), keep k, return ascending.
template <class Scalar>
std::vector<int32_t> sorted_top_k(const LandmarkKeyIndex<Scalar>& ix, const Scalar* q, Scalar scale, int64_t count,
                                  int64_t k, const std::vector<std::pair<int32_t, Scalar>>& extra) {
  std::vector<Scalar> s(static_cast<size_t>(count));
  ix.scan_scores(q, scale, count, s.data());
  std::vector<std::pair<Scalar, int32_t>> all;
  for (int64_t b = 0; b < count; ++b) all.emplace_back(s[b], static_cast<int32_t>(b));
  for (const auto& e : extra) all.emplace_back(e.second, e.first);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<int32_t> out;
  for (int64_t j = 0; j < std::min<int64_t>(k, static_cast<int64_t>(all.size())); ++j) out.push_back(all[j].second);
  std::sort(out.begin(), out.end());
  return out;
}

template <class Scalar> void random_index_cases() {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> nd;
  for (int64_t HS : {8, 32})
    for (int64_t tile : {1, 4, 64})
      for (int64_t nb : {0, 1, 7, 300}) {
        LandmarkKeyIndex<Scalar> ix(HS, tile);
        std::vector<Scalar> keys(static_cast<size_t>(nb * HS));
        for (Scalar& v : keys) v = static_cast<Scalar>(nd(gen));
        for (int64_t b = 0; b < nb; ++b) ix.append(keys.data() + b * HS);
        REQUIRE(ix.size() == nb);
        // Each key reads back in place, every feature, across tiles (the tiles keep them transposed).
        for (int64_t b = 0; b < nb; ++b) {
          int64_t stride = 0;
          const Scalar* kb = ix.rotated_key(b, &stride);
          for (int64_t d = 0; d < HS; ++d) REQUIRE(kb[d * stride] == keys[b * HS + d]);
        }
        const Scalar scale = static_cast<Scalar>(1.0 / std::sqrt(static_cast<double>(HS)));
        for (int trial = 0; trial < 20; ++trial) {
          std::vector<Scalar> q(static_cast<size_t>(HS));
          for (Scalar& v : q) v = static_cast<Scalar>(3 * nd(gen));  // peaked, as trained queries are
          // The scan's scores against a plain f64 dot product: only the rounding of Scalar may differ.
          std::vector<Scalar> s(static_cast<size_t>(nb));
          ix.scan_scores(q.data(), scale, nb, s.data());
          for (int64_t b = 0; b < nb; ++b) {
            double ref = 0;
            for (int64_t d = 0; d < HS; ++d) ref += static_cast<double>(q[d]) * static_cast<double>(keys[b * HS + d]);
            ref *= static_cast<double>(scale);
            // scores of size ~10: f32 a few ulps (1e-4), f64 1e-12
            REQUIRE(std::fabs(static_cast<double>(s[b]) - ref) < (sizeof(Scalar) == 4 ? 1e-4 : 1e-12));
          }
          for (int64_t k : {1, 4, 10}) {
            // Without extras, then with the newest few blocks given as extras at other scores.
            const int64_t recent = std::min<int64_t>(nb, trial % 4);
            std::vector<std::pair<int32_t, Scalar>> extra;
            for (int64_t j = nb - recent; j < nb; ++j) extra.emplace_back(static_cast<int32_t>(j),
                static_cast<Scalar>(5 * nd(gen)));
            KeySearchStats st;
            CHECK(ix.top_k(q.data(), scale, nb, k, {}, &st) == sorted_top_k(ix, q.data(), scale, nb, k, {}));
            CHECK(ix.top_k(q.data(), scale, nb - recent, k, extra) == sorted_top_k(ix, q.data(), scale, nb - recent, k, extra));
            CHECK(st.keys_scored <= nb);
            // The approximate search (a tile budget): with as many tiles as there are it is the exact
            // search; with fewer, as many blocks as the exact search gives still come back, distinct
            // and ascending, and every answer it calls proven is exactly the exact answer.
            const std::vector<int32_t> exact = sorted_top_k(ix, q.data(), scale, nb - recent, k, extra);
            std::vector<int32_t> all;
            ix.approx_top_k(q.data(), 1, scale, nb - recent, k, nb / tile + 1, &extra, &all);
            CHECK(all == exact);
            for (int64_t budget : {1, 2, 3}) {
              KeySearchStats sb;
              std::vector<int32_t> got;
              ix.approx_top_k(q.data(), 1, scale, nb - recent, k, budget, &extra, &got, &sb);
              REQUIRE(static_cast<int64_t>(got.size()) == static_cast<int64_t>(exact.size()));
              CHECK(std::is_sorted(got.begin(), got.end()));
              CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
              // past the budget only as far as k keys need (the range's two end tiles may be partial)
              const int64_t most = std::max(budget, (k + tile - 1) / tile + 2);
              CHECK(sb.tiles_visited <= most);
              CHECK(sb.keys_scored <= most * tile);
              if (sb.budget_stops == 0) CHECK(got == exact);
            }
          }
        }
        // Drop the oldest third: indices count from the oldest kept; the answers follow.
        if (nb > 3) {
          const int64_t drop = nb / 3;
          ix.drop_oldest(drop);
          REQUIRE(ix.size() == nb - drop);
          int64_t stride = 0;
          const Scalar* k0 = ix.rotated_key(0, &stride);
          for (int64_t d = 0; d < HS; ++d) REQUIRE(k0[d * stride] == keys[drop * HS + d]);
          std::vector<Scalar> q(static_cast<size_t>(HS));
          for (Scalar& v : q) v = static_cast<Scalar>(3 * nd(gen));
          std::vector<Scalar> s(static_cast<size_t>(ix.size()));
          ix.scan_scores(q.data(), scale, ix.size(), s.data());
          double ref = 0;  // the first kept block's score is the dropped-past block's
          for (int64_t d = 0; d < HS; ++d) ref += static_cast<double>(q[d]) * static_cast<double>(keys[drop * HS + d]);
          CHECK(std::fabs(static_cast<double>(s[0]) - ref * static_cast<double>(scale)) < (sizeof(Scalar) == 4 ? 1e-4 : 1e-12));
          for (int64_t k : {1, 4})
            CHECK(ix.top_k(q.data(), scale, ix.size(), k, {}) == sorted_top_k(ix, q.data(), scale, ix.size(), k, {}));
        }
      }
}

}  // namespace

TEST_CASE("landmark key index: the bounded top k equals every key scored and sorted (f32, f64)", "[retrieval][key-index]") {
  random_index_cases<float>();
  random_index_cases<double>();
}

TEST_CASE("landmark key index: tiles of near-identical keys (filler) are skipped when k needles outscore them",
          "[retrieval][key-index]") {
  // 20,000 blocks of filler: one key plus noise 1e-3, as repeated text gives; 4 needle blocks whose
  // keys point elsewhere. A query that looks for the needles must find all 4 with k = 4, and then
  // every filler tile's bound is below the 4th needle's score: only the needles' tiles (and the
  // one with the highest bound) are scored. With k = 5 the 5th place is a near-tie among 20,000
  // filler blocks: an exact search must score them all, and it does (the reason the scan stays
  // the default: docs/infer.md section 9.2).
  const int64_t HS = 32, nb = 20000;
  const std::vector<int64_t> needles{123, 4567, 12345, 19999};
  std::mt19937_64 gen(3);
  std::normal_distribution<double> nd;
  std::vector<float> base(HS), target(HS), key(HS);
  for (int64_t d = 0; d < HS; ++d) {
    base[d] = static_cast<float>(nd(gen));
    target[d] = static_cast<float>(nd(gen));
  }
  LandmarkKeyIndex<float> ix(HS);
  for (int64_t b = 0; b < nb; ++b) {
    const bool needle = std::find(needles.begin(), needles.end(), b) != needles.end();
    for (int64_t d = 0; d < HS; ++d) key[d] = needle ? target[d] + static_cast<float>(0.1 * nd(gen)) : base[d] + static_cast<float>(1e-3 * nd(gen));
    ix.append(key.data());
  }
  std::vector<float> q(target);
  for (float& v : q) v *= 2;
  const float scale = 1.0f / std::sqrt(32.0f);
  KeySearchStats st;
  const std::vector<int32_t> got = ix.top_k(q.data(), scale, nb, 4, {}, &st);
  CHECK(got == std::vector<int32_t>(needles.begin(), needles.end()));
  CHECK(got == sorted_top_k(ix, q.data(), scale, nb, 4, {}));
  INFO("k 4: keys scored " << st.keys_scored << " of " << nb << ", tiles visited " << st.tiles_visited << " of " << st.tiles_bounded);
  CHECK(st.tiles_bounded == (nb + 63) / 64);
  CHECK(st.tiles_visited <= 5);  // the 4 needles' tiles, at most one more
  KeySearchStats st5;
  CHECK(ix.top_k(q.data(), scale, nb, 5, {}, &st5) == sorted_top_k(ix, q.data(), scale, nb, 5, {}));
  CHECK(st5.keys_scored == nb);
  // The approximate search with a budget of 8 tiles of 313: for k 4 the answer is proven exact
  // (once the needles' tiles are scored, the next highest bound, a filler tile's, is below the 4th
  // needle's score, and no more tiles are scored); for k 5 it is not
  // (the fifth place is a filler block, and the unscored filler tiles could hold a better one),
  // yet the four needles are in the answer.
  KeySearchStats a4, a5;
  std::vector<int32_t> four, five;
  ix.approx_top_k(q.data(), 1, scale, nb, 4, 8, nullptr, &four, &a4);
  CHECK(four == got);
  CHECK(a4.budget_stops == 0);
  CHECK(a4.tiles_bounded == 313);
  CHECK(a4.tiles_visited <= 5);  // it stops at the first tile out of reach, as top_k does, not at 8
  ix.approx_top_k(q.data(), 1, scale, nb, 5, 8, nullptr, &five, &a5);
  CHECK(a5.budget_stops == 1);
  CHECK(a5.tiles_visited == 8);
  CHECK(a5.keys_scored <= 8 * 64);
  REQUIRE(five.size() == 5);
  for (int64_t n : needles) CHECK(std::find(five.begin(), five.end(), static_cast<int32_t>(n)) != five.end());
}

TEST_CASE("landmark key index: a tile budget misses a winner whose tile has a lower bound (hand-worked)",
          "[retrieval][key-index]") {
  // Tiles of 2 keys, query q = (1, 1), scale 1. Tile 0 holds (10, -10) and (-10, 10): its bound is
  // 10 + 10 = 20 but both score 0. Tile 1 holds (3, 3) and (0, 0): bound 6, scores 6 and 0. Tile 2
  // holds (-5, -5) twice: bound and scores -10. The best block is 2 (score 6).
  LandmarkKeyIndex<double> ix(2, 2);
  const std::vector<std::vector<double>> keys{{10, -10}, {-10, 10}, {3, 3}, {0, 0}, {-5, -5}, {-5, -5}};
  for (const auto& k : keys) ix.append(k.data());
  const std::vector<double> q{1, 1};
  KeySearchStats s1, s2;
  std::vector<int32_t> got;
  // One tile: tile 0 (highest bound) is scored, block 0 kept (score 0, the older of a tie), and
  // tile 1's bound 6 is above it: not proven, and wrong.
  ix.approx_top_k(q.data(), 1, 1.0, 6, 1, 1, nullptr, &got, &s1);
  CHECK(got == std::vector<int32_t>{0});
  CHECK(s1.budget_stops == 1);
  CHECK(s1.keys_scored == 2);
  CHECK(s1.tiles_bounded == 3);
  // Two tiles: tile 1 gives block 2 (6), and the tile left, bound -10, cannot beat it: proven.
  ix.approx_top_k(q.data(), 1, 1.0, 6, 1, 2, nullptr, &got, &s2);
  CHECK(got == std::vector<int32_t>{2});
  CHECK(s2.budget_stops == 0);
  CHECK(s2.keys_scored == 4);
  // The exact search agrees; a budget below one tile is an error.
  CHECK(ix.top_k(q.data(), 1.0, 6, 1, {}) == std::vector<int32_t>{2});
  CHECK_THROWS_AS(ix.approx_top_k(q.data(), 1, 1.0, 6, 1, 0, nullptr, &got), Error);
}

TEST_CASE("landmark key index: the approximate search answers a batch of queries as it answers each alone",
          "[retrieval][key-index]") {
  // 37 queries against 1,000 random keys in tiles of 16, a budget of 5 tiles, extras for some:
  // the bounds come from one GEMM over the batch, and each query's answer must be the one it gets
  // alone. Alone, the GEMM takes its few-row path, which sums in another order, so a bound may
  // differ in its last bit; that could swap two tiles only if their bounds were within a rounding
  // of each other, which these continuous random keys do not produce (the scores of the keys
  // themselves are computed the same way both times).
  const int64_t HS = 24, nb = 1000, n = 37;
  std::mt19937_64 gen(5);
  std::normal_distribution<double> nd;
  LandmarkKeyIndex<float> ix(HS, 16);
  std::vector<float> key(HS);
  for (int64_t b = 0; b < nb; ++b) {
    for (float& v : key) v = static_cast<float>(nd(gen));
    ix.append(key.data());
  }
  std::vector<float> Q(static_cast<size_t>(n * HS));
  for (float& v : Q) v = static_cast<float>(2 * nd(gen));
  std::vector<std::vector<std::pair<int32_t, float>>> extras(n);
  for (int64_t i = 0; i < n; i += 3) extras[i] = {{998, static_cast<float>(nd(gen))}, {999, static_cast<float>(3 + nd(gen))}};
  std::vector<std::vector<int32_t>> batch(n);
  KeySearchStats sb;
  ix.approx_top_k(Q.data(), n, 0.2f, 998, 4, 5, extras.data(), batch.data(), &sb);
  KeySearchStats s1;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> alone;
    ix.approx_top_k(Q.data() + i * HS, 1, 0.2f, 998, 4, 5, &extras[i], &alone, &s1);
    CHECK(batch[i] == alone);
  }
  CHECK(sb.budget_stops == s1.budget_stops);
  CHECK(sb.keys_scored == s1.keys_scored);
  CHECK(sb.queries == n);
  INFO("queries not proven exact: " << sb.budget_stops << " of " << n);
  CHECK(sb.budget_stops > 0);  // random keys: loose bounds, a budget of 5 of 63 tiles proves few
}

TEST_CASE("landmark key index: ties go to the older block, extras included (a hand-worked case)", "[retrieval][key-index]") {
  // Ten identical keys in tiles of 3: every score ties, so the top 4 are blocks 0..3; an extra
  // (block 10) with the same score loses to all of them, one with a higher score wins a place.
  const int64_t HS = 4;
  LandmarkKeyIndex<double> ix(HS, 3);
  const std::vector<double> key{1, -2, 0.5, 3}, q{0.3, 0.1, -1, 2};
  for (int b = 0; b < 10; ++b) ix.append(key.data());
  const double s = (0.3 - 0.2 - 0.5 + 6) * 0.5;  // q . key * scale 0.5 = 2.8 (exact in binary? no; equal for all)
  std::vector<double> sc(10);
  ix.scan_scores(q.data(), 0.5, 10, sc.data());
  for (double v : sc) REQUIRE(v == sc[0]);
  CHECK(std::fabs(sc[0] - s) < 1e-12);
  CHECK(ix.top_k(q.data(), 0.5, 10, 4, {}) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(ix.top_k(q.data(), 0.5, 10, 4, {{10, sc[0]}}) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(ix.top_k(q.data(), 0.5, 10, 4, {{10, sc[0] + 1}}) == std::vector<int32_t>{0, 1, 2, 10});
  CHECK(ix.top_k(q.data(), 0.5, 0, 4, {{10, 1.0}, {11, 2.0}}) == std::vector<int32_t>{10, 11});  // fewer than k in all
  CHECK(ix.top_k(q.data(), 0.5, 10, 0, {}).empty());
  CHECK_THROWS_AS(ix.top_k(q.data(), 0.5, 10, 4, {{5, 1.0}}), Error);  // an extra inside the searched range
  CHECK_THROWS_AS(ix.drop_oldest(11), Error);
  int64_t stride = 0;
  CHECK_THROWS_AS(ix.rotated_key(10, &stride), Error);
}

TEST_CASE("inference: the bounded search retrieves the same blocks as the scan, so the logits are equal",
          "[infer][retrieval][key-index]") {
  // The test model (tests/infer_fixtures.h, F 5) over 400 tokens in chunks of 37: 80 blocks, tiles
  // of 64, so the bound skips or visits whole tiles. Stingy and exact, f64 and f32, with and
  // without a capacity; the two searches must choose the same blocks for every row of every
  // chunk, and then the logits are the same bits.
  for (DType dt : {DType::F64, DType::F32}) {
    auto model = infer_test::make_model(dt);
    const std::vector<int32_t> raw = infer_test::random_raw(400, 17);
    for (PositionMode pm : {PositionMode::Stingy, PositionMode::Exact})
      for (int64_t capacity : {0, 30}) {
        InferConfig c;
        c.chunk_len = 37;
        c.k = 3;
        c.positions = pm;
        c.capacity = capacity;
        auto run = [&](KeySearch search, RetrievalTrace& trace) {
          c.search = search;
          InferenceSession s(*model, c, infer_test::kLandmarkId);
          s.set_trace(&trace);
          Tensor out = s.feed(raw);
          int64_t scored = 0;
          for (const RetrievalRecord& r : s.retrieval_log()) scored += r.keys_scored;
          return std::make_pair(values(out), scored);
        };
        RetrievalTrace tb, ts, ta;
        const auto bounded = run(KeySearch::Bounded, tb), scan = run(KeySearch::Scan, ts);
        INFO(dtype_name(dt) << " " << position_mode_name(pm) << " capacity " << capacity);
        REQUIRE(tb.steps.size() == ts.steps.size());
        for (size_t i = 0; i < tb.steps.size(); ++i) REQUIRE(tb.steps[i].sel == ts.steps[i].sel);
        CHECK(bounded.first == scan.first);
        CHECK(bounded.second <= scan.second);
        // The approximate search with a budget of 2 tiles (80 blocks: 2 tiles of 64, so never cut)
        // is the bounded search, block for block.
        c.search_tiles = 2;
        const auto approx = run(KeySearch::Approx, ta);
        REQUIRE(ta.steps.size() == ts.steps.size());
        for (size_t i = 0; i < ta.steps.size(); ++i) REQUIRE(ta.steps[i].sel == ts.steps[i].sel);
        CHECK(approx.first == scan.first);
        // A budget of one tile: once the cache spans two tiles some rows run out (counted in the
        // records), and every row still gets as many blocks as the scan gave it.
        if (capacity == 0) {
          c.search_tiles = 1;
          RetrievalTrace t1;
          InferenceSession s1(*model, c, infer_test::kLandmarkId);
          s1.set_trace(&t1);
          s1.feed(raw);
          int64_t cut = 0;
          for (const RetrievalRecord& r : s1.retrieval_log()) cut += r.budget_cut;
          CHECK(cut > 0);
          REQUIRE(t1.steps.size() == ts.steps.size());
          for (size_t i = 0; i < t1.steps.size(); ++i) {
            REQUIRE(t1.steps[i].sel.size() == ts.steps[i].sel.size());
            for (size_t r = 0; r < t1.steps[i].sel.size(); ++r) CHECK(t1.steps[i].sel[r].size() == ts.steps[i].sel[r].size());
          }
        }
        c.search_tiles = 16;
      }
  }
}
