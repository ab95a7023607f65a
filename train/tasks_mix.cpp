// tasks_mix.cpp: the training mixture of the long-context tasks (tasks.h parse_task_mix,
// task_training_text).
#include <cstdlib>

#include "tensor/check.h"
#include "train/tasks_internal.h"

namespace lm {

namespace {
// A whole non-negative integer, or -1.
int64_t whole_number(const std::string& s) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}

void parse_lengths(const std::string& spec, const std::string& range, TaskMix& m) {
  const size_t dash = range.find('-');
  LM_CHECK(dash != std::string::npos, "--mix " << spec << ": the length range '" << range << "' is not MIN-MAX");
  m.min_length = whole_number(range.substr(0, dash));
  m.max_length = whole_number(range.substr(dash + 1));
  LM_CHECK(m.min_length >= 1 && m.max_length >= m.min_length && m.max_length <= (int64_t{1} << 26),
           "--mix " << spec << ": the length range '" << range << "' needs whole numbers 1 <= MIN <= MAX <= 67108864");
}

void parse_entry(const std::string& spec, const std::string& entry, TaskMix& m) {
  const size_t colon = entry.find(':');
  const std::string name = entry.substr(0, colon);
  double w = 1;
  if (colon != std::string::npos) {
    const std::string ws = entry.substr(colon + 1);
    char* end = nullptr;
    w = ws.empty() ? 0 : std::strtod(ws.c_str(), &end);
    LM_CHECK(!ws.empty() && end && *end == 0 && w > 0 && w <= 1e6,
             "--mix " << spec << ": the weight '" << ws << "' of " << name << " must be a number in (0, 1e6]");
  }
  if (name == "all") {
    for (TaskKind t : all_tasks()) m.tasks.push_back(t), m.weights.push_back(w);
    return;
  }
  m.tasks.push_back(parse_task(name, "--mix"));
  m.weights.push_back(w);
}
}  // namespace

TaskMix parse_task_mix(const std::string& spec) {
  TaskMix m;
  const size_t at = spec.find('@');
  const std::string list = spec.substr(0, at);
  if (at != std::string::npos) parse_lengths(spec, spec.substr(at + 1), m);
  LM_CHECK(!list.empty(), "--mix '" << spec << "': no task (e.g. all@64-480 or niah-single:2,vartrack)");
  size_t from = 0;
  for (;;) {
    const size_t comma = list.find(',', from);
    const std::string entry = list.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    LM_CHECK(!entry.empty(), "--mix '" << spec << "': an empty task entry");
    parse_entry(spec, entry, m);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return m;
}

std::string task_training_text(const Tokenizer& tok, const Haystack& hay, const TaskMix& mix, int64_t docs,
                               uint64_t seed) {
  LM_CHECK(!mix.tasks.empty() && mix.tasks.size() == mix.weights.size() && docs > 0,
           "tasks: a training mixture needs tasks and documents");
  double total = 0;
  for (double w : mix.weights) total += w;
  std::string out;
  // The documents' own draws (task, length, depth) on trial numbers far from the prompts' (trial d),
  // so a document and its prompt never share draws by accident.
  for (int64_t doc = 0; doc < docs; ++doc) {
    TaskDraws d(seed, (uint64_t{1} << 40) + static_cast<uint64_t>(doc));
    double pick = d.uniform() * total;
    size_t t = 0;
    while (t + 1 < mix.tasks.size() && pick >= mix.weights[t]) pick -= mix.weights[t++];
    TaskSpec spec;
    spec.task = mix.tasks[t];
    spec.length = d.uniform_int(mix.min_length, mix.max_length);
    spec.depth = d.uniform();
    spec.seed = seed;
    spec.trial = static_cast<uint64_t>(doc);
    const TaskPrompt p = make_task_prompt_raised(tok, hay, spec, true);
    out += p.text + task_answer_text(p.answer) + "\n";
  }
  return out;
}

}  // namespace lm
