// retrieval_plan.cpp: retrieval scores and the retrieval plan (retrieval_plan.h).
#include "infer/retrieval_plan.h"

#include <algorithm>

#include "infer/cpu_rows.h"
#ifdef LANDMARK_WITH_CUDA
#include "infer/cuda/chunk_attention.h"
#endif
#include "infer/session.h"
#include "landmark/retrieval.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"
#include "tensor/dtype.h"
#include "tensor/ops.h"

namespace lm {

namespace {

// The CPU scores of retrieval_scores, into out (NH, n, nb), without a tensor op per step
// (decoding runs this once per layer and token): per head one GEMM against the rotated keys
// where they lie in the cache's buffer (LayerCache::keys_rot_t_buf, leading dimension its
// capacity), then the k newest rescored in place (rotate_pair, as the rotary op; a dot product
// per query); the scale is applied as each score is written.
template <class Scalar>
void cpu_scores(const LayerCache& cache, const ChunkContext& ctx, const Scalar* q, int64_t n, Scalar* out) {
  const int64_t NH = cache.NH, HS = cache.HS, nb = cache.key_count, cap = cache.key_capacity;
  if (nb == 0 || n == 0) return;
  const Scalar* rot_t =
      cache.keys_rot_t_buf.data<Scalar>() + cache.key_begin;  // head h: (HS, nb) at + h * HS * cap, ld cap
  // The scale rides on the GEMM's alpha: each score is rounded once, from the same sum, as
  // scaling afterwards would give, without another pass over the scores.
  const Scalar sc = static_cast<Scalar>(score_scale(cache.dtype, HS));
  // Heads in parallel: a decoded token's product per head (1 x HS by HS x nb) is below the size
  // at which one GEMM splits across threads, so one core scored every head while the other
  // waited (a decode step at 32k tokens, 2 threads: 6% faster by the median of 30 alternated
  // batches, twice, when decoding still scored here; score_and_select below does the same).
  // Inside the loop each GEMM runs on its thread alone, with the same sums.
  cpu::parallel_for(NH, n * nb * HS, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      cpu::gemm_single<Scalar>(false, false, n, nb, HS, static_cast<double>(sc), q + h * n * HS, HS,
                               rot_t + h * HS * cap, cap, 0.0, out + h * n * nb, nb);
  });
  if (ctx.positions == PositionMode::Stingy) {
    std::vector<Scalar> rk(static_cast<size_t>(HS));
    for (int64_t b = std::max<int64_t>(0, nb - ctx.k); b < nb; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        rotate_at_stingy_slot(cache, ctx, h, b, nb, rk.data());
        for (int64_t i = 0; i < n; ++i)
          out[(h * n + i) * nb + b] = cpu::dot_vectors(q + (h * n + i) * HS, rk.data(), HS) * sc;
      }
  }
}

// Scoring and choosing in one pass, token-head granularity on the CPU: what cpu_scores followed by
// select_blocks computes, without the (NH, n, nb) score matrix. Per head (heads in parallel, each
// by select_head, cpu_rows.cpp), the chunk's n queries are scored against kScanPiece landmarks at a time
// into a buffer that stays in the core's L2, and each query's TopKStream takes that piece before
// the next is scored. At a million tokens the matrix was 64 MB per layer and chunk, written by the
// GEMM and read back by the selection from memory; the pieces are scored by the same GEMM calls
// with the same sums (one FMA chain per element, whatever the columns), and the stingy rescoring
// is the same dot product, so every score, and so every choice, is what the two-step path gives.
template <class Scalar>
std::vector<std::vector<int32_t>> score_and_select(const LayerCache& cache, const ChunkContext& ctx, const Scalar* q,
                                                   int64_t n) {
  const int64_t NH = cache.NH, HS = cache.HS, nb = cache.key_count;
  std::vector<std::vector<int32_t>> sel(static_cast<size_t>(NH * n));
  // The stingy slots' rotary rows, covered here so that the threads only read them.
  if (ctx.positions == PositionMode::Stingy) {
    const PositionSpan span = retrieval_positions(ctx, nb);
    ctx.rope->cover(span.lo, span.hi);
  }
  cpu::parallel_for(NH, n * nb * HS, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) select_head<Scalar>(cache, ctx, q + h * n * HS, n, h, sel.data() + h * n);
  });
  return sel;
}

// Whether an attached hook reads every cached block's score (hooks.h).
bool hooks_need_scores(const ChunkContext& ctx) {
  if (ctx.hooks)
    for (const RetrievalHooks* h : *ctx.hooks)
      if (h->needs_scores(ctx)) return true;
  return false;
}

