// passkey.h: the synthetic pass-key task of the paper (Section 4 / Mohtashami & Jaggi's prompt):
// a task line, filler sentences repeated, "The pass key is K. Remember it. K is the pass key.",
// more filler, and the question "What is the pass key? The pass key is". Used two ways: as
// training text (documents with the answer appended, mixed with plain filler) and as evaluation
// prompts of a given length (evals/passkey_eval.h). Keys are uniform in 1..50000.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lm {

class Tokenizer;

extern const char* const kPasskeyTask;  // the paper's task line: "... Find it and memorize them. ..."
// The task line of the training documents: the same but "Find it and memorize it.", the wording
// the training text has had from the start. With the same seed, documents carrying the paper's
// wording gave a demo-sized model that copied the key in 10% of 2048-token prompts instead of
// 100% (docs/results/inference.md#one-word-apart): small models on this task are that sensitive
// to their data, so the training text keeps its wording and the evaluation prompt is the paper's.
extern const char* const kPasskeyTrainingTask;
extern const char* const kPasskeyFiller;    // "The grass is green. The sky is blue. ..."
extern const char* const kPasskeyQuestion;  // "What is the pass key? The pass key is"
std::string passkey_sentence(int32_t key);  // "The pass key is K. Remember it. K is the pass key."

struct PasskeyPrompt {
  std::string text;  // ends with the question (no answer)
  int32_t key = 0;
  int64_t fillers_before = 0, fillers_after = 0;
};

// The prompt with the given filler counts around the key sentence, opening with `task`.
PasskeyPrompt make_passkey_prompt(int32_t key, int64_t fillers_before, int64_t fillers_after,
                                  const char* task = kPasskeyTask);

// A prompt of about `target_tokens` tokens under `tok` (never more), the key sentence at a
// uniformly random filler boundary; key and position drawn from Philox with (seed, trial).
// depth in [0, 1] puts the key at that fraction of the fillers instead (0: first, right after
// the task line; 1: last, right before the question; rounded to the nearest boundary); the key
// is drawn as before, so a depth sweep asks for the same keys at every depth.
PasskeyPrompt passkey_prompt_for_length(const Tokenizer& tok, int64_t target_tokens, uint64_t seed, uint64_t trial,
                                        double depth = -1);

// Training text: `docs` documents separated by newlines, drawn from Philox with `seed`.
struct PasskeyDataOptions {
  int64_t docs = 20000;
  // A fraction `filler_only` of the documents are plain filler paragraphs; the rest are prompts
  // (with kPasskeyTrainingTask) with min_fillers..max_fillers filler sentences in total (uniform;
  // split at random around the key) followed by " K." as the answer.
  int64_t min_fillers = 0, max_fillers = 6;
  double filler_only = 0.1;
  // Draw the fillers *after* the key (how far back the answer must be copied from) uniformly in
  // 0..max_fillers first, then those before it uniformly in what keeps the total within
  // min_fillers..max_fillers. The default split makes far keys rare (with 0..18 fillers, 18 after
  // the key in 0.3% of documents); this makes every distance equally common (5% each).
  bool uniform_distance = false;
  // Each prompt document asks its question `questions` times: after the answer " K." come again
  // fillers (uniform in 0..max_fillers, drawn on a stream of their own), the question and " K.".
  // Every answer is the same key, so copying it from any earlier occurrence is right: more answers
  // per token, none of them contradicted by another key (with `train --doc-starts` and documents
  // longer than a window, a window holds one key). 1 gives the same text as before the option.
  int64_t questions = 1;
  // A fraction `list_docs` of the documents are list documents instead (drawn before the rest,
  // on a stream of their own, so 0 gives the same text as before the option existed):
  //   "The list is N1 N2 ... Nm. <f fillers> What is the list? The list is N1 N2 ... Nm."
  // with m uniform in 1..list_max_items (at most 60), the numbers uniform in 1..50000 like keys,
  // and f uniform in 0..list_max_fillers. Every token of the repeated list is a copy from f
  // fillers back: the pass-key answer's mechanism (find "... is", copy what followed it, token
  // after token), many times per document instead of once.
  double list_docs = 0.0;
  int64_t list_max_items = 8, list_max_fillers = 18;
  uint64_t seed = 1;
};
std::string passkey_training_text(const PasskeyDataOptions& o);
// The same with the options as arguments (no list documents, one question per document).
std::string passkey_training_text(int64_t docs, int64_t max_fillers, double filler_only, uint64_t seed,
                                  int64_t min_fillers = 0, bool uniform_distance = false);
// One list document (without the newline): the first sentence, f fillers, the question and the repeat.
std::string passkey_list_document(const std::vector<int32_t>& numbers, int64_t fillers);

// The digits a model produced after the question ("" when it produced none), read from the
// generated text: leading spaces skipped, then the longest run of digits (our strict scoring:
// the answer must start with the key).
std::string passkey_answer_digits(const std::string& generated);
// The first integer anywhere in the generated text ("" if none): the paper's scoring (Section
// 4.2: "the first integer within the first 100 generated tokens").
std::string passkey_first_integer(const std::string& generated);

// Where the key stands in the prompt's text: the byte ranges [begin, end) of its two
// occurrences in the key sentence ("The pass key is K. Remember it. K is the pass key.").
std::vector<std::pair<size_t, size_t>> passkey_key_spans(const PasskeyPrompt& p);

}  // namespace lm
