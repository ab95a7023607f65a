// test_chunk_attention.cpp: step 3 of chunk attention, the attention over a retrieval plan: the
// fast rows (attend_plan, chunk_attention.cpp) against their naive twin on random plans, places no
// retrieval would choose among them (attend_by_definition below: each row gathered from the cache
// and weighted by the end-to-end reference's AttWeight, infer/reference.cpp), with and without a
// context-miss token (outputs and where each row's attention went: RowMass), rows sharing rotated
// block keys against rows rotating their own (bit for bit), and the shared layout of a virtual
// row (virtual_row.h) on a hand-worked row. The whole of cached inference against the reference:
// tests/test_reference.cpp.
#include "tests/helpers.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "infer/chunk_attention.h"
#include "infer/cpu_rows.h"
#include "infer/reference.h"
#include "infer/virtual_row.h"
#include "landmark/tokens.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

namespace {
// The naive twin of attend_plan: its answer from the definition, in f64. Per (head, query) its row
// [CMT | each retrieved block's F keys and its landmark at the block's place | tail | chunk up to
// the query], gathered from the cache one key at a time, weighted by reference::att_weight (the
// paper's AttWeight) and summed. Also where each row's attention went and the CMT counts.
Tensor attend_by_definition(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                            const Tensor& q_rot, const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count,
                            RowMass* mass) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const int64_t F = ctx.F, B1 = F + 1;
  const std::vector<double> q = values(q_rot), kl = values(k_rot), vl = values(v_loc);
  const bool has_cmt = cache.cmt_key_rot.defined();
  const std::vector<double> cmt_key = has_cmt ? values(cache.cmt_key_rot) : std::vector<double>();
  const std::vector<double> zero(static_cast<size_t>(HS), 0.0);
  auto at = [&](const std::vector<double>& x, int64_t from) {
    return std::vector<double>(x.begin() + from, x.begin() + from + HS);
  };
  // The store's blocks as f64: K (NH, HS, F) un-rotated, V (NH, F, HS).
  auto block = [&](const void* p) {
    Tensor t({NH * F * HS}, cache.dtype);
    std::memcpy(t.raw_data(), p, static_cast<size_t>(NH * F * HS) * dtype_size(cache.dtype));
    return values(t);
  };
  std::vector<double> out(static_cast<size_t>(NH * n * HS), 0.0);
  if (mass) mass->assign(static_cast<size_t>(NH * n), std::vector<double>());
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = h * n + i;
      std::vector<reference::RowKey> row;
      if (has_cmt) row.push_back({at(cmt_key, h * HS), zero, kContextMiss});
      for (size_t c = 0; c < plan.sel[r].size(); ++c) {
        const int64_t b = plan.sel[r][c], place = plan.places[r][c];
        const std::vector<double> kb = block(cache.store->k(b)), vb = block(cache.store->v(b));
        for (int64_t t = 0; t < F; ++t) {
          std::vector<double> key(static_cast<size_t>(HS));
          for (int64_t d = 0; d < HS; ++d) key[d] = kb[(h * HS + d) * F + t];
          row.push_back({reference::rotated(key, place + t, ctx.rotary_base), at(vb, (h * F + t) * HS), kRegular});
        }
        // The gate: the landmark key as the cache keeps it, rotated at position F in stingy mode
        // and at its true position in exact mode, rotated on to place + F.
        std::vector<double> kept(static_cast<size_t>(HS));
        LM_DISPATCH_FLOAT(cache.dtype, "attend_by_definition", {
          int64_t stride = 0;
          const scalar_t* key = cache.scored_key<scalar_t>(h, b, &stride);
          for (int64_t d = 0; d < HS; ++d) kept[d] = static_cast<double>(key[d * stride]);
        });
        const int64_t scored_at = ctx.positions == PositionMode::Stingy ? F : (plan.first_gid + b) * B1 + F;
        row.push_back({reference::rotated(kept, place + F - scored_at, ctx.rotary_base), zero,
                       has_cmt ? kControlledLandmark : kLandmark});
      }
      for (int64_t j = 0; j <= tl + i; ++j)
        row.push_back({at(kl, (h * L + j) * HS), at(vl, (h * L + j) * HS), (*ctx.local_kinds)[j]});
      bool dropped = false;
      const std::vector<double> w = reference::att_weight(row, at(q, r * HS), has_cmt ? ctx.cmt_cutoff : 0.0, &dropped);
      for (size_t j = 0; j < row.size(); ++j)
        for (int64_t e = 0; e < HS; ++e) out[r * HS + e] += w[j] * row[j].value[e];
      if (mass) {  // [CMT] | retrieved block c's F + 1 keys | tail | chunk up to i
        const int64_t kb = static_cast<int64_t>(plan.sel[r].size()), first = has_cmt ? 1 : 0;
        std::vector<double>& m = (*mass)[static_cast<size_t>(r)];
        m.assign(static_cast<size_t>(kb + 2), 0.0);
        for (int64_t j = first; j < static_cast<int64_t>(row.size()); ++j) {
          const int64_t k = j - first;
          m[static_cast<size_t>(k < kb * B1 ? k / B1 : k - kb * B1 < tl ? kb : kb + 1)] += w[j];
        }
      }
      if (has_cmt && cmt_count) {
        ++cmt_count->rows;
        cmt_count->dropped += dropped;
      }
    }
  return from_vector(out, {NH, n, HS}).to(q_rot.dtype());
}

