// config.h: beyond the paper, the knobs of the extensions that attach to cached inference
// (infer/hooks.h), beside the paper's own (InferConfig, infer/config.h). A BeyondConfig is an
// InferConfig with more fields: what takes an InferConfig takes the paper's part of it.
// BeyondSession (session.h) attaches the extensions they ask for.
#pragma once

#include "beyond/block_scorers.h"
#include "infer/config.h"

namespace lm {

struct BeyondConfig : InferConfig {
  BeyondConfig() = default;
  BeyondConfig(const InferConfig& paper) : InferConfig(paper) {}  // NOLINT: implicit; extensions at their defaults
  bool cmt_skip = true;  // rows whose CMT is below the cutoff read no block (the same logits; cmt_skip.h);
                         // false: the paper's way, retrieve
  double left_out = -1;  // adaptive k: per row the fewest best blocks (at most k) whose left-out weight is
                         // at most this; < 0: off. Exact positions, scan, token-head granularity, CPU;
                         // implies certify (adaptive_k.h)
  bool certify = false;  // each row's left-out weight and certified bound (certificate.h); exact positions,
                         // CPU, no decode step
  // How a cached block is scored for retrieval (block_scorers.h): Landmark (the paper's way) for
  // landmark models; a standard model is read in blocks of its config's landmark_every tokens with
  // one of the training-free scorers (standard_blocks.h). Other than Landmark: the scan, the CPU,
  // no decode step.
  BlockScorer scorer = BlockScorer::Landmark;
  int64_t reps = 4;          // BlockScorer::Reps: representative keys per block
  bool mass_recall = false;  // each row's chosen blocks against the oracle's (mass_recall.h); keeps
                             // every key in fast memory
  bool decode_step = true;   // a one-token chunk through the decode step (decode_step.h) where it fits: the
                             // same bits as the chunk path, faster; false: the chunk path always (tests
                             // and benchmarks compare the two)
  // The paper's checks (InferConfig::validate), then the extensions'.
  void validate() const;
};

}  // namespace lm
