// passkey_eval.h: pass-key retrieval accuracy at a given prompt length (the paper's Section 4
// experiment). A landmark model reads the whole prompt through an InferenceSession (cached
// chunks + top-k block retrieval); a baseline sees only its training window (the last
// block_size tokens). Both answer greedily; a trial is correct when the digits match the key.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "infer/config.h"
#include "nn/gpt.h"

namespace lm {

class Tokenizer;

struct PasskeyResult {
  int64_t length = 0;     // requested prompt length (tokens)
  int64_t trials = 0, correct = 0;
  double seconds = 0;
  double accuracy() const { return trials == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(trials); }
};

// `window` <= 0: the landmark path through InferenceSession with `cfg`. window > 0: the model sees
// only the last `window` tokens (the baseline). progress(trial, correct_so_far) after each trial.
PasskeyResult passkey_accuracy(const GPT& model, const Tokenizer& tok, const InferConfig& cfg, int64_t length,
                               int64_t trials, uint64_t seed, int64_t window = 0,
                               const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace lm