// What both attention tests below read: a cache of nb blocks from one absorbed sequence
// (landmarks every F + 1), a CMT key when asked, and a chunk: a tail of 2 regular keys, then 6
// queries with a landmark closing the block. The caller seeds the generator first and sets
// ctx.k and ctx.cmt_cutoff.
struct ChunkFixture {
  static constexpr int64_t NH = 2, F = 3, HS = 32, B1 = F + 1, nb = 7, tl = 2, n = 6, L = tl + n;
  RotaryCache rope;
  LayerCache cache;
  std::vector<int32_t> local{kRegular, kRegular, kRegular, kLandmark, kRegular, kRegular, kRegular, kRegular};
  Tensor q, k, v;
  ChunkContext ctx;
  ChunkFixture(DType dt, bool cmt) : rope(HS, 10000.0, dt, Device::CPU), cache(NH, F, HS, dt, 0, "") {
    const int64_t Lc = nb * B1;
    std::vector<int32_t> kinds(static_cast<size_t>(Lc), kRegular);
    for (int64_t j = F; j < Lc; j += B1) kinds[j] = kLandmark;
    REQUIRE(cache.absorb(randn({NH, Lc, HS}, dt), randn({NH, Lc, HS}, dt), kinds, rope, PositionMode::Stingy, 0) == nb);
    if (cmt) cache.cmt_key_rot = randn({NH, HS}, dt);
    q = mul(randn({NH, n, HS}, dt), 1.5);
    k = mul(randn({NH, L, HS}, dt), 1.5);
    v = randn({NH, L, HS}, dt);
    ctx.F = F;
    ctx.blocks_done = nb;
    ctx.local_kinds = &local;
    ctx.rope = &rope;
  }
};
}  // namespace

TEST_CASE("virtual row layout: CMT, controlled retrieved landmarks, free local ones (hand-worked)", "[infer]") {
  // F 2, one retrieved block, local keys [r r L r]: the row is CMT | r r CL | r r L r.
  const int32_t local[] = {kRegular, kRegular, kLandmark, kRegular};
  int32_t kind[8], block_of[8], block_start[9];
  RowLayout L = virtual_row_layout(true, 0.25, 1, 2, local, 4, kind, block_of, block_start);
  const std::vector<int32_t> want_kind{kContextMiss, kRegular, kRegular, kControlledLandmark, kRegular, kRegular, kLandmark, kRegular};
  const std::vector<int32_t> want_block{-1, 0, 0, 0, 1, 1, 1, 2};
  CHECK(std::vector<int32_t>(kind, kind + 8) == want_kind);
  CHECK(std::vector<int32_t>(block_of, block_of + 8) == want_block);
  CHECK(std::vector<int32_t>(block_start, block_start + 3) == std::vector<int32_t>{1, 4, 7});
  CHECK(L.cmt == 0);
  CHECK(L.cmt_cutoff == 0.25);
  // Without a CMT: r r L | r r L r, blocks from 0.
  RowLayout P = virtual_row_layout(false, 0, 1, 2, local, 4, kind, block_of, block_start);
  CHECK(std::vector<int32_t>(kind, kind + 7) ==
        std::vector<int32_t>{kRegular, kRegular, kLandmark, kRegular, kRegular, kLandmark, kRegular});
  CHECK(std::vector<int32_t>(block_start, block_start + 3) == std::vector<int32_t>{0, 3, 6});
  CHECK(P.cmt == -1);
}

