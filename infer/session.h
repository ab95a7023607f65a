// session.h: cached chunked inference with block retrieval (Section 3.2, DESIGN.md section 4).
// Raw tokens go in, in chunks of chunk_len; landmarks are inserted on the fly with a carried
// phase; every layer attends over [retrieved blocks | unfinished tail | chunk] with the grouped
// softmax, where each query picks the top-k cached blocks by its scores against their landmark
// keys; logits come out aligned 1:1 with the raw tokens. After a chunk, its completed blocks
// enter each layer's cache: un-rotated K/V in slow memory (infer/block_store.h), landmark keys in
// fast memory; the unfinished tail waits for the next chunk. Not here: sampling (generate.h),
// evaluations (eval.h).
#pragma once

#include <memory>
#include <vector>

#include "infer/config.h"
#include "nn/gpt.h"

namespace lm {

// What retrieval did, per chunk and layer (Appendix F's statistic and the attention maps).
struct RetrievalRecord {
  int64_t chunk = 0, layer = 0;
  int64_t cached = 0;          // blocks in the cache when the chunk was processed
  int64_t unique = 0;          // distinct blocks retrieved by any query and head of the chunk
  int64_t queries = 0;         // query positions in the chunk (incl. landmarks)
};

// Optional: the attention of one (layer, head), captured query by query for attention maps.
struct AttentionCapture {
  int64_t layer = 0, head = 0;
  struct Row {
    int64_t query;                        // global position in the augmented stream
    std::vector<int64_t> keys;            // global positions of the keys it attended over
    std::vector<double> weights;          // their final weights
    std::vector<int64_t> retrieved;       // global block indices it retrieved
  };
  std::vector<Row> rows;
};

class InferenceSession {
 public:
  // The model must be a landmark model (config().attention == "landmark") unless cfg.k == 0 and
  // there is no history to retrieve; landmark_id is the tokenizer's "<|landmark|>" id.
  InferenceSession(const GPT& model, const InferConfig& cfg, int32_t landmark_id);
  ~InferenceSession();
  InferenceSession(InferenceSession&&) noexcept;

  // Feeds raw tokens (split into chunks of chunk_len) and returns their logits (n, V), row r
  // predicting the raw token after raw[r].
  Tensor feed(const std::vector<int32_t>& raw);
  // One chunk exactly as given (at most chunk_len raw tokens; generation feeds 1 at a time).
  Tensor feed_chunk(const std::vector<int32_t>& raw);

  int64_t cached_blocks() const;       // blocks currently in each layer's cache
  int64_t tokens_fed() const;          // raw tokens so far
  int64_t augmented_fed() const;       // raw tokens + inserted landmarks so far
  const std::vector<RetrievalRecord>& retrieval_log() const;
  void set_capture(AttentionCapture* capture);  // nullptr stops capturing
  const InferConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The one-shot reference the cache must reproduce: the whole raw sequence with landmarks
// inserted, one landmark-attention forward at true positions 0..N'-1, logits of the regular
// positions (n, V). Memory grows with the square of the length: for tests and short texts.
// `phase`: regular tokens already in the first block (a window cut from a longer text keeps
// the text's landmark grid, as generate_windowed does).
Tensor one_shot_logits(const GPT& model, const std::vector<int32_t>& raw, int32_t landmark_id, int64_t phase = 0);

}  // namespace lm
