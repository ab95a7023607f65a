// tasks_eval.h: scoring the long-context tasks (train/tasks.h) on a model. The prompts come from
// `landmark tasks-data`'s prompts.tsv; each is answered greedily as the pass key is
// (evals/passkey_eval.h): a landmark model (or a standard model with a training-free block scorer)
// reads the whole prompt through a BeyondSession, cached chunks and top-k retrieval; a standard
// model without a scorer sees only its last `window` tokens. The answer runs to the first '.' or
// newline (at most the gold answer's tokens + 8) and is scored:
//   exact   (niah-single, niah-multikey): 1 when its items are the gold items, else 0
//   recall  (the others): the share of the gold items among its items (each counted once)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "beyond/config.h"
#include "nn/gpt.h"

namespace lm {

class Tokenizer;

struct TaskPromptRow {
  std::string task;
  int64_t length = 0;
  double depth_pct = 0;
  int64_t trial = 0;
  bool exact = true;
  std::vector<std::string> answer;
  std::string prompt;
};

// Reads prompts.tsv (train/tasks.h kTaskPromptsHeader). Throws naming the file and line on a
// missing header, a wrong column count, an unknown task or scoring, a bad number or an empty
// answer or prompt.
std::vector<TaskPromptRow> read_task_prompts(const std::string& path);
std::vector<TaskPromptRow> parse_task_prompts(const std::string& text, const std::string& what);

// A model's answer as items: leading spaces skipped, cut at the first '.' or newline, split at spaces.
std::vector<std::string> task_answer_items(const std::string& generated);
double score_exact(const std::vector<std::string>& gold, const std::string& generated);
double score_recall(const std::vector<std::string>& gold, const std::string& generated);
double score_task_answer(const TaskPromptRow& row, const std::string& generated);

struct TaskAnswer {
  std::string generated;
  double score = 0;
  int64_t prompt_tokens = 0;
  double seconds = 0;
};

// window > 0: the model sees only its last `window` tokens (a standard model in its own window).
TaskAnswer answer_task_prompt(const GPT& model, const Tokenizer& tok, const BeyondConfig& cfg, const TaskPromptRow& row,
                              int64_t window);

// One (task, length, depth) cell: prompts and their mean score.
struct TaskCell {
  std::string task;
  int64_t length = 0;
  double depth_pct = 0;
  int64_t prompts = 0;
  double score_sum = 0;
  double mean() const { return prompts ? score_sum / static_cast<double>(prompts) : 0.0; }
};
// The cells in first-seen order of (task, length, depth).
std::vector<TaskCell> task_cells(const std::vector<TaskPromptRow>& rows, const std::vector<TaskAnswer>& answers);

// The two TSVs, each led by a header; `label` names the model row (e.g. landmark-k4) in every line.
//   per prompt: label task length depth_pct trial scoring score prompt_tokens seconds gold answer
//   per cell:   label task length depth_pct prompts score
std::string task_answers_tsv(const std::string& label, const std::vector<TaskPromptRow>& rows,
                             const std::vector<TaskAnswer>& answers);
std::string task_cells_tsv(const std::string& label, const std::vector<TaskCell>& cells);

// One heat map per task (rows: depths, columns: lengths, colour: mean score 0..1), written to
// prefix + task + ".png"; returns the paths written.
std::vector<std::string> task_heatmaps(const std::vector<TaskCell>& cells, const std::string& prefix,
                                       const std::string& label);

}  // namespace lm
