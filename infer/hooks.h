// hooks.h: where an idea beyond the paper attaches to cached inference. The paper's path
// (retrieval_plan.h, chunk_attention.h, cpu_rows.h, session.h) calls these virtual functions and
// names no extension: an extension (beyond/) derives from one of the classes below, overrides what
// it needs, keeps and reports its own records, and is handed to a session. With nothing attached,
// every call site is one test of an empty list or a null pointer.
//   RetrievalHooks (InferenceSession::attach), at three points of the chunk path:
//     1. which chosen blocks are kept, and which are read: between the plan and the fetch
//        (needs_scores, keep, read_fewer);
//     2. observers of the rows: each (head, query) row's scores before its grouped softmax and its
//        output after (observes_rows, begin_rows, row_scores, row_done, end_chunk);
//     3. the cache: a layer's finished blocks as they are absorbed (absorbed).
//   BlockScoring (InferenceSession::set_block_scoring): how a layer's cached blocks are scored for
//     retrieval, when not by their landmark keys (the paper's way).
//   OneTokenPath (InferenceSession::set_one_token_path): another way through every layer for a
//     chunk of one token, bit for bit the chunk path's.
//   ChunkReader (session.h): another reader behind the session's interface.
// Which extension uses which: docs/design.md, section 9.
#pragma once

#include <cstdint>
#include <vector>

namespace lm {

class GPT;
class RotaryCache;
class Tensor;
struct LayerCache;
struct RetrievalRecord;
struct ChunkContext;
struct RetrievalPlan;
struct RowLayout;
template <class Scalar>
struct RowInput;

class RetrievalHooks {
 public:
  virtual ~RetrievalHooks() = default;

  // False when the hook may be left out of a one-token path (OneTokenPath below), which calls no
  // hook: a hook that only saves reads. True (the default): a session with this hook attached
  // reads every token through the chunk path, whose every step calls the hooks.
  virtual bool needs_chunk_path() const { return true; }

  // ---- 1. which chosen blocks are kept, and which are read ----
  // Whether keep() reads every cached block's score: the plan then keeps them
  // (RetrievalPlan::all_scores), from the very scores it ranked, so nothing is scored twice.
  virtual bool needs_scores(const ChunkContext&) const { return false; }
  // May cut rows of `plan` (a row stays ascending, with its places from block_places): the blocks
  // retrieval keeps. The retrieval record and the trace count what is kept.
  virtual void keep(const LayerCache&, const ChunkContext&, const Tensor& /*q_rot*/, const Tensor& /*k_rot*/,
                    RetrievalPlan& /*plan*/) {}
  // May write to `read` a plan with fewer blocks whose rows give the same output, and return true;
  // the store then fetches and the rows attend `read`, while the record and the trace keep `plan`.
  virtual bool read_fewer(const LayerCache&, const ChunkContext&, const Tensor& /*q_rot*/, const Tensor& /*k_rot*/,
                          const RetrievalPlan& /*plan*/, RetrievalPlan& /*read*/) {
    return false;
  }

  // ---- 2. observers of the rows (the CPU rows; the CUDA rows keep their weights on the device) ----
  virtual bool observes_rows(const ChunkContext&) const { return false; }
  // Before the chunk's rows: `rows` (head, query) rows, row r = h * n + i.
  virtual void begin_rows(const LayerCache&, const ChunkContext&, int64_t /*rows*/) {}
  // Row r, from the rows' parallel loop (touch row r's own state only): its scaled scores s
  // [CMT | retrieved blocks | local keys] (len entries) before the grouped softmax, and their layout.
  virtual void row_scores(const LayerCache&, const RowInput<float>&, const RowLayout&, const float* /*s*/,
                          int64_t /*len*/, int64_t /*r*/) {}
  virtual void row_scores(const LayerCache&, const RowInput<double>&, const RowLayout&, const double* /*s*/,
                          int64_t /*len*/, int64_t /*r*/) {}
  // Row r of head h after its grouped softmax: with a context-miss token its share P'(CMT) and
  // whether the cutoff dropped the row's retrieval (p_cmt = 1, cut false without one); y its output
  // (HS values).
  virtual void row_done(const LayerCache&, int64_t /*r*/, int64_t /*h*/, double /*p_cmt*/, bool /*cut*/,
                        const float* /*y*/) {}
  virtual void row_done(const LayerCache&, int64_t /*r*/, int64_t /*h*/, double /*p_cmt*/, bool /*cut*/,
                        const double* /*y*/) {}
  // After the chunk's rows of one layer: the plan retrieval kept (after keep) and the plan that was
  // read (after read_fewer; the same plan when no hook read fewer).
  virtual void end_chunk(const LayerCache&, const ChunkContext&, const RetrievalPlan& /*plan*/,
                         const RetrievalPlan& /*read*/) {}

  // ---- 3. the cache ----
  // Layer ctx.layer has absorbed the finished blocks of its local sequence [tail | chunk]: k_loc and
  // v_loc (NH, L, HS) its un-rotated keys and values, kinds their kinds (the finished blocks end at
  // the last landmark; the first of them gets global index ctx.blocks_done).
  virtual void absorbed(const LayerCache&, const ChunkContext& /*ctx*/, const Tensor& /*k_loc*/,
                        const Tensor& /*v_loc*/, const std::vector<int32_t>& /*kinds*/) {}
};

// The hooks attached to a session, in the order they were attached.
using HookList = std::vector<RetrievalHooks*>;

// How one layer's cached blocks are scored for retrieval instead of by their landmark keys: a
// summary of each block kept beside the cache, in step with it (the plan scores every cached block
// by it, then takes the top k at the granularity asked for, as it does with landmark keys).
class BlockScoring {
 public:
  virtual ~BlockScoring() = default;
  // Whether a block's summary needs its queries too (the layer then keeps its tail's queries,
  // LayerCache::tail_q).
  virtual bool needs_queries() const { return false; }
  // A finished block: the F tokens from local index `begin` of the layer's un-rotated keys k_loc
  // (NH, L, HS) (and queries q_loc, when needs_queries), to be seen at positions pos0 .. pos0 + F - 1.
  virtual void add_block(const Tensor& k_loc, const Tensor* q_loc, int64_t begin, int64_t pos0, RotaryCache& rope) = 0;
  virtual void keep_newest(int64_t held) = 0;  // as the cache keeps its newest `held` blocks
  virtual int64_t blocks() const = 0;
  // Every cached block's score for the rotated queries q_rot (NH, n, HS) on the host, each times
  // `scale`, into out (NH, n, nb); returns the summary rows scored in all.
  virtual int64_t score(const Tensor& q_rot, double scale, std::vector<float>& out) const = 0;
  virtual int64_t score(const Tensor& q_rot, double scale, std::vector<double>& out) const = 0;
  virtual int64_t bytes_per_block() const = 0;  // what one block's summary takes in fast memory
};

// A path for a chunk of one regular token through every layer (a generated token), which must give
// the chunk path's logits and records bit for bit. The session asks `fits` for each such chunk and
// takes the chunk path when it says no, or when an attached hook needs_chunk_path.
class OneTokenPath {
 public:
  virtual ~OneTokenPath() = default;
  virtual bool fits(const GPT& model, const std::vector<LayerCache>& layers, const ChunkContext& ctx) const = 0;
  // The token's logits (1, V); appends one RetrievalRecord per layer to `log` and the token's key
  // and value to every layer's tail. positions: the local positions [tail | token].
  virtual Tensor step(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx, int32_t token,
                      const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log) = 0;
};

}  // namespace lm
