// reference.h: cached inference with top-k landmark retrieval written from the paper's
// definitions, in f64 plain loops (reference.cpp): the oracle that InferenceSession (session.h)
// and the decode step (beyond/decode_step.h) are tested against. Slow on purpose; for tests.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "infer/config.h"
#include "nn/gpt.h"

namespace lm {
namespace reference {

// One key of a query's row: the key rotated at the position it sits at, its value, and its kind
// (a TokenKind: regular, free landmark, CMT-controlled landmark, or the context-miss token).
struct RowKey {
  std::vector<double> key, value;
  int32_t kind;
};

// x (pairs of features (2i, 2i + 1)) rotated to position `pos`, rotary base `base`.
std::vector<double> rotated(const std::vector<double>& x, int64_t pos, double base);

// The paper's AttWeight for the query that ends `row` (its last entry is the query itself), q its
// rotated query: one weight per key of the row. `cutoff`: S(CMT) below it is set to 0 (Appendix
// D); *dropped, when given, says whether that happened.
std::vector<double> att_weight(const std::vector<RowKey>& row, const std::vector<double>& q, double cutoff,
                               bool* dropped = nullptr);

// What retrieval did in one layer for one chunk.
struct Record {
  int64_t first_gid = 0, cached = 0;      // global index of the oldest cached block; blocks cached
  std::vector<std::vector<int32_t>> sel;  // row h * n + i: the cached blocks (0 = oldest) head h and
                                          // query i retrieved, ascending
  int64_t cmt_rows = 0, cmt_dropped = 0;  // rows with a context-miss token; those below the cutoff
};

class CachedInference {
 public:
  // Reads the model's weights (a landmark model; cmt_id required when it has a context-miss
  // token). Of cfg it uses chunk_len, k, capacity, granularity, positions and cmt_cutoff.
  CachedInference(const GPT& model, const InferConfig& cfg, int32_t landmark_id, int32_t cmt_id = -1);
  ~CachedInference();
  // Raw tokens in chunks of cfg.chunk_len; returns one row of logits per raw token.
  std::vector<std::vector<double>> feed(const std::vector<int32_t>& raw);
  // One chunk exactly as given.
  std::vector<std::vector<double>> feed_chunk(const std::vector<int32_t>& raw);
  const std::vector<Record>& records() const;  // one per (chunk, layer), in order

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reference
}  // namespace lm
