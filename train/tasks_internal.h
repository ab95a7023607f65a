// tasks_internal.h: what train/tasks.cpp (the layout) and train/tasks_needles.cpp (each task's
// needles) share; not part of the library's interface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/rng.h"
#include "train/tasks.h"

namespace lm {

// Uniform draws from the project's Philox on a stream of the tasks' own (one per task, so two
// tasks' prompts of one trial share no numbers by accident), 2^20 counters per (seed, trial): the
// same (task, seed, trial) always gives the same sequence.
class TaskDraws {
 public:
  TaskDraws(uint64_t seed, uint64_t trial, uint32_t stream = 0) : seed_(seed), base_(trial << 20), stream_(stream) {}
  double uniform();                             // [0, 1)
  int64_t uniform_int(int64_t lo, int64_t hi);  // lo..hi, both included

 private:
  uint64_t seed_, base_, n_ = 0;
  uint32_t stream_;
};

// One prompt's needles before layout. needed[0] stands at the depth, needed[1..] after it in this
// order; each distractor group (e.g. a chain) stands anywhere, in its order.
struct TaskContent {
  std::vector<std::string> needed;
  std::vector<std::vector<std::string>> distractors;
  std::string question;
  std::vector<std::string> answer;
};
TaskContent draw_task_content(TaskKind task, TaskDraws& d);

// make_task_prompt; raise: a length below the needles' size gives a prompt of the needles and the
// question alone instead of an error (training documents).
TaskPrompt make_task_prompt_raised(const Tokenizer& tok, const Haystack& hay, const TaskSpec& spec, bool raise);

}  // namespace lm
