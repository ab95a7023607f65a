// landmark_batch.h: training windows for a landmark model, made on the fly from a plain token file
// (no landmark is ever stored). A landmark follows every F regular tokens of the global stream;
// a window starts at a regular token (never at a landmark, so its first block is never empty; see
// docs/landmark.md), optionally behind a context-miss token, with targets = the next regular
// token and no loss at landmark/CMT positions. Positional jumps (Appendix E) and the random
// choice of CMT-controlled landmarks (Appendix D) are drawn from Philox, so (seed, cursor)
// reproduces a batch exactly, like sample_batch.
#pragma once

#include "train/batch.h"
#include "train/token_file.h"

namespace lm {

struct LandmarkDataOptions {
  int64_t every = 50;         // F: regular tokens per block
  int32_t landmark_id = -1;   // the tokenizer's "<|landmark|>" id
  bool context_miss = false;  // prepend a CMT and let it control some landmarks
  int32_t cmt_id = -1;        // the tokenizer's "<|cmt|>" id
  double cmt_prob = 0.5;      // P_CMT: chance that a landmark is CMT-controlled (training)
  int64_t jump_max = 1;       // p_jump: after each landmark the position advances by U{1..p_jump};
                              // 1 = ordinary positions. Applied only when `training`.
};

struct LandmarkBatch {
  Tensor x;          // i32 (B, T) tokens incl. landmarks (and a CMT at t = 0)
  Tensor y;          // i32 (B, T) next regular token, -100 at landmark/CMT positions
  Tensor kinds;      // i32 (B, T) TokenKind per position (landmark/tokens.h)
  Tensor positions;  // i32 (B, T) rotary positions (0, 1, 2, ... plus jumps; the CMT sits at -1)
};

// `starts`: as in sample_batch (document_starts), each below size - T - 2.
LandmarkBatch sample_landmark_batch(const TokenFile& data, int64_t B, int64_t T, const LandmarkDataOptions& opts,
                                    uint64_t seed, uint64_t cursor, bool training,
                                    const std::vector<int64_t>* starts = nullptr);

}  // namespace lm