TEST_CASE("chunk attention: the fast rows equal the naive twin on random plans", "[infer]") {
  const int64_t NH = ChunkFixture::NH, B1 = ChunkFixture::B1, nb = ChunkFixture::nb, n = ChunkFixture::n;
  for (DType dt : {DType::F64, DType::F32}) {
    for (bool cmt : {false, true}) {
      for (double cutoff : {0.0, 0.2}) {
        if (!cmt && cutoff > 0) continue;
        INFO(dtype_name(dt) << (cmt ? " with CMT, cutoff " : " no CMT ") << cutoff);
        manual_seed(61);
        ChunkFixture fx(dt, cmt);
        const LayerCache& cache = fx.cache;
        const Tensor &q = fx.q, &k = fx.k, &v = fx.v;
        ChunkContext& ctx = fx.ctx;
        ctx.k = 4;
        ctx.cmt_cutoff = cutoff;
        for (int trial = 0; trial < 4; ++trial) {
          // Random plan: each row takes a random subset of at most 4 blocks, ascending, each at a
          // random place (block slots of a stingy layout in even trials, any position in odd ones).
          RetrievalPlan plan;
          plan.nb = nb;
          plan.sel.resize(static_cast<size_t>(NH * n));
          plan.places.resize(plan.sel.size());
          std::vector<double> u = values(rand({NH * n * (nb + 4)}, DType::F64));
          size_t at = 0;
          for (size_t r = 0; r < plan.sel.size(); ++r) {
            for (int32_t b = 0; b < nb; ++b)
              if (u[at++] < 0.4 && plan.sel[r].size() < 4) plan.sel[r].push_back(b);
            for (size_t c = 0; c < plan.sel[r].size(); ++c)
              plan.places[r].push_back(static_cast<int32_t>(trial % 2 == 0 ? static_cast<int64_t>(c) * B1
                                                                         : static_cast<int64_t>(u[at++ % u.size()] * 200)));
          }
          CmtCount fast_count, ref_count;
          RowMass fast_mass, ref_mass;
          const Tensor fast = attend_plan(cache, ctx, plan, q, k, v, &fast_count, &fast_mass);
          const Tensor ref = attend_by_definition(cache, ctx, plan, q, k, v, &ref_count, &ref_mass);
          INFO("trial " << trial);
          // f64: the same sums in other orders; f32: rounding of scores, exps and rotations of
          // size ~10 against the f64 twin.
          CHECK(max_abs_diff(fast, ref) < (dt == DType::F64 ? 1e-12 : 2e-5));
          CHECK(fast_count.rows == (cmt ? NH * n : 0));
          CHECK(fast_count.rows == ref_count.rows);
          if (dt == DType::F64) CHECK(fast_count.dropped == ref_count.dropped);
          // Where each row's attention went (what the explorer shows): the fast rows' weights
          // summed per retrieved block, tail and chunk against the twin's f64 weights, summed by
          // its own walk of the row. Same tolerances as the outputs (weights are at most 1). Rows
          // sum to 1 (every block here has regular tokens) except where the CMT's share has no
          // retrieved block to go to: a row the cutoff dropped, or one that retrieved nothing.
          REQUIRE(fast_mass.size() == static_cast<size_t>(NH * n));
          REQUIRE(ref_mass.size() == fast_mass.size());
          double worst = 0;
          for (size_t r = 0; r < fast_mass.size(); ++r) {
            REQUIRE(fast_mass[r].size() == plan.sel[r].size() + 2);
            REQUIRE(ref_mass[r].size() == fast_mass[r].size());
            double sum = 0;
            for (size_t c = 0; c < fast_mass[r].size(); ++c) {
              worst = std::max(worst, std::fabs(fast_mass[r][c] - ref_mass[r][c]));
              sum += ref_mass[r][c];
            }
            if (!cmt || (cutoff == 0 && !plan.sel[r].empty())) CHECK(std::fabs(sum - 1.0) < 1e-12);
          }
          CHECK(worst < (dt == DType::F64 ? 1e-12 : 2e-5));
        }
      }
    }
  }
}

