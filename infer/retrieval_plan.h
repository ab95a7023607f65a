// retrieval_plan.h: steps 1 and 2 of a layer's attention for one chunk at inference (Section 3.2):
// which cached blocks every (head, query) retrieves (top k of its landmark scores, at the chosen
// granularity) and where each chosen block sits (stingy or exact positions). The plan is made on
// the host for both devices; the attention over a plan is chunk_attention.h. The pure math
// (top-k, stingy slots) is landmark/retrieval.h.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/config.h"
#include "infer/hooks.h"
#include "infer/layer_cache.h"
#include "tensor/tensor.h"

namespace lm {

struct AttentionCapture;
struct RetrievalTrace;

// What the session tells a layer about the chunk being processed.
struct ChunkContext {
  int64_t F = 50, k = 4;
  Granularity granularity = Granularity::TokenHead;
  PositionMode positions = PositionMode::Stingy;
  int64_t blocks_done = 0;  // blocks completed before this chunk (global index of the next one)
  double rotary_base = 10000.0;
  double cmt_cutoff = 0;     // with a CMT (cache.cmt_key_rot defined): S(CMT) below this gates with 0
  int64_t search_tiles = 0;  // a cache with a key index: score this many tiles per query, those of
                             // highest bound (KeySearch::Approx); 0: the exact bounded search
  const std::vector<int32_t>* local_kinds = nullptr;  // kinds of [tail | chunk]
  int64_t chunk = 0, layer = 0;
  int64_t aug_start = 0;  // global augmented position of the chunk's first token
  AttentionCapture* capture = nullptr;
  RetrievalTrace* trace = nullptr;  // when set, the plan is recorded there
  RotaryCache* rope = nullptr;      // the session's cos/sin rows (positions are decided here, at use)
  // The CPU rows share each chosen block's rotated keys among the chunk's rows that chose it at
  // the same place (attend_cpu, when share_rotated_keys allows); false: every row rotates while it
  // scores, as the decode step does. The same bits either way (tests compare the two).
  bool share_rotated = true;
  // The extensions attached to the session (hooks.h); null or empty: the paper's path alone.
  const HookList* hooks = nullptr;
};

// What retrieval chose for one chunk of one layer. Row r = h * n + i is (head h, query i).
struct RetrievalPlan {
  int64_t nb = 0;                            // blocks cached
  int64_t first_gid = 0;                     // global index of the oldest cached block
  std::vector<std::vector<int32_t>> sel;     // (NH * n) chosen cached indices per row, ascending
  std::vector<std::vector<int32_t>> places;  // (NH * n) place of each chosen block (its first position)
  int64_t keys_scored = 0;                   // landmark keys scored exactly, over all rows (a scan: NH * n * nb)
  int64_t budget_cut = 0;  // rows whose approximate search stopped at its tile budget (ctx.search_tiles)
  // Only when ctx.trace asks for detail (RetrievalTrace::detail): (NH * n) the score each chosen
  // block was ranked by, as sel. Empty otherwise: the scores are not kept for nothing.
  std::vector<std::vector<double>> score;
  // Only when an attached hook asks (RetrievalHooks::needs_scores): every cached block's score,
  // (NH, n, nb) row-major, as the selection ranked them. Empty otherwise.
  std::vector<double> all_scores;
};

// The distinct blocks a plan uses, ascending: what the store must fetch before attending.
std::vector<int32_t> plan_blocks(const RetrievalPlan& plan);

// Retrieval's scores (NH, n, nb), scaled by 1/sqrt(HS): the chunk's rotated queries against every
// cached landmark key, the k newest at their stingy slots in stingy mode. On the CPU a plain loop
// (cpu_loop) does the stingy rescoring and scaling in place; otherwise tensor ops on q's device.
// Both exist so the tests can hold one against the other.
Tensor retrieval_scores(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, bool cpu_loop = true);

// Steps 1 and 2 for the rotated queries q_rot (NH, n, HS) of a chunk (on the cache's device):
// scores on that device, top-k selection and placement on the host. A cache with a landmark key
// index (LayerCache::indexed) is searched with bounds instead (landmark/key_index.h): the same
// blocks, most keys never scored. Block b's place (`places`) is
// its first position: slot * (F + 1) with the stingy slots, (first_gid + b) * (F + 1) in exact
// mode, in the coordinates where the reserved slots (stingy) or the stream (exact) start at 0.
// With ctx.trace->detail the plan also keeps each chosen block's score (scan search only).
RetrievalPlan plan_retrieval(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot);

}  // namespace lm
