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
  LM_CHECK(target_tokens >= base,
           "passkey: a prompt needs at least " << base << " tokens, asked for " << target_tokens);
  int64_t fillers = (target_tokens - base) / per_filler;
  // Encoding the whole prompt can merge differently at the seams: step back until it fits.
  PasskeyPrompt p;
  for (;; --fillers) {
    const int64_t before = depth < 0
                               ? static_cast<int64_t>(draw(seed, 2 * trial + 1) * static_cast<double>(fillers + 1))
                               : std::llround(depth * static_cast<double>(fillers));
    p = make_passkey_prompt(key, before, fillers - before);
    if (fillers == 0 || static_cast<int64_t>(tok.encode(p.text).size()) <= target_tokens) break;
  }
  return p;
}

std::string passkey_list_document(const std::vector<int32_t>& numbers, int64_t fillers) {
  LM_CHECK(!numbers.empty() && fillers >= 0, "passkey_list_document: needs at least one number and fillers >= 0, got "
                                                 << numbers.size() << ", " << fillers);
  std::string list;
  for (int32_t n : numbers) list += " " + std::to_string(n);
  std::string out = "The list is" + list + ".";
  for (int64_t i = 0; i < fillers; ++i) out += std::string(" ") + kPasskeyFiller;
  return out + " What is the list? The list is" + list + ".";
}

std::string passkey_training_text(const PasskeyDataOptions& o) {
  LM_CHECK(o.docs > 0 && o.min_fillers >= 0 && o.max_fillers >= o.min_fillers && o.filler_only >= 0 &&
               o.filler_only <= 1 && o.list_docs >= 0 && o.list_docs <= 1 && o.list_max_items >= 1 &&
               o.list_max_items <= 60 && o.questions >= 1 && o.questions <= 60 && o.list_max_fillers >= 0,
           "passkey_training_text: bad arguments docs="
               << o.docs << " min_fillers=" << o.min_fillers << " max_fillers=" << o.max_fillers << " filler_only="
               << o.filler_only << " list_docs=" << o.list_docs << " list_max_items=" << o.list_max_items
               << " list_max_fillers=" << o.list_max_fillers << " questions=" << o.questions);
  const uint64_t seed = o.seed;
  // The list documents' draws: a stream of their own (seed offset), 64 counters per document.
  const uint64_t list_seed = seed ^ 0x6C697374ull;      // "list"
  const uint64_t question_seed = seed ^ 0x71756573ull;  // "ques": the fillers before repeated questions
  std::string out;
  for (int64_t d = 0; d < o.docs; ++d) {
    const uint64_t c = static_cast<uint64_t>(d) * 4;
    // uniform in lo..hi from the draw with counter k
    auto uniform_int = [&](uint64_t s, uint64_t k, int64_t lo, int64_t hi) {
      return lo + static_cast<int64_t>(draw(s, k) * static_cast<double>(hi - lo + 1));
    };
    const uint64_t lc = static_cast<uint64_t>(d) * 64;
    if (o.list_docs > 0 && draw(list_seed, lc) < o.list_docs) {
      std::vector<int32_t> numbers(static_cast<size_t>(uniform_int(list_seed, lc + 1, 1, o.list_max_items)));
      for (size_t i = 0; i < numbers.size(); ++i) numbers[i] = draw_key(list_seed, lc + 3 + i);
      out += passkey_list_document(numbers, uniform_int(list_seed, lc + 2, 0, o.list_max_fillers)) + "\n";
      continue;
    }
    const int64_t total = uniform_int(seed, c, o.min_fillers, o.max_fillers);
    if (draw(seed, c + 1) < o.filler_only) {
      for (int64_t i = 0; i <= total; ++i) out += std::string(i ? " " : "") + kPasskeyFiller;
    } else {
      int64_t before = 0, after = 0;
      if (o.uniform_distance) {
        after = uniform_int(seed, c, 0, o.max_fillers);
        before = uniform_int(seed, c + 2, std::max<int64_t>(0, o.min_fillers - after), o.max_fillers - after);
      } else {
        before = uniform_int(seed, c + 2, 0, total);
        after = total - before;
      }
      const int32_t key = draw_key(seed, c + 3);
      const std::string answer = " " + std::to_string(key) + ".";
      out += make_passkey_prompt(key, before, after, kPasskeyTrainingTask).text + answer;
      for (int64_t q = 1; q < o.questions; ++q) {
        const int64_t fillers = uniform_int(question_seed, lc + static_cast<uint64_t>(q), 0, o.max_fillers);
        for (int64_t i = 0; i < fillers; ++i) out += std::string(" ") + kPasskeyFiller;
        out += std::string(" ") + kPasskeyQuestion + answer;
      }
    }
    out += "\n";
  }
  return out;
}

std::string passkey_training_text(int64_t docs, int64_t max_fillers, double filler_only, uint64_t seed,
                                  int64_t min_fillers, bool uniform_distance) {
  PasskeyDataOptions o;
  o.docs = docs;
  o.max_fillers = max_fillers;
  o.min_fillers = min_fillers;
  o.filler_only = filler_only;
  o.uniform_distance = uniform_distance;
  o.seed = seed;
  return passkey_training_text(o);
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
