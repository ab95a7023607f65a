// tokens.h: where landmark tokens go and what the model is asked to predict around them.
// A landmark follows every F regular tokens of the global token stream (regardless of document
// boundaries), so a stream ending on a block edge ends with a landmark. Inserting chunk by chunk
// with a carried phase (LandmarkInserter) gives the same stream as inserting at once. The target
// of a position is the next regular token; landmark (and context-miss) positions carry no loss.
// Not here: the attention that uses them (landmark/attention.h), batching (train/landmark_batch.h).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace lm {

// What a position holds. Kernels read these values, so they are fixed.
enum TokenKind : int32_t {
  kRegular = 0,
  kLandmark = 1,            // gates its block from the top group of later queries
  kControlledLandmark = 2,  // a landmark whose gate is itself gated by the context-miss token
  kContextMiss = 3,         // the context-miss token (CMT, Appendix D), first position only
};

constexpr int32_t kIgnoreIndex = -100;  // target of positions without loss (cross_entropy default)

// Streaming insertion: feed raw tokens in any pieces; a landmark id is emitted after every
// `block_len` regular tokens. phase() = regular tokens since the last landmark, carried across
// calls (and storable, e.g. in an inference cache).
class LandmarkInserter {
 public:
  LandmarkInserter(int64_t block_len, int32_t landmark_id, int64_t phase = 0);
  // Appends the augmented tokens for `raw` to `out` (and their kinds to `kinds` when given).
  void push(const std::vector<int32_t>& raw, std::vector<int32_t>& out, std::vector<int32_t>* kinds = nullptr);
  int64_t phase() const { return phase_; }
  int64_t block_len() const { return block_len_; }

 private:
  int64_t block_len_;
  int32_t landmark_id_;
  int64_t phase_;
};

// One-shot insertion (phase 0 at the start of `raw`).
std::vector<int32_t> insert_landmarks(const std::vector<int32_t>& raw, int64_t block_len, int32_t landmark_id);

// For an augmented sequence and its kinds: the target of each position is the next regular
// token after it (`next_regular` is the first regular token after the sequence, or kIgnoreIndex
// if unknown); landmark and CMT positions get kIgnoreIndex.
std::vector<int32_t> landmark_targets(const std::vector<int32_t>& tokens, const std::vector<int32_t>& kinds,
                                      int32_t next_regular = kIgnoreIndex);

// Keep only the rows of x (B, T, ...) at regular positions of kinds (B, T): the result is
// (B, R, ...) where every batch row must have the same number R of regular positions. Used to
// align logits 1:1 with the raw tokens.
Tensor select_regular(const Tensor& x, const Tensor& kinds);

// The augmented stream as a function of the raw one, without materialising it: augmented index
// a holds raw token (a / (F+1)) * F + a % (F+1) unless a % (F+1) == F, where it holds a landmark.
struct AugmentedIndex {
  int64_t block_len;
  bool is_landmark(int64_t a) const { return a % (block_len + 1) == block_len; }
  int64_t raw_index(int64_t a) const { return (a / (block_len + 1)) * block_len + a % (block_len + 1); }
  int64_t augmented_index(int64_t r) const { return r + r / block_len; }  // of raw token r
};

}  // namespace lm
