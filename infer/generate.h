// generate.h: text generation on top of an InferenceSession: greedy, temperature and top-k
// sampling (Philox draws, so a seed reproduces a sample), with landmarks inserted by the session
// as the text grows. Also the plain-window generation a standard model uses (its last T tokens).
#pragma once

#include <functional>
#include <vector>

#include "infer/session.h"
#include "nn/gpt.h"

namespace lm {

struct SampleOptions {
  double temperature = 0;  // 0: greedy (argmax); otherwise softmax(logits / temperature)
  int64_t top_k = 0;       // > 0: sample among the k most likely tokens only
  uint64_t seed = 1;
};

// One token from a row of logits (V). `counter` picks the Philox draw (use the step index).
int32_t sample_token(const Tensor& logits, const SampleOptions& o, uint64_t counter);

// Feeds `prompt`, then samples up to max_new tokens, feeding each back. `stop` (optional) is
// called with each new token and ends generation when it returns true (the token is kept).
std::vector<int32_t> generate(InferenceSession& session, const std::vector<int32_t>& prompt, int64_t max_new,
                              const SampleOptions& o, const std::function<bool(int32_t)>& stop = nullptr);
// The same after the prompt was fed: `logits` are the session's logits of the prompt (n, V).
std::vector<int32_t> generate_from(InferenceSession& session, Tensor logits, int64_t max_new, const SampleOptions& o,
                                   const std::function<bool(int32_t)>& stop = nullptr);

// A standard (or any) model that sees only the last `window` tokens: each step recomputes the
// forward over the window. The baseline of the pass-key evaluation. A landmark model needs
// landmark_id (and cmt_id when it has a context-miss token: the CMT then leads the window, every
// landmark in it free).
std::vector<int32_t> generate_windowed(const GPT& model, const std::vector<int32_t>& prompt, int64_t window,
                                       int64_t max_new, const SampleOptions& o,
                                       const std::function<bool(int32_t)>& stop = nullptr, int32_t landmark_id = -1,
                                       int32_t cmt_id = -1);

}  // namespace lm
