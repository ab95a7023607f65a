// passkey_eval.cpp: passkey_accuracy (passkey_eval.h).
#include "infer/passkey_eval.h"

#include <cctype>
#include <chrono>

#include "infer/generate.h"
#include "infer/session.h"
#include "train/passkey.h"
#include "train/tokenizer.h"

namespace lm {

PasskeyResult passkey_accuracy(const GPT& model, const Tokenizer& tok, const InferConfig& cfg, int64_t length,
                               int64_t trials, uint64_t seed, int64_t window,
                               const std::function<void(int64_t, int64_t)>& progress) {
  LM_CHECK(trials > 0, "passkey: need at least one trial, got " << trials);
  const int32_t landmark = tok.special_id("<|landmark|>");
  PasskeyResult r;
  r.length = length;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < trials; ++t) {
    PasskeyPrompt p = passkey_prompt_for_length(tok, length, seed, static_cast<uint64_t>(t));
    std::vector<int32_t> ids = tok.encode(p.text);
    // The answer is complete at the first non-digit after the leading spaces.
    std::string so_far;
    auto stop = [&](int32_t id) {
      so_far += tok.decode({id});
      return so_far.find_first_not_of(' ') != std::string::npos && !std::isdigit(static_cast<unsigned char>(so_far.back()));
    };
    SampleOptions greedy;
    std::vector<int32_t> out;
    if (window > 0) {
      out = generate_windowed(model, ids, window, 10, greedy, stop, landmark);
    } else {
      InferenceSession s(model, cfg, landmark);
      out = generate(s, ids, 10, greedy, stop);
    }
    r.correct += passkey_answer_digits(tok.decode(out)) == std::to_string(p.key);
    ++r.trials;
    if (progress) progress(t + 1, r.correct);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace lm