void check_scoring(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const char* who) {
  LM_CHECK(q_rot.dim() == 3 && q_rot.size(0) == cache.NH && q_rot.size(2) == cache.HS &&
               q_rot.device() == cache.device && q_rot.dtype() == cache.dtype,
           who << ": queries " << describe(q_rot) << " do not fit the cache (NH " << cache.NH << ", HS " << cache.HS
               << ", " << device_name(cache.device) << ")");
  LM_CHECK(ctx.rope != nullptr || ctx.positions != PositionMode::Stingy, who << ": stingy scoring needs ctx.rope");
}
}  // namespace

Tensor retrieval_scores(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, bool cpu_loop) {
  check_scoring(cache, ctx, q_rot, "retrieval_scores");
  LM_CHECK(!cache.indexed,
           "retrieval_scores: this cache keeps its landmark keys in an index (KeySearch::Bounded); "
           "make it with indexed = false to score every key");
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), nb = cache.key_count;
  const int64_t F = ctx.F, B1 = F + 1;
  const double scale = score_scale(q_rot.dtype(), HS);
  if (cpu_loop && q_rot.device() == Device::CPU) {
    Tensor scores({NH, n, nb}, q_rot.dtype(), Device::CPU);
    const Tensor q = q_rot.contiguous();
    LM_DISPATCH_FLOAT(q.dtype(), "retrieval_scores",
                      { cpu_scores<scalar_t>(cache, ctx, q.data<scalar_t>(), n, scores.data<scalar_t>()); });
    return scores;
  }
  // Tensor ops, on any device. Every key was rotated at its usual scoring position when it was
  // cached (LayerCache::absorb): one product scores them all. In stingy mode the k newest sit in
  // slots k..1 instead of 0: rescore just those, their keys rotated on from position F.
  Tensor scores = matmul(q_rot, cache.landmark_keys_rot_t());  // (NH, n, HS) x (NH, HS, nb) -> (NH, n, nb)
  if (nb == 0) return scores;
  if (ctx.positions == PositionMode::Stingy) {
    const int64_t recent = std::min(nb, ctx.k);
    std::vector<int32_t> turn;
    for (int64_t b = nb - recent; b < nb; ++b)
      turn.push_back(static_cast<int32_t>(stingy_score_slot(b, nb, ctx.k) * B1));
    const Tensor kept = cache.landmark_keys_rot_t().narrow(2, nb - recent, recent).transpose(1, 2).unsqueeze(0);
    const Tensor recent_rot = rotary(kept, ctx.rope->tables(turn)).squeeze(0);  // (NH, recent, HS)
    scores.narrow(2, nb - recent, recent).copy_(matmul(q_rot, recent_rot, false, true));
  }
  return mul(scores, scale);
}

