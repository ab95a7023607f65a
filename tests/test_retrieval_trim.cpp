// test_retrieval_trim.cpp: beyond the paper. Retrieving fewer blocks than the plan chose
// (beyond/cmt_skip.h, beyond/adaptive_k.h): rows the context-miss token gates off read no block (the logits stay
// the same bits; the blocks read are counted by hand on a case with every score 0), and adaptive
// k keeps per row the fewest best-scored blocks whose left-out weight is at most E (checked with
// the certificate's own arithmetic, beyond/certificate.h, on the kept row and on the row with one
// block fewer).
#include <algorithm>
#include <filesystem>

#include "beyond/adaptive_k.h"
#include "beyond/certificate.h"
#include "beyond/cmt_skip.h"
#include "beyond/session.h"
#include "infer/chunk_attention.h"
#include "landmark/tokens.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "tests/helpers.h"
#include "tests/infer_fixtures.h"

using namespace lm;
using namespace lm::test;
using infer_test::kCmtId;
using infer_test::kLandmarkId;
using infer_test::make_cmt_model;
using infer_test::random_raw;

namespace {

struct Reading {
  Tensor logits;
  int64_t unique = 0, attended = 0, read = 0;
};

Reading read_with(const GPT& model, BeyondConfig c, const std::vector<int32_t>& raw, bool skip) {
  c.cmt_skip = skip;
  BeyondSession s(model, c, kLandmarkId, kCmtId);
  Reading r;
  r.logits = s.feed(raw);
  for (const RetrievalRecord& rec : s.retrieval_log()) r.unique += rec.unique;
  r.attended = s.cmt_skip()->attended;
  r.read = s.blocks_read();
  return r;
}

}  // namespace

TEST_CASE("a gated-off CMT row skips the fetch", "[infer][cmt][trim]") {
  const std::filesystem::path dir = fresh_temp_dir("lm_trim_blocks");
  SECTION("by hand: every score 0, so S(CMT) is 1 / (its top group's size)") {
    // The case of "CMT at inference: the drop rate on a hand-worked case" (tests/test_infer_cmt.cpp):
    // F 5, chunks of 7, 14 raw tokens. Chunk 0 has nothing cached; in chunk 1 block 0 is cached and
    // its 8 queries have S(CMT) 1/4 1/5 1/6 1/6 1/3 1/4 1/5 1/6 in every layer and head. Every
    // score ties, so every row that retrieves takes block 0. So per layer block 0 is read in chunk 1
    // unless every row there is gated off: at cutoffs 0.1, 0.21 and 0.3 some row is above (1/3), at
    // 0.34 and 1 none is. Two layers.
    auto model = make_cmt_model(DType::F64, Device::CPU, true);
    const std::vector<int32_t> raw14 = [] {
      std::vector<int32_t> r = random_raw(15, 16);
      return std::vector<int32_t>(r.begin(), r.begin() + 14);
    }();
    struct Case {
      double cutoff;
      int64_t read;  // blocks read in all (two layers)
    };
    for (Case cs : {Case{0.1, 2}, Case{0.21, 2}, Case{0.3, 2}, Case{0.34, 0}, Case{1.0, 0}}) {
      INFO("cutoff " << cs.cutoff);
      InferConfig c;
      c.chunk_len = 7;
      c.k = 2;
      c.cmt_cutoff = cs.cutoff;
      c.block_dir = dir.string();
      const Reading on = read_with(*model, c, raw14, true), off = read_with(*model, c, raw14, false);
      CHECK(on.attended == cs.read);
      CHECK(on.read == cs.read);     // what the store read from disk
      CHECK(off.attended == 2);      // the paper's way: block 0 in both layers
      CHECK(off.read == 2);
      CHECK(on.unique == off.unique);  // what retrieval chose is reported unchanged
      CHECK(max_abs_diff(on.logits, off.logits) == 0);
    }
  }
  SECTION("random scores: the same bits, fewer blocks read") {
    int64_t saved = 0;
    for (DType dt : {DType::F64, DType::F32})
      for (PositionMode pos : {PositionMode::Exact, PositionMode::Stingy})
        for (double cutoff : {0.1, 0.3}) {
          INFO(dtype_name(dt) << ", " << position_mode_name(pos) << ", cutoff " << cutoff);
          auto model = make_cmt_model(dt);
          const std::vector<int32_t> raw = random_raw(150, 21);
          BeyondConfig c;
          c.chunk_len = 12;
          c.k = 3;
          c.positions = pos;
          c.cmt_cutoff = cutoff;
          c.block_dir = dir.string();
          c.decode_step = false;
          const Reading on = read_with(*model, c, raw, true), off = read_with(*model, c, raw, false);
          CHECK(max_abs_diff(on.logits, off.logits) == 0);  // bit for bit: skipped blocks weighed 0
          CHECK(off.read == off.unique);
          CHECK(on.read == on.attended);
          CHECK(on.attended <= off.attended);
          saved += off.attended - on.attended;
        }
    CHECK(saved > 0);  // some block was read by gated-off rows only, and skipped
  }
  std::filesystem::remove_all(dir);
}

