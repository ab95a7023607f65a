// cpu_rows.h: the per-row pieces of a layer's cached attention on the CPU (defined in
// cpu_rows.cpp), shared by the chunk path (retrieval_plan.cpp, chunk_attention_cpu.cpp: a chunk
// of n queries, a parallel loop per step) and the one-token decode step (beyond/decode_step.cpp: one
// query, all steps of all layers in one parallel region). Each piece is the only copy of its
// arithmetic, so both paths give the same bits (tests/test_decode_step.cpp holds them equal).
//   select_head   step 1 for one head: score the head's queries against every cached landmark
//                 key and keep each query's top k (rotate_at_stingy_slot: one of the k newest
//                 landmark keys at its stingy scoring slot);
//   block_places  step 2 for one row: where each chosen block sits (stingy or exact);
//   attend_row    step 3 for one (head, query): the virtual row's scores, its grouped softmax
//                 and the weighted values.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/hooks.h"
#include "infer/layer_cache.h"
#include "infer/retrieval_plan.h"
#include "infer/rotary_cache.h"

namespace lm {

// 1/sqrt(HS) rounded to the element type first: the scale of every score (retrieval and rows).
double score_scale(DType dt, int64_t HS);

// Block b's landmark key for head h (b one of the k newest of nb cached blocks; the cache keeps it
// rotated at slot 0's landmark, position F) rotated on to its stingy scoring slot, slot * (F + 1)
// positions further, into out (HS values): rotate_key_on (layer_cache.h). ctx.rope must already
// cover the stingy slots (retrieval_positions) when threads call this.
template <class Scalar>
void rotate_at_stingy_slot(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int64_t b, int64_t nb,
                           Scalar* out);

// The positions [lo, hi) whose rotary rows retrieval and the retrieved blocks may read in the chunk
// of ctx, nb blocks cached (the chunk's own positions aside): every scoring slot and every place a
// block may be given, with the block's F + 1 positions and its gate's turn. The CPU paths cover
// them before their threads start, so that the threads only read the rows.
//   stingy: slots k - nb + 1 .. k when nb <= k (the slots next to the chunk, which the newest
//           blocks take: stingy_score_slot, stingy_attention_slots), 0 .. k when more are cached.
//           So the span is at most nb (F + 1) positions, whatever k.
//   exact:  [0, blocks_done (F + 1)): the blocks' true places, and row 0 for the gates (the kept
//           landmark key sits at its true place already and turns by 0, gate_turn).
// Empty (lo == hi) when nothing can be retrieved (nb or k is 0).
struct PositionSpan {
  int64_t lo = 0, hi = 0;
};
PositionSpan retrieval_positions(const ChunkContext& ctx, int64_t nb);

// Step 1, token-head granularity, scan search (the cache has no index): the n rotated queries of
// head h (q: n x HS, row-major) against the head's cached landmark keys, the k newest rescored at
// their stingy slots in stingy mode; sel[i] receives query i's chosen cached indices, ascending.
// ctx.rope must already cover the stingy scoring slots (retrieval_positions; the rows it hands out
// are only read).
// Runs on the calling thread.
template <class Scalar>
void select_head(const LayerCache& cache, const ChunkContext& ctx, const Scalar* q, int64_t n, int64_t h,
                 std::vector<int32_t>* sel);

// Step 2 for one row: the place, or first position, of each chosen block (`chosen` ascending
// cached indices of nb cached blocks, the oldest with global index first_gid): its stingy slot
// times F + 1, or its true position in exact mode.
std::vector<int32_t> block_places(const std::vector<int32_t>& chosen, const ChunkContext& ctx, int64_t nb,
                                  int64_t first_gid);

// Per-thread buffers of one virtual row, grown to the longest row seen.
template <class Scalar>
struct RowScratch {
  std::vector<Scalar> s, w;
  std::vector<Scalar> gate, zero_row;  // a retrieved block's gate key (HS); HS zeros (its value row)
  std::vector<int32_t> kind, block_of, block_start;
  std::vector<const Scalar*> vrows;
  void fit(int64_t max_row);
};

// What one (head, query) row of step 3 reads.
template <class Scalar>
struct RowInput {
  const Scalar* q = nullptr;                     // the rotated query (HS)
  const std::vector<int32_t>* chosen = nullptr;  // retrieved cached indices, ascending
  const std::vector<int32_t>* places = nullptr;  // their places, first positions (block_places)
  const Scalar* keys_t = nullptr;                // the head's rotated local keys, transposed: (HS, ld)
  int64_t ld = 0;
  const Scalar* values = nullptr;        // the head's local values, (>= nloc, HS)
  int64_t nloc = 0;                      // local keys the query sees: [tail | chunk up to it]
  const int32_t* local_kinds = nullptr;  // their kinds
  RotaryColumns<Scalar> rot;             // the rotary tables transposed, covering every place in `places`
                                         // and the gates' turns (retrieval_positions)
  int64_t head = 0;
  int64_t row = 0;  // its index in the chunk, r = head * n + query (what the row observers are told)
  // Optional: the chosen blocks' keys already rotated at their places, (HS, F+1) each, the gate
  // last, one pointer per chosen block (rotate_block_keys; the chunk path shares them among the
  // rows that chose the same block at the same place). Null: each block is rotated while it is
  // scored. The scores are the same bits either way.
  const Scalar* const* rotated = nullptr;
};

// Whether a chunk's rows share rotated block keys (attend_cpu): `distinct` (head, block, place)
// triples among `pairs` (row, chosen block) pairs, each copy `copy_bytes`. Only when each copy is
// used twice on average and all of them fit in 32 MiB (a large k can give every row its own places;
// a pass-key prompt's chunk of 200 at k 4 needs about 2 MB).
bool share_rotated_keys(int64_t distinct, int64_t pairs, int64_t copy_bytes);

// The keys of block `b` (cached index) for head h placed at `place`, written to out as
// (HS, F+1): its F regular keys from the store rotated at place .. place + F - 1 (the rotation of
// cpu::rotated_vec_times_rows, nnmath::rotate_pair), then its gate, the landmark key rotated on
// by gate_turn (rotate_key_on), as attend_row computes them when nothing is shared.
template <class Scalar>
void rotate_block_keys(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int32_t b, int64_t place,
                       const RotaryColumns<Scalar>& rot, Scalar* out);

// Step 3 for one row: writes the HS outputs to out and returns the row's length; scratch.w holds
// its weights [CMT | blocks | local keys] afterwards. With a CMT (cache.cmt_key_rot defined),
// *dropped is set when S(CMT) fell below ctx.cmt_cutoff. `observers` (hooks.h), when given, see
// the row's scores before its grouped softmax and its output after (row_scores, row_done).
template <class Scalar>
int64_t attend_row(const LayerCache& cache, const ChunkContext& ctx, const RowInput<Scalar>& in,
                   RowScratch<Scalar>& scratch, Scalar* out, uint8_t* dropped, const HookList* observers = nullptr);

}  // namespace lm