namespace {

// Step 1 with the landmark key index (token-head granularity on the CPU): per (head, query) the
// newest min(k, nb) blocks are scored at their stingy slots here (in exact mode there is nothing
// to rescore), and the index finds the top k among them and the older blocks, skipping every tile
// of older keys whose bound cannot win (landmark/key_index.h). The same blocks as the scan. With
// ctx.search_tiles (KeySearch::Approx) the index's approximate search instead: that many tiles
// scored per row, the rows whose answer it could not prove exact counted in *budget_cut.
template <class Scalar>
std::vector<std::vector<int32_t>> select_indexed(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot,
                                                 int64_t* keys_scored, int64_t* budget_cut) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), nb = cache.blocks();
  const std::vector<LandmarkKeyIndex<Scalar>>& index = cache.index<Scalar>();
  LM_CHECK(static_cast<int64_t>(index.size()) == NH && index[0].size() == nb,
           "plan_retrieval: an index of " << index.size() << " heads with " << index[0].size() << " keys for " << NH
                                          << " heads and " << nb << " cached blocks");
  const Scalar scale = static_cast<Scalar>(score_scale(cache.dtype, HS));  // as the scan rounds it
  // The newest blocks at their stingy slots, rotated once per chunk: (NH, recent, HS).
  const int64_t recent = ctx.positions == PositionMode::Stingy ? std::min(nb, ctx.k) : 0, count = nb - recent;
  std::vector<Scalar> rk(static_cast<size_t>(NH * recent * HS));
  for (int64_t j = 0; j < recent; ++j)
    for (int64_t h = 0; h < NH; ++h)
      rotate_at_stingy_slot(cache, ctx, h, count + j, nb, rk.data() + (h * recent + j) * HS);
  const Tensor q_c = q_rot.contiguous();
  const Scalar* q = q_c.data<Scalar>();
  std::vector<std::vector<int32_t>> sel(static_cast<size_t>(NH * n));
  // Query qr of head h against the newest blocks, the scan's arithmetic (a dot product, then the
  // scale): the `extra` candidates of either search.
  auto recent_scores = [&](int64_t h, const Scalar* qr, std::vector<std::pair<int32_t, Scalar>>& extra) {
    extra.clear();
    for (int64_t j = 0; j < recent; ++j)
      extra.emplace_back(static_cast<int32_t>(count + j),
                         cpu::dot_vectors(qr, rk.data() + (h * recent + j) * HS, HS) * scale);
  };
  if (ctx.search_tiles > 0) {
    // The approximate search: per head (heads on parallel threads) the chunk's queries at once,
    // the tiles' bounds by GEMM, the search_tiles tiles of highest bound scored.
    std::vector<KeySearchStats> st(static_cast<size_t>(NH));
    cpu::parallel_for(NH, n * (nb / LandmarkKeyIndex<Scalar>::kDefaultTile + 1) * HS * 4, [&](int64_t h0, int64_t h1) {
      std::vector<std::vector<std::pair<int32_t, Scalar>>> extra(static_cast<size_t>(n));
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t i = 0; i < n; ++i) recent_scores(h, q + (h * n + i) * HS, extra[i]);
        index[h].approx_top_k(q + h * n * HS, n, scale, count, ctx.k, ctx.search_tiles, extra.data(),
                              sel.data() + h * n, &st[h]);
      }
    });
    for (const KeySearchStats& s : st) {
      *keys_scored += s.keys_scored;
      *budget_cut += s.budget_stops;
    }
    return sel;
  }
  std::vector<int64_t> scored(static_cast<size_t>(NH * n), 0);
  cpu::parallel_for(NH * n, (nb / LandmarkKeyIndex<Scalar>::kDefaultTile + 1) * HS * 4, [&](int64_t r0, int64_t r1) {
    std::vector<std::pair<int32_t, Scalar>> extra;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r / n;
      const Scalar* qr = q + r * HS;
      recent_scores(h, qr, extra);
      KeySearchStats st;
      sel[r] = index[h].top_k(qr, scale, count, ctx.k, extra, &st);
      scored[r] = st.keys_scored;
    }
  });
  for (int64_t v : scored) *keys_scored += v;
  return sel;
}

// Every cached block scored by the layer's other scoring (hooks.h), (NH, n, nb) into `out`; returns
// the summary rows scored in all.
template <class Scalar>
int64_t other_scores(const LayerCache& cache, const Tensor& q_rot, std::vector<Scalar>& out) {
  LM_CHECK(q_rot.device() == Device::CPU,
           "plan_retrieval: a block scoring other than the landmark keys runs on the CPU");
  LM_CHECK(cache.scoring->blocks() == cache.blocks(),
           "plan_retrieval: " << cache.scoring->blocks() << " block summaries for " << cache.blocks() << " blocks");
  return cache.scoring->score(q_rot.contiguous(), score_scale(cache.dtype, cache.HS), out);
}

// Step 2 of a plan: each chosen block's place (its first position, stingy or exact).
template <class Scalar>
RetrievalPlan finish_plan(RetrievalPlan& plan, const ChunkContext& ctx) {
  const int64_t nb = plan.nb;
  plan.places.resize(plan.sel.size());
  for (size_t r = 0; r < plan.sel.size(); ++r) plan.places[r] = block_places(plan.sel[r], ctx, nb, plan.first_gid);
  return std::move(plan);
}

