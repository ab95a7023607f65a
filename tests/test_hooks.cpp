// test_hooks.cpp: the seams of the paper's inference (infer/hooks.h), against answers found another
// way: a hook that asks for the plan's scores gets exactly the scores retrieval_scores computes and
// the blocks the fused scan chooses (nothing scored twice, nothing chosen differently); a hook that
// is attached but changes nothing leaves every logit and record bit for bit, and is called as often
// as the chunk path's steps say (one begin_rows and end_chunk per chunk and layer, one row_scores
// and row_done per (head, query), one absorbed per layer and chunk); a hook that keeps fewer blocks
// is what the rows read and what the record counts.
#include "tests/helpers.h"

#include <atomic>
#include <vector>

#include "beyond/session.h"
#include "infer/chunk_attention.h"
#include "infer/session.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "tests/infer_fixtures.h"

using namespace lm;
using namespace lm::test;
using infer_test::exact_all;
using infer_test::kLandmarkId;
using infer_test::make_model;
using infer_test::random_raw;

namespace {

// Counts every call; asks for the plan's scores; changes nothing, unless `keep_best`: then each row
// keeps only its best-scored block by the plan's scores (ties: the older), as adaptive k keeps
// fewer.
class Probe : public RetrievalHooks {
 public:
  bool needs_scores(const ChunkContext&) const override { return true; }
  bool observes_rows(const ChunkContext&) const override { return true; }
  void keep(const LayerCache&, const ChunkContext& ctx, const Tensor&, const Tensor&, RetrievalPlan& plan) override {
    ++keeps;
    if (plan.nb > 0) {
      scores_seen += static_cast<int64_t>(plan.all_scores.size());
      if (static_cast<int64_t>(plan.all_scores.size()) != static_cast<int64_t>(plan.sel.size()) * plan.nb)
        ++bad_scores;
    }
    if (!keep_best || plan.all_scores.size() != plan.sel.size() * static_cast<size_t>(plan.nb)) return;
    for (size_t r = 0; r < plan.sel.size(); ++r) {
      std::vector<int32_t>& sel = plan.sel[r];
      if (sel.empty()) continue;
      int32_t best = sel[0];
      for (int32_t b : sel)
        if (plan.all_scores[r * plan.nb + b] > plan.all_scores[r * plan.nb + best]) best = b;
      sel.assign(1, best);
      plan.places[r] = block_places(sel, ctx, plan.nb, plan.first_gid);
    }
  }
  void begin_rows(const LayerCache&, const ChunkContext&, int64_t rows) override {
    ++begins;
    rows_begun += rows;
  }
  void row_scores(const LayerCache&, const RowInput<float>&, const RowLayout&, const float*, int64_t,
                  int64_t) override {
    ++row_scores_calls;
  }
  void row_scores(const LayerCache&, const RowInput<double>&, const RowLayout&, const double*, int64_t,
                  int64_t) override {
    ++row_scores_calls;
  }
  void row_done(const LayerCache&, int64_t, int64_t, double, bool, const float*) override { ++row_done_calls; }
  void row_done(const LayerCache&, int64_t, int64_t, double, bool, const double*) override { ++row_done_calls; }
  void end_chunk(const LayerCache&, const ChunkContext&, const RetrievalPlan& plan, const RetrievalPlan&) override {
    ++ends;
    for (const auto& s : plan.sel) blocks_kept += static_cast<int64_t>(s.size());
  }
  void absorbed(const LayerCache&, const ChunkContext&, const Tensor&, const Tensor&,
                const std::vector<int32_t>&) override {
    ++absorbs;
  }
  bool keep_best = false;
  int64_t keeps = 0, begins = 0, rows_begun = 0, ends = 0, absorbs = 0, scores_seen = 0, bad_scores = 0,
          blocks_kept = 0;
  std::atomic<int64_t> row_scores_calls{0}, row_done_calls{0};  // the rows call from parallel threads
};

}  // namespace

