// test_reference.cpp: cached inference, InferenceSession (infer/session.h) and its one-token decode
// step (beyond/decode_step.h), against the end-to-end reference written from the paper's
// definitions (infer/reference.cpp), which shares nothing with them but the model's weights. On
// the small random models of tests/infer_fixtures.h: every granularity, both position modes,
// with and without a context-miss token and with its cutoff, k below the cached blocks, chunks
// that split blocks, capacity eviction, scores that all tie, and decode steps after a prefill.
#include "tests/helpers.h"

#include <set>

#include "infer/reference.h"
#include "beyond/session.h"
#include "infer/session.h"
#include "tests/infer_fixtures.h"

using namespace lm;
using namespace lm::test;

namespace {
using infer_test::build_model;
using infer_test::kCmtId;
using infer_test::kLandmarkId;
using infer_test::random_raw;

std::vector<double> flat(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out;
  for (const std::vector<double>& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

double largest(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}
}  // namespace

TEST_CASE("cached inference equals the end-to-end reference", "[infer][reference]") {
  // Each combination is one run of this test case (GENERATE).
  const Granularity granularity = GENERATE(Granularity::TokenHead, Granularity::Token, Granularity::Head);
  const PositionMode positions = GENERATE(PositionMode::Stingy, PositionMode::Exact);
  const int cmt = GENERATE(0, 1, 2);        // 0: no context-miss token; 1: a CMT; 2: a CMT with a cutoff
  const bool ring = GENERATE(false, true);  // false: chunks of 7, every block kept; true: chunks of 11, 9 kept
  // true: zero queries, so every landmark scores 0 and the tie rule alone makes every choice. Exact
  // ties come with random weights too: in layer 0 every landmark has the same key (its embedding,
  // normalised and projected), so in stingy mode the blocks older than the k newest, all scored at
  // slot 0, tie, and the rule picks the oldest.
  const bool ties = GENERATE(false, true);
  InferConfig cfg;
  cfg.chunk_len = ring ? 11 : 7;  // 7 or 11 raw tokens: blocks of F + 1 = 6 split across chunks
  cfg.k = 3;
  cfg.capacity = ring ? 9 : 0;
  cfg.granularity = granularity;
  cfg.positions = positions;
  cfg.cmt_cutoff = cmt == 2 ? 0.3 : 0.0;
  const int32_t cmt_id = cmt > 0 ? kCmtId : -1;
  INFO(granularity_name(granularity) << ", " << position_mode_name(positions) << ", "
                                     << (cmt == 0 ? "no CMT" : cmt == 1 ? "CMT" : "CMT cutoff 0.3") << ", "
                                     << (ring ? "chunks of 11, capacity 9" : "chunks of 7, no capacity")
                                     << (ties ? ", every score tied" : ""));
  // 200 raw tokens are 40 blocks of F = 5; then 12 tokens one at a time, 2 of which close a block.
  const std::vector<int32_t> prompt = random_raw(200, 31), next = random_raw(12, 32);
  // The f64 and f32 models hold the same values: both are made in f32 and the first converted.
  const auto m64 = build_model(cmt > 0, 103, DType::F64, Device::CPU, ties);
  const auto m32 = build_model(cmt > 0, 103, DType::F32, Device::CPU, ties);

  reference::CachedInference ref(*m64, cfg, kLandmarkId, cmt_id);
  const std::vector<double> want = flat(ref.feed(prompt));
  const size_t prompt_records = ref.records().size();
  std::vector<std::vector<double>> want_next;
  for (int32_t t : next) want_next.push_back(flat(ref.feed_chunk({t})));
  const std::vector<reference::Record>& recs = ref.records();

  // What the runs exercise. k = 3 is below the cached blocks for most of the prompt (up to 39
  // cached, or 9 with the capacity), so each query leaves most of them unretrieved; the capacity
  // evicts; with every score tied, the oldest k are chosen.
  const reference::Record& last = recs[prompt_records - 1];
  CHECK(last.cached == (ring ? 9 : 196 / 5));  // the last chunk starts after 196 raw tokens
  std::set<int32_t> used;
  for (const std::vector<int32_t>& s : last.sel) {
    CHECK(static_cast<int64_t>(s.size()) == cfg.k);
    used.insert(s.begin(), s.end());
  }
  if (!ring) CHECK(static_cast<int64_t>(used.size()) < last.cached);  // some block no row of the chunk took
  if (ties) CHECK(last.sel[0] == std::vector<int32_t>{0, 1, 2});
  int64_t rows = 0, dropped = 0;
  for (const reference::Record& r : recs) rows += r.cmt_rows, dropped += r.cmt_dropped;
  const int64_t queries = 212 + 212 / 5;  // every raw token and every landmark, in each head and layer
  CHECK(rows == (cmt > 0 ? m64->config().n_head * m64->config().n_layer * queries : 0));
  if (cmt == 2 && !ties) CHECK((dropped > 0 && dropped < rows));  // the cutoff matters both ways
  if (cmt < 2) CHECK(dropped == 0);

  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    BeyondSession s(dt == DType::F64 ? *m64 : *m32, cfg, kLandmarkId, cmt_id);
    // f64: the same sums in other orders, and rotations composed where the reference rotates once
    // (measured: at most 3e-15). f32: every product and sum rounded to 6e-8 relative, through two
    // layers whose matrices are scaled by 8 and whose scores go through exponentials; measured at
    // most 1.5e-6 on logits of size ~3 over every run. The bound, 1e-5 of the largest logit, leaves
    // a margin of ~20 and is still far below what a block chosen, placed or gated wrongly changes.
    const double tol = dt == DType::F64 ? 1e-10 : 1e-5 * std::max(1.0, largest(want));
    RetrievalTrace trace;  // the prefill's choices (a traced token would not take the decode step)
    s.set_trace(&trace);
    const Tensor got = s.feed(prompt);
    s.set_trace(nullptr);
    CHECK(max_abs_diff(got, want) < tol);
    double worst = 0;
    for (size_t d = 0; d < next.size(); ++d)
      worst = std::max(worst, max_abs_diff(s.feed_chunk({next[d]}), want_next[d]));
    CHECK(worst < tol);
    // The decode step serves token-head granularity only; the two tokens that close a block are
    // chunks of two (the token and its landmark) and take the chunk path.
    CHECK(s.decode_steps() == (granularity == Granularity::TokenHead ? 10 : 0));
    if (dt == DType::F32) continue;
    // In f64 the same choices, block for block, and the same CMT counts, record for record.
    REQUIRE(trace.steps.size() == prompt_records);
    for (size_t j = 0; j < prompt_records; ++j) {
      INFO("record " << j << ", layer " << trace.steps[j].layer);
      CHECK(trace.steps[j].first_gid == recs[j].first_gid);
      CHECK(trace.steps[j].cached == recs[j].cached);
      CHECK(trace.steps[j].sel == recs[j].sel);
    }
    REQUIRE(s.retrieval_log().size() == recs.size());
    for (size_t j = 0; j < recs.size(); ++j) {
      CHECK(s.retrieval_log()[j].cached == recs[j].cached);
      CHECK(s.retrieval_log()[j].cmt_rows == recs[j].cmt_rows);
      CHECK(s.retrieval_log()[j].cmt_dropped == recs[j].cmt_dropped);
    }
  }
}

TEST_CASE("a k far above the cached blocks: the reference's logits, rotary rows bounded by the text",
          "[infer][reference]") {
  // k 20000 with at most 13 blocks cached. Stingy mode puts the chunk at (k + 1)(F + 1) = 120006
  // and the cached blocks in the slots just below it: the positions the session uses span about
  // (nb + 1)(F + 1) plus a chunk, and the rotary rows it holds must follow them, not k (the rows
  // from 0 up would be 120006 and more). The reference rotates every key directly at its
  // position, so it holds no table and is cheap at any k: the logits must still be its own.
  // TokenHead: the chunk path's scan and, one token at a time, the decode step; Token: the chunk
  // path's score matrix and selection, also for the tokens fed one at a time.
  const Granularity granularity = GENERATE(Granularity::TokenHead, Granularity::Token);
  INFO(granularity_name(granularity));
  InferConfig cfg;
  cfg.chunk_len = 7;
  cfg.k = 20000;
  cfg.granularity = granularity;
  cfg.positions = PositionMode::Stingy;
  const int64_t F = 5, B1 = F + 1;
  // 60 raw tokens are 12 blocks; then 8 tokens one at a time, 1 of which closes a block.
  const std::vector<int32_t> prompt = random_raw(60, 41), next = random_raw(8, 42);
  const auto m64 = build_model(false, 103, DType::F64, Device::CPU, false);
  const auto m32 = build_model(false, 103, DType::F32, Device::CPU, false);
  REQUIRE(m64->config().landmark_every == F);

  reference::CachedInference ref(*m64, cfg, kLandmarkId);
  const std::vector<double> want = flat(ref.feed(prompt));
  std::vector<std::vector<double>> want_next;
  for (int32_t t : next) want_next.push_back(flat(ref.feed_chunk({t})));
  // Every query retrieves every cached block (k is above them all), at the slots next to the chunk.
  const reference::Record& last = ref.records().back();
  CHECK(last.cached == 13);
  CHECK(static_cast<int64_t>(last.sel[0].size()) == 13);

  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    BeyondSession s(dt == DType::F64 ? *m64 : *m32, cfg, kLandmarkId);
    // The tolerances and their reasons: the test above (measured here: 1.7e-14 in f64, 8.5e-7 in
    // f32 on logits of size up to 2.6).
    const double tol = dt == DType::F64 ? 1e-10 : 1e-5 * std::max(1.0, largest(want));
    CHECK(max_abs_diff(s.feed(prompt), want) < tol);
    double worst = 0;
    for (size_t d = 0; d < next.size(); ++d)
      worst = std::max(worst, max_abs_diff(s.feed_chunk({next[d]}), want_next[d]));
    CHECK(worst < tol);
    CHECK(s.decode_steps() == (granularity == Granularity::TokenHead ? 7 : 0));
    // The rows held: the span used is [(k - nb + 1)(F + 1), (k + 1)(F + 1) + tail + chunk), at most
    // nb (F + 1) + F + 9 positions (a chunk of 7 raw tokens holds at most 2 landmarks), and the
    // window at most doubles what it must hold; slack of one block.
    const int64_t nb = s.cached_blocks();
    CHECK(nb == 13);
    CHECK(s.rotary_rows() <= 2 * ((nb + 1) * B1 + F + 9));  // 196; measured 128; from 0 up: 120006 and more
    CHECK(s.rotary_rows() > 0);
  }
}