// Every query scores every cached landmark key and keeps its top k; then each chosen block gets
// its place. On the CPU at token-head granularity the two happen in pieces (score_and_select);
// otherwise the scores are computed on q_rot's device; on CUDA at token-head granularity (k up to
// cuda::kMaxDeviceTopK) the top k are taken there too and only the chosen indices come to the
// host; else the (NH, n, nb) score matrix comes to the host, where the selection runs.
template <class Scalar>
RetrievalPlan plan_for(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1);
  const int64_t nb = cache.store->size();
  RetrievalPlan plan;
  plan.nb = nb;
  plan.first_gid = ctx.blocks_done - nb;
  LM_CHECK(cache.indexed || cache.key_count == nb,
           "plan_retrieval: " << cache.key_count << " landmark keys for " << nb << " cached blocks");

  // --- 1. retrieval: every query takes the top k of its scores against every cached landmark key ---
  plan.sel.resize(static_cast<size_t>(NH * n));
  const bool keep_scores = ctx.trace && ctx.trace->detail, keep_all = hooks_need_scores(ctx);
  // The score of each chosen block (a detailed trace), and of every block (a hook that asks),
  // from the very scores the selection ranked (NH, n, nb).
  auto keep_chosen_scores = [&](const Scalar* scores) {
    if (keep_all) plan.all_scores.assign(scores, scores + NH * n * nb);
    if (!keep_scores) return;
    plan.score.resize(plan.sel.size());
    for (size_t r = 0; r < plan.sel.size(); ++r)
      for (int32_t b : plan.sel[r]) plan.score[r].push_back(static_cast<double>(scores[r * nb + b]));
  };
  LM_CHECK(!(keep_scores && cache.indexed),
           "plan_retrieval: a detailed retrieval trace needs the scan (--search scan); "
           "the bounded search does not score every block it could choose");
  if (nb > 0 && ctx.k > 0 && cache.scoring) {
    // Another way to score the blocks (hooks.h), then the same selection.
    LM_CHECK(!cache.indexed, "plan_retrieval: a block scoring other than the landmark keys scans (--search scan)");
    static thread_local std::vector<Scalar> scores;
    plan.keys_scored = other_scores<Scalar>(cache, q_rot, scores);
    plan.sel = select_blocks<Scalar>(scores.data(), NH, n, nb, ctx.k, ctx.granularity);
    keep_chosen_scores(scores.data());
  } else if (nb > 0 && ctx.k > 0 && cache.indexed) {
    LM_CHECK(ctx.granularity == Granularity::TokenHead,
             "plan_retrieval: the landmark key index serves token-head granularity, not "
                 << granularity_name(ctx.granularity));
    plan.sel = select_indexed<Scalar>(cache, ctx, q_rot, &plan.keys_scored, &plan.budget_cut);
  } else if (nb > 0 && ctx.k > 0 && q_rot.device() == Device::CPU) {
    // The scores go to a buffer this thread keeps between calls: at a million tokens a chunk's
    // scores are tens of MB, and a fresh allocation each time paid for its pages every time.
    check_scoring(cache, ctx, q_rot, "plan_retrieval");
    plan.keys_scored = NH * n * nb;
    if (ctx.granularity == Granularity::TokenHead && !keep_scores && !keep_all) {
      const Tensor q = q_rot.contiguous();
      plan.sel = score_and_select<Scalar>(cache, ctx, q.data<Scalar>(), n);
      return finish_plan<Scalar>(plan, ctx);
    }
    static thread_local std::vector<Scalar> scores;
    if (scores.size() < static_cast<size_t>(NH * n * nb)) scores.resize(static_cast<size_t>(NH * n * nb));
    const Tensor q = q_rot.contiguous();
    cpu_scores<Scalar>(cache, ctx, q.data<Scalar>(), n, scores.data());
    plan.sel = select_blocks<Scalar>(scores.data(), NH, n, nb, ctx.k, ctx.granularity);
    keep_chosen_scores(scores.data());
  } else if (nb > 0 && ctx.k > 0) {
    plan.keys_scored = NH * n * nb;
#ifdef LANDMARK_WITH_CUDA
    // Token-head on the device: the top k are taken there and only they cross to the host.
    const int64_t kk = std::min(ctx.k, nb);
    if (ctx.granularity == Granularity::TokenHead && !keep_scores && !keep_all && kk <= cuda::kMaxDeviceTopK) {
      const Tensor scores = retrieval_scores(cache, ctx, q_rot).contiguous();  // (NH, n, nb) on the device
      const std::vector<int32_t> top = cuda::top_k_rows(scores.view({NH * n, nb}), kk).to_vector<int32_t>();
      for (int64_t r = 0; r < NH * n; ++r) plan.sel[r].assign(top.begin() + r * kk, top.begin() + (r + 1) * kk);
      return finish_plan<Scalar>(plan, ctx);
    }
#endif
    const Tensor scores = retrieval_scores(cache, ctx, q_rot).to(Device::CPU);  // (NH, n, nb)
    plan.sel = select_blocks<Scalar>(scores.data<Scalar>(), NH, n, nb, ctx.k, ctx.granularity);
    keep_chosen_scores(scores.data<Scalar>());
  }
  if (keep_scores && plan.score.empty()) plan.score.resize(plan.sel.size());  // nothing cached: no scores
  return finish_plan<Scalar>(plan, ctx);
}

}  // namespace

RetrievalPlan plan_retrieval(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot) {
  RetrievalPlan plan;
  LM_DISPATCH_FLOAT(q_rot.dtype(), "plan_retrieval", { plan = plan_for<scalar_t>(cache, ctx, q_rot); });
  return plan;
}

std::vector<int32_t> plan_blocks(const RetrievalPlan& plan) {
  std::vector<int32_t> all;
  for (const std::vector<int32_t>& s : plan.sel) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

}  // namespace lm
