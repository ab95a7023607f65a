// session.h: cached chunked inference with block retrieval (the paper's Section 3.2).
// Raw tokens go in, in chunks of chunk_len; landmarks are inserted on the fly with a carried
// phase; every layer attends over [retrieved blocks | unfinished tail | chunk] with the grouped
// softmax, where each query picks the top-k cached blocks by its scores against their landmark
// keys; logits come out aligned 1:1 with the raw tokens. After a chunk, its completed blocks
// enter each layer's cache: un-rotated K/V in slow memory (infer/block_store.h), landmark keys in
// fast memory; the unfinished tail waits for the next chunk. Not here: sampling (generate.h),
// evaluations (eval.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "infer/config.h"
#include "infer/hooks.h"
#include "nn/gpt.h"

namespace lm {

// What retrieval did, per chunk and layer (the paper's Table 2 and Appendix C statistics, the
// CMT's drop rate of Table 3).
struct RetrievalRecord {
  int64_t chunk = 0, layer = 0;
  int64_t cached = 0;       // blocks in the cache when the chunk was processed
  int64_t unique = 0;       // distinct blocks retrieved by any query and head of the chunk
  int64_t queries = 0;      // query positions in the chunk (incl. landmarks)
  int64_t fetched = 0;      // blocks retrieved, one per member of each distinct set (Table 2)
  int64_t cmt_rows = 0;     // (head, query) rows with a context-miss token
  int64_t cmt_dropped = 0;  // ... whose S(CMT) was below the cutoff (retrieval dropped)
  int64_t keys_scored = 0;  // landmark keys scored exactly (a scan: rows x cached; bounded: fewer)
  int64_t budget_cut = 0;   // --search approx: (head, query) rows whose search ran out of tiles
                            // before it could prove its top k (their blocks may not be the best)
};

// Optional: the attention of one (layer, head), captured query by query for attention maps.
struct AttentionCapture {
  int64_t layer = 0, head = 0;
  struct Row {
    int64_t query;                   // global position in the augmented stream
    std::vector<int64_t> keys;       // global positions of the keys it attended over
    std::vector<double> weights;     // their final weights
    std::vector<int64_t> retrieved;  // global block indices it retrieved
  };
  std::vector<Row> rows;
};

// Optional: every retrieval decision from a given query on, per chunk and layer (to check what
// retrieval found, e.g. the pass-key block: evals/passkey_eval.h; to show it: beyond/explorer.h).
struct RetrievalTrace {
  int64_t from_query = 0;  // record queries at this augmented position and later
  // Also record each chosen block's landmark score and where each row's attention went (the
  // explorer). Needs the scan (KeySearch::Scan: the bounded search does not score every block it
  // could choose) and the CPU rows (the CUDA rows keep their weights on the device).
  bool detail = false;
  struct Step {
    int64_t layer = 0;
    int64_t aug_start = 0;                  // augmented position of the chunk's first query
    int64_t first_gid = 0, cached = 0;      // global index of the oldest cached block; blocks cached
    int64_t n = 0;                          // queries in the chunk
    std::vector<std::vector<int32_t>> sel;  // (NH * n) chosen cached indices, row h * n + i
    // With `detail`, row by row as sel: score[r][c] is the landmark score of chosen block c as
    // retrieval ranked it (q . k / sqrt(HS), the key at its scoring position); mass[r] holds the
    // row's attention weight on each chosen block (its F + 1 keys), then on the tail, then on the
    // chunk up to the query (kb + 2 values, summing to 1 except where a CMT cutoff dropped the
    // row's retrieval).
    std::vector<std::vector<double>> score, mass;
  };
  std::vector<Step> steps;
};

// Another reader behind a session's interface (hooks.h): the session hands each chunk to it and
// reports what it reports. Beyond the paper, a standard model read in blocks by a training-free
// scorer is one (beyond/standard_blocks.h).
class ChunkReader {
 public:
  virtual ~ChunkReader() = default;
  virtual Tensor feed_chunk(const std::vector<int32_t>& raw) = 0;  // (n, V) logits of at most chunk_len tokens
  virtual int64_t cached_blocks() const = 0;
  virtual int64_t tokens_fed() const = 0;
  virtual const std::vector<RetrievalRecord>& retrieval_log() const = 0;
  virtual void set_trace(RetrievalTrace* trace) = 0;
  virtual int64_t summary_bytes_per_block() const = 0;
};

class InferenceSession {
 public:
  // The model must be a landmark model (config().landmark()); landmark_id is the
  // tokenizer's "<|landmark|>" id. A model trained with a context-miss token
  // (config().context_miss) keeps it at inference and needs cmt_id, the "<|cmt|>" id: the CMT sits
  // at position -1 as in training, every landmark of a cached block is CMT-controlled and the
  // landmarks still inside the window are free (Appendix D); cfg.cmt_cutoff applies the cutoff.
  InferenceSession(const GPT& model, const InferConfig& cfg, int32_t landmark_id, int32_t cmt_id = -1);
  // A session whose chunks another reader reads (ChunkReader): feed, read and the counts below go
  // to it; the attention capture, the hooks, the one-token path and the block files do not apply.
  InferenceSession(std::unique_ptr<ChunkReader> reader, const InferConfig& cfg);
  ~InferenceSession();
  InferenceSession(InferenceSession&&) noexcept;