TEST_CASE("chunk attention: rows sharing rotated block keys give the bits of rotating while scoring", "[infer]") {
  // A chunk's rows that chose the same block at the same place score one rotated copy of its keys
  // (attend_cpu); with ctx.share_rotated off each row rotates while it scores. The products and
  // their order are the same, so the outputs must be equal bit for bit, not merely close.
  CHECK_FALSE(share_rotated_keys(0, 10, 100));               // nothing chosen
  CHECK_FALSE(share_rotated_keys(6, 10, 100));               // copies used less than twice each
  CHECK(share_rotated_keys(5, 10, 100));
  CHECK_FALSE(share_rotated_keys(5, 1000, int64_t(8) << 20));  // 40 MiB of copies: over the 32 MiB
  const int64_t NH = ChunkFixture::NH, HS = ChunkFixture::HS, B1 = ChunkFixture::B1, nb = ChunkFixture::nb,
                n = ChunkFixture::n;
  for (DType dt : {DType::F64, DType::F32}) {
    for (bool cmt : {false, true}) {
      INFO(dtype_name(dt) << (cmt ? " with CMT" : " no CMT"));
      manual_seed(62);
      ChunkFixture fx(dt, cmt);
      const LayerCache& cache = fx.cache;
      const Tensor &q = fx.q, &k = fx.k, &v = fx.v;
      ChunkContext& ctx = fx.ctx;
      ctx.k = 3;
      ctx.cmt_cutoff = cmt ? 0.2 : 0.0;
      for (bool stingy : {true, false}) {
        // Each row takes one of two subsets of 3 blocks (by head and query parity), at stingy slots
        // or at the blocks' true positions: 12 rows, 2 x 3 x 2 distinct (head, block, place).
        RetrievalPlan plan;
        plan.nb = nb;
        const std::vector<std::vector<int32_t>> subsets{{0, 3, 5}, {1, 2, 6}};
        std::set<std::array<int64_t, 3>> distinct;
        int64_t pairs = 0;
        for (int64_t r = 0; r < NH * n; ++r) {
          plan.sel.push_back(subsets[static_cast<size_t>((r / n + r) % 2)]);
          plan.places.emplace_back();
          for (size_t c = 0; c < plan.sel.back().size(); ++c) {
            const int32_t b = plan.sel.back()[c];
            plan.places.back().push_back(static_cast<int32_t>(stingy ? static_cast<int64_t>(c) * B1 : b * B1));
            distinct.insert({r / n, b, plan.places.back().back()});
            ++pairs;
          }
        }
        REQUIRE(share_rotated_keys(static_cast<int64_t>(distinct.size()), pairs, HS * B1 * static_cast<int64_t>(dtype_size(dt))));
        CmtCount shared_count, own_count;
        RowMass shared_mass, own_mass;
        ctx.share_rotated = true;
        release_chunk_scratch();
        const Tensor shared = attend_plan(cache, ctx, plan, q, k, v, &shared_count, &shared_mass);
        // The shared copies stay with this thread for the next chunk until handed back.
        CHECK(chunk_scratch_bytes() >= static_cast<int64_t>(distinct.size()) * HS * B1 * static_cast<int64_t>(dtype_size(dt)));
        release_chunk_scratch();
        CHECK(chunk_scratch_bytes() == 0);
        ctx.share_rotated = false;
        const Tensor own = attend_plan(cache, ctx, plan, q, k, v, &own_count, &own_mass);
        INFO((stingy ? "stingy" : "exact") << " places");
        CHECK(max_abs_diff(shared, own) == 0.0);
        CHECK(shared_mass == own_mass);
        CHECK(shared_count.dropped == own_count.dropped);
        // And both against the definition, with the random-plan test's tolerances.
        const Tensor ref = attend_by_definition(cache, ctx, plan, q, k, v, nullptr, nullptr);
        CHECK(max_abs_diff(shared, ref) < (dt == DType::F64 ? 1e-12 : 2e-5));
      }
    }
  }
}

TEST_CASE("chunk attention: a wrong plan or mismatched inputs are refused", "[infer]") {
  const int64_t NH = 2, F = 3, HS = 8;
  RotaryCache rope(HS, 10000.0, DType::F64, Device::CPU);
  LayerCache cache(NH, F, HS, DType::F64, 0, "");
  std::vector<int32_t> local(4, kRegular);
  ChunkContext ctx;
  ctx.F = F;
  ctx.local_kinds = &local;
  ctx.rope = &rope;
  Tensor q = randn({NH, 4, HS}, DType::F64), k = randn({NH, 4, HS}, DType::F64);
  RetrievalPlan plan;
  plan.sel.resize(3);  // 8 rows expected
  plan.places.resize(3);
  CHECK_THROWS_WITH(attend_plan(cache, ctx, plan, q, k, k), Catch::Contains("a plan for 3 rows, expected 8"));
  plan.sel.resize(8);
  plan.places.resize(8);
  CHECK_THROWS_WITH(attend_plan(cache, ctx, plan, randn({NH, 4, 6}, DType::F64), k, k), Catch::Contains("do not fit"));
  CHECK(attend_plan(cache, ctx, plan, q, k, k).shape() == Shape{NH, 4, HS});
}