TEST_CASE("a hook that asks for the plan's scores gets retrieval_scores' own, and the fused scan's blocks",
          "[infer][hooks]") {
  manual_seed(91);
  for (DType dt : {DType::F64, DType::F32})
    for (PositionMode pos : {PositionMode::Exact, PositionMode::Stingy}) {
      INFO(dtype_name(dt) << ", " << position_mode_name(pos));
      constexpr int64_t NH = 2, F = 3, HS = 16, B1 = F + 1, nb = 9, n = 5;
      RotaryCache rope{HS, 10000.0, dt, Device::CPU};
      LayerCache cache{NH, F, HS, dt, 0, ""};
      std::vector<int32_t> kinds(static_cast<size_t>(nb * B1), kRegular);
      for (int64_t j = F; j < nb * B1; j += B1) kinds[static_cast<size_t>(j)] = kLandmark;
      REQUIRE(cache.absorb(randn({NH, nb * B1, HS}, dt), randn({NH, nb * B1, HS}, dt), kinds, rope, pos, 0) == nb);
      const std::vector<int32_t> local(static_cast<size_t>(n), kRegular);
      ChunkContext ctx;
      ctx.F = F;
      ctx.k = 3;
      ctx.positions = pos;
      ctx.blocks_done = nb;
      ctx.local_kinds = &local;
      ctx.rope = &rope;
      const Tensor q = mul(randn({NH, n, HS}, dt), 2.0);
      const RetrievalPlan fused = plan_retrieval(cache, ctx, q);  // no hook: scored and chosen in pieces
      Probe probe;
      const HookList hooks{&probe};
      ChunkContext asked = ctx;
      asked.hooks = &hooks;
      const RetrievalPlan plan = plan_retrieval(cache, asked, q);
      // The independent answer: the two-step scores of retrieval_scores, element by element, bit for bit.
      const std::vector<double> want = values(retrieval_scores(cache, ctx, q));
      REQUIRE(plan.all_scores.size() == want.size());
      for (size_t e = 0; e < want.size(); ++e) CHECK(plan.all_scores[e] == want[e]);
      CHECK(plan.sel == fused.sel);
      CHECK(plan.places == fused.places);
      CHECK(fused.all_scores.empty());  // kept only when a hook asks
    }
}

TEST_CASE("an attached hook that changes nothing changes no bit, and is called once per step", "[infer][hooks]") {
  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    auto model = make_model(dt);
    const std::vector<int32_t> raw = random_raw(90, 12);
    InferConfig cfg = exact_all(20);
    cfg.k = 2;
    InferenceSession plain(*model, cfg, kLandmarkId);
    const Tensor want = plain.feed(raw);
    Probe probe;
    InferenceSession hooked(*model, cfg, kLandmarkId);
    hooked.attach(&probe);
    const Tensor got = hooked.feed(raw);
    CHECK(max_abs_diff(got, want) == 0.0);
    REQUIRE(hooked.retrieval_log().size() == plain.retrieval_log().size());
    for (size_t i = 0; i < plain.retrieval_log().size(); ++i) {
      CHECK(hooked.retrieval_log()[i].unique == plain.retrieval_log()[i].unique);
      CHECK(hooked.retrieval_log()[i].fetched == plain.retrieval_log()[i].fetched);
    }
    // 90 raw tokens in chunks of 20: 5 chunks; with a landmark every F = 5 raw tokens (the
    // fixture's model) they hold 90 + 18 = 108 queries in all; 2 layers, 2 heads.
    const int64_t layers = model->config().n_layer, heads = model->config().n_head, chunks = 5;
    REQUIRE(model->config().landmark_every == 5);
    const int64_t queries = 90 + 18;
    CHECK(probe.keeps == chunks * layers);
    CHECK(probe.begins == chunks * layers);
    CHECK(probe.ends == chunks * layers);
    CHECK(probe.absorbs == chunks * layers);
    CHECK(probe.rows_begun == queries * layers * heads);
    CHECK(probe.row_scores_calls == queries * layers * heads);
    CHECK(probe.row_done_calls == queries * layers * heads);
    CHECK(probe.scores_seen > 0);
    CHECK(probe.bad_scores == 0);
  }
}

TEST_CASE("a hook that keeps fewer blocks is what the rows read and the record counts", "[infer][hooks]") {
  auto model = make_model(DType::F64);
  const std::vector<int32_t> raw = random_raw(90, 13);
  InferConfig cfg = exact_all(20);
  cfg.k = 3;
  // The independent answer: the same session at k 1. The best of a row's top 3 is its top 1, placed
  // at its true position either way, so the rows read the same block with the same arithmetic.
  InferConfig one = cfg;
  one.k = 1;
  InferenceSession k1(*model, one, kLandmarkId);
  const Tensor want = k1.feed(raw);
  Probe best;
  best.keep_best = true;
  InferenceSession cut(*model, cfg, kLandmarkId);
  cut.attach(&best);
  CHECK(max_abs_diff(cut.feed(raw), want) == 0.0);
  REQUIRE(cut.retrieval_log().size() == k1.retrieval_log().size());
  int64_t fetched = 0;
  for (size_t i = 0; i < k1.retrieval_log().size(); ++i) {
    CHECK(cut.retrieval_log()[i].fetched == k1.retrieval_log()[i].fetched);  // the record counts what is kept
    CHECK(cut.retrieval_log()[i].unique == k1.retrieval_log()[i].unique);
    fetched += k1.retrieval_log()[i].fetched;
  }
  CHECK(fetched > 0);
  CHECK(best.blocks_kept == fetched);  // end_chunk sees the plan that was kept
}