  // Feeds raw tokens (split into chunks of chunk_len) and returns their logits (n, V), row r
  // predicting the raw token after raw[r]. progress(done, total), when given, after each chunk.
  // feed and read end by handing back the chunk path's scratch (release_chunk_scratch,
  // chunk_attention.h) and the calling thread's idle small buffers (host_release_cached,
  // tensor/storage.h); feed_chunk keeps both for the next chunk.
  Tensor feed(const std::vector<int32_t>& raw, const std::function<void(int64_t, int64_t)>& progress = nullptr);
  // The same reading, keeping only the last token's logits (1, V): what a prompt before
  // generation needs. Memory stays flat in the prompt's length (feed keeps n * V logits: 2 GB
  // for a million tokens of a 514-token vocabulary). An empty `raw` is an error.
  Tensor read(const std::vector<int32_t>& raw, const std::function<void(int64_t, int64_t)>& progress = nullptr);
  // One chunk exactly as given (at most chunk_len raw tokens; generation feeds 1 at a time).
  Tensor feed_chunk(const std::vector<int32_t>& raw);

  int64_t cached_blocks() const;  // blocks currently in each layer's cache
  int64_t tokens_fed() const;     // raw tokens so far
  int64_t augmented_fed() const;  // raw tokens + inserted landmarks so far
  const std::vector<RetrievalRecord>& retrieval_log() const;
  // Attaches an extension (hooks.h) for the tokens fed from now on; the session does not own it, and
  // it must outlive the session. A landmark model only.
  void attach(RetrievalHooks* hooks);
  void set_capture(AttentionCapture* capture);  // nullptr stops capturing
  void set_trace(RetrievalTrace* trace);        // nullptr stops tracing
  const InferConfig& config() const;
  // A faster path for each chunk of one regular token from now on (hooks.h; beyond the paper: the
  // decode step, beyond/decode_step.h), not owned; nullptr: the chunk path for every token.
  void set_one_token_path(OneTokenPath* path);
  // Scores each layer's cached blocks by make(layer) instead of by their landmark keys (hooks.h;
  // beyond the paper: the training-free block scorers). A landmark model's session, before it reads.
  void set_block_scoring(const std::function<std::unique_ptr<BlockScoring>(int64_t layer)>& make);
  // Refuses, before it starts, any reading that would take the session past `tokens` raw tokens,
  // with the message "<why> up to <tokens> tokens; this one reaches <n>". 0: no limit.
  void set_token_limit(int64_t tokens, const std::string& why);
  const ChunkReader* reader() const { return other_.get(); }  // the other reader, or null
  int64_t rotary_rows() const;  // positions whose rotary rows are held now (RotaryCache::rows_held)
  int64_t blocks_read() const;  // blocks the layers' stores read from disk (or f16) so far (BlockStore::blocks_read)
  // Beyond the paper: the bytes every layer keeps in fast memory to score one block: the landmark
  // keys (NH HS values a layer), or another scoring's summary (set_block_scoring); keys an
  // extension keeps for itself are not counted.
  int64_t summary_bytes_per_block() const;
  // A session with InferConfig::blocks_on_device: moves every layer's block K/V from GPU memory to
  // host memory, so the tokens fed from now on retrieve blocks the offloaded way (only the
  // retrieved ones are copied to the GPU). The usual use: read a long prompt with the blocks on
  // the GPU (fast), then generate with the GPU's memory free of them. The same bits as a session
  // that offloaded from the start. Without blocks_on_device: nothing to do.
  void move_blocks_to_host();

 private:
  void release_scratch();                         // the end of feed and read
  Tensor chunk(const std::vector<int32_t>& raw);  // feed_chunk of whichever reader this is
  void check_length(size_t more) const;           // the limit of set_token_limit
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<ChunkReader> other_;  // another reader instead (ChunkReader)
  InferConfig cfg_;
  int64_t token_limit_ = 0;  // 0: none
  std::string token_limit_why_;
};

// The context-miss token in a one-shot forward (models trained with --cmt).
struct OneShotCmt {
  int32_t id = -1;        // the "<|cmt|>" id (required for a CMT model)
  int64_t chunk_len = 0;  // > 0: the landmarks a cached reading in chunks of this many raw tokens
                          // would hold as memory are CMT-controlled (see one_shot_logits)
  double cutoff = 0;      // S(CMT) below this gates the controlled blocks with 0
};

// The one-shot reference the cache must reproduce: the whole raw sequence with landmarks
// inserted, one landmark-attention forward at true positions 0..N'-1, logits of the regular
// positions (n, V). Memory grows with the square of the length: for tests and short texts.
// `phase`: regular tokens already in the first block (a window cut from a longer text keeps
// the text's landmark grid, as generate_windowed does).
// For a model with a context-miss token the CMT goes first, at rotary position -1 as in training.
// With cmt.chunk_len > 0 the controlled landmarks are those a session reading chunks of
// chunk_len raw tokens would have cached: for a query in chunk c, the landmarks of chunks before
// c (each chunk's queries get their own layout, one fused forward per chunk); with 0 every
// landmark is free.
Tensor one_shot_logits(const GPT& model, const std::vector<int32_t>& raw, int32_t landmark_id, int64_t phase = 0,
                       const OneShotCmt& cmt = OneShotCmt());

}  // namespace lm
