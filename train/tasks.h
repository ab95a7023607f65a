// tasks.h: long-context tasks beyond the pass key, in the style of RULER (Hsieh et al., 2024):
// needles hidden in real text (sentences of the project's corpus), a question at the end, and the
// answer after the question's fixed words, as the pass key has it. Six tasks (docs/tasks.md):
//   niah-single      one "The special number for <word> is <number>."; asked: that number
//   niah-multikey    2-8 such lines with different words; asked: one word's number
//   niah-multivalue  one word with 2-4 numbers (and 1-3 other words' lines); asked: all its numbers
//   niah-multiquery  2-8 keyed lines; asked: 2-4 of the words at once
//   vartrack         a chain "VAR ABCDE = 12345." "VAR FGHIJ = VAR ABCDE." ... (and a distractor
//                    chain of another number); asked: every variable equal to the number
//   freqwords        word lists "The words are w1 w2 ...." spread out; asked: the 3 most frequent
// Placement (--depth): the first needle the answer needs stands at that fraction of the haystack
// tokens (at the sentence boundary nearest to it); the other needles the answer needs stand at random
// boundaries between it and the question, in the order the answer lists them; distractors at
// random boundaries anywhere. Everything is drawn from Philox with (seed, trial): a fixed seed
// gives the same bytes. Used as training documents (prompt + answer, one per line) and as
// evaluation prompts of a given length (evals/tasks_eval.h scores them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lm {

class Tokenizer;

enum class TaskKind { NiahSingle, NiahMultikey, NiahMultivalue, NiahMultiquery, Vartrack, Freqwords };
const std::vector<TaskKind>& all_tasks();
const char* task_name(TaskKind t);
// "niah-single", ...; anything else throws lm::Error naming `flag` and the six names.
TaskKind parse_task(const std::string& name, const char* flag = "--task");
// Exact-scored tasks (one number) against recall-scored ones (a set).
bool task_scored_exact(TaskKind t);

// The haystack: sentences of real text, white space collapsed. Sentences with digits, non-ASCII
// bytes or a needle's words ("special number", "VAR ", "The words are") are left out, so every
// needle a parser finds in a prompt was put there by a generator; so are sentences under 12 or over
// 400 bytes. Throws when fewer than 8 sentences remain. Token counts (per tokenizer) are cached.
class Haystack {
 public:
  explicit Haystack(const std::string& text, const std::string& what = "haystack");
  const std::vector<std::string>& sentences() const { return sentences_; }
  // Tokens of " " + sentence i under `tok` (the tokenizer given first is the one cached).
  int64_t tokens(const Tokenizer& tok, size_t i) const;

 private:
  std::vector<std::string> sentences_;
  mutable std::vector<int64_t> tokens_;  // -1: not counted yet
};

struct TaskPrompt {
  TaskKind task = TaskKind::NiahSingle;
  std::string text;                 // ends with the question (no answer)
  std::vector<std::string> answer;  // the gold items, in the order the answer lists them
  int64_t tokens = 0;               // of `text` under the tokenizer it was made for
  int64_t sentences = 0;            // haystack sentences in it
};

// " 12345." or " a b c.": what follows the question in a training document.
std::string task_answer_text(const std::vector<std::string>& answer);

struct TaskSpec {
  TaskKind task = TaskKind::NiahSingle;
  int64_t length = 512;  // tokens of the prompt, at most (as many haystack sentences as fit)
  double depth = 0.5;    // [0, 1]
  uint64_t seed = 1, trial = 0;
};

// A prompt of at most spec.length tokens under `tok`. Throws (naming --length) when the needles
// and the question alone take more; naming --depth when depth is outside [0, 1].
TaskPrompt make_task_prompt(const Tokenizer& tok, const Haystack& hay, const TaskSpec& spec);

// Training text: --mix. Documents drawn from the tasks by weight, each of a length uniform in
// [min_length, max_length] tokens (raised to what its needles need) and a uniform depth,
// followed by its answer; one per line.
struct TaskMix {
  std::vector<TaskKind> tasks;
  std::vector<double> weights;
  int64_t min_length = 64, max_length = 480;
};
// "TASK[:WEIGHT],...[@MIN-MAX]" ("all" = every task, weight 1), e.g. "niah-single:2,vartrack@64-480".
// Throws naming --mix on anything else (an unknown task, a weight <= 0, MIN > MAX, MIN < 1).
TaskMix parse_task_mix(const std::string& spec);
std::string task_training_text(const Tokenizer& tok, const Haystack& hay, const TaskMix& mix, int64_t docs,
                               uint64_t seed);

// The evaluation prompts' file: a header, then one line per prompt:
//   task length depth_pct trial scoring tokens answer prompt
// (scoring: exact or recall; answer: the gold items separated by spaces; no field holds a tab or
// a newline). evals/tasks_eval.h reads it back.
extern const char* const kTaskPromptsHeader;
std::string task_prompt_line(const TaskPrompt& p, int64_t length, double depth_pct, uint64_t trial);

}  // namespace lm