namespace {

// A cache of nb blocks absorbed at exact positions and a chunk of n queries after a tail of 2.
struct TrimCase {
  static constexpr int64_t NH = 2, F = 3, HS = 16, B1 = F + 1, nb = 10, tl = 2, n = 6, L = tl + n;
  RotaryCache rope{HS, 10000.0, DType::F64, Device::CPU};
  LayerCache cache{NH, F, HS, DType::F64, 0, ""};
  std::vector<int32_t> local{kRegular, kRegular, kRegular, kLandmark, kRegular, kRegular, kRegular, kRegular};
  Tensor q, k, v;
  ChunkContext ctx;
  explicit TrimCase(bool cmt) {
    std::vector<int32_t> kinds(static_cast<size_t>(nb * B1), kRegular);
    for (int64_t j = F; j < nb * B1; j += B1) kinds[static_cast<size_t>(j)] = kLandmark;
    REQUIRE(cache.absorb(mul(randn({NH, nb * B1, HS}, DType::F64), 2.0), randn({NH, nb * B1, HS}, DType::F64), kinds,
                         rope, PositionMode::Exact, 0) == nb);
    if (cmt) cache.cmt_key_rot = mul(randn({NH, HS}, DType::F64), 2.0);
    q = mul(randn({NH, n, HS}, DType::F64), 1.5);
    k = mul(randn({NH, L, HS}, DType::F64), 1.5);
    v = randn({NH, L, HS}, DType::F64);
    ctx.F = F;
    ctx.k = 5;
    ctx.positions = PositionMode::Exact;
    ctx.blocks_done = nb;
    ctx.local_kinds = &local;
    ctx.rope = &rope;
  }
  // The certificate's M for each row of `plan` (the Certifier's own arithmetic, certificate.cpp).
  std::vector<double> masses(const RetrievalPlan& plan) const {
    Certifier cert;
    const HookList hooks{&cert};
    ChunkContext c = ctx;
    c.hooks = &hooks;
    attend_plan(cache, c, plan, q, k, v);
    return cert.last.mass;
  }
};

}  // namespace

TEST_CASE("adaptive k keeps the fewest best-scored blocks whose left-out weight is at most E", "[infer][trim]") {
  manual_seed(77);
  int64_t rows_cut = 0, rows_capped = 0;
  for (bool cmt : {false, true})
    for (double cutoff : {0.0, 0.4})
      for (double E : {0.0, 0.01, 0.05, 0.2, 1.0}) {
        if (!cmt && cutoff > 0) continue;
        INFO((cmt ? "CMT, cutoff " : "no CMT ") << cutoff << ", E " << E);
        TrimCase tc(cmt);
        tc.ctx.cmt_cutoff = cutoff;
        const RetrievalPlan full = plan_retrieval(tc.cache, tc.ctx, tc.q);
        RetrievalPlan cut = full;
        const LocalGates g = local_gates(tc.cache, tc.ctx, tc.q, tc.k);
        const std::vector<double> scores = values(retrieval_scores(tc.cache, tc.ctx, tc.q));  // (NH, n, nb)
        const AdaptiveCount count = trim_to_left_out(tc.ctx, scores, g, E, cut);
        // One block fewer in each row that kept any: its lowest-scored kept block out.
        RetrievalPlan fewer = cut;
        for (size_t r = 0; r < fewer.sel.size(); ++r) {
          std::vector<int32_t>& s = fewer.sel[r];
          if (s.empty()) continue;
          auto worst = std::min_element(s.begin(), s.end(), [&](int32_t a, int32_t b) {
            return scores[r * TrimCase::nb + a] < scores[r * TrimCase::nb + b] ||
                   (scores[r * TrimCase::nb + a] == scores[r * TrimCase::nb + b] && a > b);
          });
          s.erase(worst);
          fewer.places[r] = block_places(s, tc.ctx, TrimCase::nb, 0);
        }
        const std::vector<double> M = tc.masses(cut), M_fewer = tc.masses(fewer);
        int64_t kept = 0, capped = 0;
        // 1e-12: M from the two routes (the trim's own sums and the certificate's) in f64.
        for (size_t r = 0; r < cut.sel.size(); ++r) {
          const std::vector<int32_t>& s = cut.sel[r];
          kept += static_cast<int64_t>(s.size());
          // The kept blocks are among the plan's and score at least as high as those it dropped.
          for (int32_t b : s) CHECK(std::binary_search(full.sel[r].begin(), full.sel[r].end(), b));
          for (int32_t b : full.sel[r])
            if (!std::binary_search(s.begin(), s.end(), b))
              for (int32_t a : s) CHECK(scores[r * TrimCase::nb + a] >= scores[r * TrimCase::nb + b]);
          const bool all = s.size() == full.sel[r].size();
          if (all && M[r] > E + 1e-12) {
            ++capped;
          } else {
            CHECK(M[r] <= E + 1e-12);  // enough
          }
          if (!s.empty()) CHECK(M_fewer[r] > E - 1e-12);  // and none to spare
          rows_cut += s.size() < full.sel[r].size();
        }
        CHECK(count.rows == static_cast<int64_t>(cut.sel.size()));
        CHECK(count.blocks == kept);
        CHECK(count.capped == capped);
        rows_capped += capped;
        if (E == 1.0) CHECK(kept == 0);
      }
  CHECK(rows_cut > 0);  // the checks are not all about rows that kept everything
  CHECK(rows_capped > 0);
  BeyondConfig c;
  c.left_out = 0.1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("--left-out needs --positions exact"));
  c.positions = PositionMode::Exact;
  CHECK_NOTHROW(c.validate());
  c.left_out = 1.5;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("--left-out must be at most 1"));
}
