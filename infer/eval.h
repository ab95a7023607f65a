// eval.h: perplexity over long texts with cached chunked inference (the paper's Table 1): the
// text is cut into non-overlapping windows of eval_length raw tokens, each window is read by a
// fresh InferenceSession in chunks, and every position but the last predicts the next token.
// Also collects Appendix F's statistic: the number of unique blocks retrieved in the
// penultimate chunk of each window, per layer.
#pragma once

#include <functional>
#include <vector>

#include "infer/config.h"
#include "nn/gpt.h"

namespace lm {

struct PerplexityResult {
  int64_t windows = 0, tokens = 0;  // tokens scored
  double nll = 0;                   // mean negative log-likelihood (nats per token)
  double perplexity() const;
  std::vector<int64_t> unique_blocks;  // per window and layer: penultimate chunk's unique blocks
  int64_t cached_at_penultimate = 0;   // blocks in the cache then (the histogram's upper end)
  double seconds = 0;
};

// `tokens`: the raw text; windows of `eval_length` (the remainder is dropped). max_windows > 0
// stops early. A standard model (no landmarks) is evaluated in one shot per window and needs
// eval_length <= block_size. progress(window_done, windows_total).
PerplexityResult evaluate_perplexity(const GPT& model, const std::vector<int32_t>& tokens, const InferConfig& cfg,
                                     int32_t landmark_id, int64_t eval_length, int64_t max_windows = 0,
                                     const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace lm
