// passkey.cpp: pass-key prompts and training text (passkey.h).
#include "train/passkey.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tensor/check.h"
#include "tensor/rng.h"
#include "train/tokenizer.h"

namespace lm {

const char* const kPasskeyTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there.";
const char* const kPasskeyTrainingTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there.";
const char* const kPasskeyFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const char* const kPasskeyQuestion = "What is the pass key? The pass key is";

std::string passkey_sentence(int32_t key) {
  const std::string k = std::to_string(key);
  return "The pass key is " + k + ". Remember it. " + k + " is the pass key.";
}

PasskeyPrompt make_passkey_prompt(int32_t key, int64_t before, int64_t after, const char* task) {
  LM_CHECK(before >= 0 && after >= 0, "passkey: filler counts must be >= 0, got " << before << ", " << after);
  PasskeyPrompt p;
  p.key = key;
  p.fillers_before = before;
  p.fillers_after = after;
  p.text = task;
  for (int64_t i = 0; i < before; ++i) p.text += std::string(" ") + kPasskeyFiller;
  p.text += " " + passkey_sentence(key);
  for (int64_t i = 0; i < after; ++i) p.text += std::string(" ") + kPasskeyFiller;
  p.text += std::string(" ") + kPasskeyQuestion;
  return p;
}

namespace {
// Uniform draws from the project RNG (Philox) on a stream of our own, indexed by (seed, trial).
double draw(uint64_t seed, uint64_t counter) {
  return uniform_from<double>(philox::block(counter, static_cast<uint32_t>(RngStream::User) + 7, seed));
}
int32_t draw_key(uint64_t seed, uint64_t counter) { return 1 + static_cast<int32_t>(draw(seed, counter) * 50000.0); }
}  // namespace

PasskeyPrompt passkey_prompt_for_length(const Tokenizer& tok, int64_t target_tokens, uint64_t seed, uint64_t trial,
                                        double depth) {
  LM_CHECK(depth < 0 || depth <= 1, "passkey: the key's depth must be in [0, 1] (or negative: random), got " << depth);
  const int32_t key = draw_key(seed, 2 * trial);
  const int64_t base = static_cast<int64_t>(tok.encode(make_passkey_prompt(key, 0, 0).text).size());
  const int64_t per_filler = static_cast<int64_t>(tok.encode(std::string(" ") + kPasskeyFiller).size());
  LM_CHECK(target_tokens >= base, "passkey: a prompt needs at least " << base << " tokens, asked for " << target_tokens);
  int64_t fillers = (target_tokens - base) / per_filler;
  // Encoding the whole prompt can merge differently at the seams: step back until it fits.
  PasskeyPrompt p;
  for (;; --fillers) {
    const int64_t before = depth < 0 ? static_cast<int64_t>(draw(seed, 2 * trial + 1) * static_cast<double>(fillers + 1))
                                     : std::llround(depth * static_cast<double>(fillers));
    p = make_passkey_prompt(key, before, fillers - before);
    if (fillers == 0 || static_cast<int64_t>(tok.encode(p.text).size()) <= target_tokens) break;
  }
  return p;
}

std::string passkey_training_text(int64_t docs, int64_t max_fillers, double filler_only, uint64_t seed,
                                  int64_t min_fillers, bool uniform_distance) {
  LM_CHECK(docs > 0 && min_fillers >= 0 && max_fillers >= min_fillers && filler_only >= 0 && filler_only <= 1,
           "passkey_training_text: bad arguments docs=" << docs << " min_fillers=" << min_fillers
                                                        << " max_fillers=" << max_fillers
                                                        << " filler_only=" << filler_only);
  std::string out;
  for (int64_t d = 0; d < docs; ++d) {
    const uint64_t c = static_cast<uint64_t>(d) * 4;
    // uniform in lo..hi from the draw with counter k
    auto uniform_int = [&](uint64_t k, int64_t lo, int64_t hi) {
      return lo + static_cast<int64_t>(draw(seed, k) * static_cast<double>(hi - lo + 1));
    };
    const int64_t total = uniform_int(c, min_fillers, max_fillers);
    if (draw(seed, c + 1) < filler_only) {
      for (int64_t i = 0; i <= total; ++i) out += std::string(i ? " " : "") + kPasskeyFiller;
    } else {
      int64_t before = 0, after = 0;
      if (uniform_distance) {
        after = uniform_int(c, 0, max_fillers);
        before = uniform_int(c + 2, std::max<int64_t>(0, min_fillers - after), max_fillers - after);
      } else {
        before = uniform_int(c + 2, 0, total);
        after = total - before;
      }
      const int32_t key = draw_key(seed, c + 3);
      out += make_passkey_prompt(key, before, after, kPasskeyTrainingTask).text + " " + std::to_string(key) + ".";
    }
    out += "\n";
  }
  return out;
}

std::string passkey_answer_digits(const std::string& g) {
  size_t i = 0;
  while (i < g.size() && g[i] == ' ') ++i;
  size_t j = i;
  while (j < g.size() && std::isdigit(static_cast<unsigned char>(g[j]))) ++j;
  return g.substr(i, j - i);
}

std::string passkey_first_integer(const std::string& g) {
  size_t i = 0;
  while (i < g.size() && !std::isdigit(static_cast<unsigned char>(g[i]))) ++i;
  size_t j = i;
  while (j < g.size() && std::isdigit(static_cast<unsigned char>(g[j]))) ++j;
  return g.substr(i, j - i);
}

std::vector<std::pair<size_t, size_t>> passkey_key_spans(const PasskeyPrompt& p) {
  const std::string sentence = passkey_sentence(p.key), key = std::to_string(p.key);
  const size_t at = p.text.find(sentence);
  LM_CHECK(at != std::string::npos, "passkey: the prompt does not hold the key sentence of key " << p.key);
  const size_t first = at + sentence.find(key), second = at + sentence.rfind(key);
  return {{first, first + key.size()}, {second, second + key.size()}};
}

}  // namespace lm
