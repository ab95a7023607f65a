// cmd_tasks.cpp: `landmark tasks-data` (the long-context tasks' training text and evaluation
// prompts, train/tasks.h) and `landmark tasks-eval` (a model's answers scored, evals/tasks_eval.h).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "apps/commands.h"
#include "apps/eval_flags.h"
#include "apps/infer_flags.h"
#include "beyond/block_scorers.h"
#include "evals/tasks_eval.h"
#include "infer/model_io.h"
#include "tensor/check.h"
#include "tensor/files.h"
#include "train/tasks.h"
#include "train/tokenizer.h"

namespace lm {
namespace app {

namespace {

struct TasksDataFlags {
  std::string out, haystack = "data/corpus/train.txt", tokenizer, mix;
  std::vector<std::string> tasks{"all"};
  std::vector<int64_t> lengths{512};
  std::vector<double> depths{50};
  int64_t prompts = 10, docs = 2000;
  uint64_t seed = 1;
  CLI::Option* mix_opt = nullptr;
};

std::vector<TaskKind> chosen_tasks(const std::vector<std::string>& names) {
  std::vector<TaskKind> out;
  for (const std::string& n : names) {
    if (n == "all") {
      out.insert(out.end(), all_tasks().begin(), all_tasks().end());
      continue;
    }
    out.push_back(parse_task(n, "--task"));
  }
  LM_CHECK(!out.empty(), "--task: no task given");
  return out;
}

// The files to write, as (path, text, what to say): everything is made before anything is written,
// so a refused prompt leaves no training text behind.
using Outputs = std::vector<std::tuple<std::string, std::string, std::string>>;

void make_training(const TasksDataFlags& f, const Tokenizer& tok, const Haystack& hay,
                   const std::vector<TaskKind>& tasks, Outputs& out) {
  TaskMix mix;
  if (!f.mix.empty()) {
    mix = parse_task_mix(f.mix);
  } else {
    mix.tasks = tasks;
    mix.weights.assign(tasks.size(), 1.0);
  }
  for (const auto& [name, docs, seed] :
       {std::make_tuple(std::string("train.txt"), f.docs, f.seed),
        std::make_tuple(std::string("val.txt"), std::max<int64_t>(f.docs / 20, 50), f.seed + 1)}) {
    std::string text = task_training_text(tok, hay, mix, docs, seed);
    const std::string note = std::to_string(docs) + " documents, " + std::to_string(text.size()) + " bytes";
    out.emplace_back(f.out + "/" + name, std::move(text), note);
  }
}

void make_prompts(const TasksDataFlags& f, const Tokenizer& tok, const Haystack& hay,
                  const std::vector<TaskKind>& tasks, Outputs& out) {
  std::string text = std::string(kTaskPromptsHeader) + "\n";
  int64_t n = 0;
  for (TaskKind task : tasks)
    for (int64_t length : f.lengths)
      for (double depth : f.depths)
        for (int64_t t = 0; t < f.prompts; ++t, ++n) {
          TaskSpec s{task, length, depth / 100.0, f.seed + 2, static_cast<uint64_t>(t)};
          text += task_prompt_line(make_task_prompt(tok, hay, s), length, depth, s.trial);
        }
  const std::string note = std::to_string(n) + " prompts, " + std::to_string(text.size()) + " bytes";
  out.emplace_back(f.out + "/prompts.tsv", std::move(text), note);
}

// Refuses, before building them, texts that cannot fit in memory: about one byte per token of the
// byte-level tokenizer, at most 8 for another (a BPE's token is rarely longer).
void check_size(const TasksDataFlags& f, const Tokenizer& tok) {
  const double per_token = tok.kind() == "bytes" ? 1.0 : 8.0;
  const int64_t max_doc = f.mix.empty() ? TaskMix{}.max_length : parse_task_mix(f.mix).max_length;
  double prompt_tokens = 0;
  for (int64_t l : f.lengths) prompt_tokens += static_cast<double>(l);
  prompt_tokens *= static_cast<double>(f.depths.size() * f.tasks.size()) * static_cast<double>(f.prompts) *
                   (f.tasks.size() == 1 && f.tasks[0] == "all" ? 6.0 : 1.0);
  const double gb =
      per_token * (static_cast<double>(f.docs) * 1.05 * static_cast<double>(max_doc) + prompt_tokens) / 1e9;
  LM_CHECK(gb < 8.0, "tasks-data: --docs " << f.docs << " with --mix " << (f.mix.empty() ? "(default)" : f.mix)
                                           << ", and --prompts " << f.prompts
                                           << " over --length and --depth, make about " << gb
                                           << " GB of text; lower --docs, --prompts or the lengths (at most 8 GB)");
}

int run_tasks_data(const TasksDataFlags& f) {
  const std::vector<TaskKind> tasks = chosen_tasks(f.tasks);
  LM_CHECK(f.docs > 0 || f.prompts > 0, "--docs and --prompts are both 0: nothing to write");
  std::unique_ptr<Tokenizer> tok =
      f.tokenizer.empty() ? std::make_unique<ByteTokenizer>() : load_tokenizer(f.tokenizer);
  LM_CHECK(std::filesystem::is_regular_file(f.haystack),
           "--haystack " << f.haystack
                         << ": no such file. The corpus comes from scripts/get-corpus.sh (data/corpus/train.txt); "
                            "offline, the bundled sample tests/data/persuasion_opening.txt serves");
  const Haystack hay(read_text_file(f.haystack, "tasks-data --haystack"), "--haystack " + f.haystack);
  LM_CHECK(f.mix_opt == nullptr || f.mix_opt->count() == 0 || !f.mix.empty(), "--mix: an empty mixture");
  if (!f.mix.empty()) (void)parse_task_mix(f.mix);  // refused before anything is written
  check_size(f, *tok);
  Outputs out;
  if (f.docs > 0) make_training(f, *tok, hay, tasks, out);
  if (f.prompts > 0) make_prompts(f, *tok, hay, tasks, out);
  std::filesystem::create_directories(f.out);
  for (const auto& [path, text, note] : out) {
    write_file_atomic(path, text, "tasks-data");
    std::cout << "wrote " << path << " (" << note << ")\n";
  }
  return 0;
}

struct TasksEvalFlags {
  std::string ckpt, prompts, answers, cells, heatmaps, label;
  InferFlags infer;
};

std::string default_label(const GPTConfig& mc, const BeyondConfig& cfg, const std::string& scorer, bool window) {
  if (window) return "standard-window";
  const std::string k = "-k" + std::to_string(cfg.k);
  return mc.landmark() ? (scorer == "landmark" ? "landmark" + k : "landmark-" + scorer + k) : "standard-" + scorer + k;
}

int run_tasks_eval(TasksEvalFlags& f) {
  check_output_dirs("tasks-eval", {{"--answers", &f.answers}, {"--cells", &f.cells}});
  const std::vector<TaskPromptRow> rows = read_task_prompts(f.prompts);
  LoadedModel m = load_trained_model(f.ckpt, f.infer.dev());
  const BeyondConfig cfg = f.infer.get(m);
  const GPTConfig& mc = m.model->config();
  // A standard model without --scorer answers from its last block_size tokens (its own window).
  const int64_t window = !mc.landmark() && cfg.scorer == BlockScorer::Landmark ? mc.block_size : 0;
  const std::string label = f.label.empty() ? default_label(mc, cfg, f.infer.scorer, window > 0) : f.label;
  std::vector<TaskAnswer> answers;
  for (size_t i = 0; i < rows.size(); ++i) {
    answers.push_back(answer_task_prompt(*m.model, *m.tokenizer, cfg, rows[i], window));
    std::fprintf(stderr, "\r%s: prompt %zu/%zu", label.c_str(), i + 1, rows.size());
  }
  std::fprintf(stderr, "\n");
  int64_t longer = 0;  // prompts made with another tokenizer than the model's
  for (size_t i = 0; i < rows.size(); ++i) longer += answers[i].prompt_tokens > rows[i].length ? 1 : 0;
  if (longer > 0)
    std::printf(
        "note: %lld of %zu prompts are longer than their length under this model's tokenizer (tasks-data "
        "counts in --tokenizer, bytes by default)\n",
        static_cast<long long>(longer), rows.size());
  const std::vector<TaskCell> cells = task_cells(rows, answers);
  std::printf("%-16s %8s %6s %7s %6s   (%s)\n", "task", "length", "depth", "prompts", "score", label.c_str());
  for (const TaskCell& c : cells)
    std::printf("%-16s %8lld %5g%% %7lld %6.3f\n", c.task.c_str(), static_cast<long long>(c.length), c.depth_pct,
                static_cast<long long>(c.prompts), c.mean());
  if (!f.answers.empty()) write_file_atomic(f.answers, task_answers_tsv(label, rows, answers), "tasks-eval --answers");
  if (!f.cells.empty()) write_file_atomic(f.cells, task_cells_tsv(label, cells), "tasks-eval --cells");
  if (!f.heatmaps.empty())
    for (const std::string& p : task_heatmaps(cells, f.heatmaps, label)) std::printf("wrote %s\n", p.c_str());
  return 0;
}

}  // namespace

Command tasks_data_command(CLI::App& app) {
  auto* sub = app.add_subcommand("tasks-data",
                                 "Write long-context task text: training documents (train.txt, val.txt) and "
                                 "evaluation prompts with their gold answers (prompts.tsv); docs/tasks.md");
  auto f = std::make_shared<TasksDataFlags>();
  sub->add_option("--out", f->out, "Output directory")->required();
  sub->add_option("--haystack", f->haystack, "Real text whose sentences hide the needles")->capture_default_str();
  sub->add_option("--task", f->tasks,
                  "Tasks of the prompts (and of the training mixture without --mix): niah-single, niah-multikey, "
                  "niah-multivalue, niah-multiquery, vartrack, freqwords, or all")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--length", f->lengths, "Prompt lengths in tokens (each prompt at most this long)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(1) << 26))
      ->capture_default_str();
  sub->add_option("--depth", f->depths, "Depths in % of the text where the answer's first needle stands")
      ->delimiter(',')
      ->check(real_in(0.0, 100.0))
      ->capture_default_str();
  sub->add_option("--prompts", f->prompts, "Prompts per (task, length, depth); 0: no prompts.tsv")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20))
      ->capture_default_str();
  f->mix_opt =
      sub->add_option("--mix", f->mix,
                      "Training mixture TASK[:WEIGHT],...[@MIN-MAX] (lengths in tokens), e.g. all@64-480 (default: the "
                      "--task list, weight 1 each, lengths 64-480)");
  sub->add_option("--docs", f->docs, "Training documents (val.txt: a twentieth, at least 50); 0: none")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24))
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "Seed (train.txt: seed, val.txt: seed + 1, prompts.tsv: seed + 2)")
      ->check(non_negative_int())
      ->capture_default_str();
  sub->add_option("--tokenizer", f->tokenizer, "A tokenizer.json to count lengths in (default: bytes)")
      ->check(CLI::ExistingFile);
  return {sub, [f]() { return run_tasks_data(*f); }};
}

Command tasks_eval_command(CLI::App& app) {
  auto* sub = app.add_subcommand("tasks-eval",
                                 "Score a model on tasks-data's prompts.tsv: greedy answers, exact or recall scores "
                                 "per prompt and per (task, length, depth)");
  auto f = std::make_shared<TasksEvalFlags>();
  sub->add_option("--checkpoint", f->ckpt,
                  "A landmark model (read with cached retrieval), or a standard model (its own window; with "
                  "--scorer, in blocks)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--prompts", f->prompts, "tasks-data's prompts.tsv")->required()->check(CLI::ExistingFile);
  sub->add_option("--answers", f->answers, "Write every prompt's answer and score to this TSV");
  sub->add_option("--cells", f->cells, "Write the mean score per (task, length, depth) to this TSV");
  sub->add_option("--heatmaps", f->heatmaps, "Write one heat map per task to PREFIX<task>.png");
  sub->add_option("--label", f->label, "The model row's name in the TSVs (default e.g. landmark-k4, standard-window)");
  f->infer.add(sub);
  return {sub, [f]() { return run_tasks_eval(*f); }};
}

}  // namespace app
}  // namespace lm
