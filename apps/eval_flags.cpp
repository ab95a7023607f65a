// eval_flags.cpp: the flags of `landmark passkey` and `landmark eval` (eval_flags.h); the commands
// that read them are apps/cmd_eval.cpp, the retrieval flags apps/infer_flags.h.
#include "apps/eval_flags.h"

#include <filesystem>

#include "tensor/check.h"
#include "tensor/files.h"

namespace lm {
namespace app {

void check_output_dirs(const char* command, std::initializer_list<std::pair<const char*, const std::string*>> outputs) {
  for (const auto& [flag, path] : outputs) {
    if (path == nullptr || path->empty()) continue;
    const std::filesystem::path dir = std::filesystem::path(*path).parent_path();
    LM_CHECK(dir.empty() || std::filesystem::is_directory(dir),
             command << ": " << flag << " " << *path << ": the directory " << dir.string() << " does not exist");
    require_replaceable_output(*path, std::string(command) + " " + flag);
  }
}

void PasskeyFlags::add(CLI::App* sub) {
  sub->add_option("--checkpoint", ckpt,
                  "A landmark model's checkpoint (or a standard model's: it then reads the "
                  "last window of each prompt, as --baseline does)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--baseline", baseline, "A standard model's checkpoint, evaluated with its own window")
      ->check(CLI::ExistingFile);
  sub->add_option("--lengths", lengths, "Prompt lengths in tokens")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(1) << 26))
      ->capture_default_str();
  sub->add_option("--trials", opts.trials, "Prompts per length")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  sub->add_option("--seed", opts.seed, "Seed for keys and key positions")
      ->check(non_negative_int())
      ->capture_default_str();
  sub->add_option("--depth", opts.depth,
                  "Put the key at this fraction of the filler text (0: first, 1: right before the question) "
                  "instead of at random; a sweep over depths shows how far back each model can copy from")
      ->check(real_in(0.0, 1.0));
  sub->add_option("--scoring", scoring,
                  "strict: the answer starts with the key's digits | paper: the first integer in 100 generated tokens "
                  "is the key")
      ->check(CLI::IsMember({"strict", "paper"}))
      ->capture_default_str();
  sub->add_flag(
      "--recall", opts.recall,
      "Also report retrieval recall per layer and head: how often the answer's queries retrieve the key's block");
  recall_png_opt = sub->add_option("--recall-plot", recall_png, "With --recall: the layer x head heat map PNG")
                       ->capture_default_str();
  sub->add_option("--plot", png, "Write accuracy against length to this PNG");
  sub->add_option("--tsv", tsv,
                  "Write the table to this file, tab-separated: length landmark_pct baseline_pct (length standard_pct "
                  "for a standard model)");
  sub->add_option("--answers", answers,
                  "Write every prompt's answer to this file, tab-separated: length trial key "
                  "correct answer (the model's decoded answer; tabs and newlines shown as \\t, \\n)");
  infer.add(sub);
  infer.add_certify(sub);
}

void PasskeyFlags::check_outputs() const {
  LM_CHECK(opts.recall || recall_png_opt == nullptr || recall_png_opt->count() == 0,
           "passkey: --recall-plot draws the recall of --recall; give --recall too, or leave --recall-plot out");
  check_output_dirs("passkey", {{"--tsv", &tsv},
                                {"--plot", &png},
                                {"--answers", &answers},
                                {"--recall-plot", opts.recall ? &recall_png : nullptr}});
}

void EvalFlags::add(CLI::App* sub) {
  sub->add_option("--checkpoint", ckpt, "Model checkpoint")->required()->check(CLI::ExistingFile);
  sub->add_option("--tokens", tokens,
                  "A token file made by `landmark prepare` with the same tokenizer (e.g. val.tokens)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--length", length, "Evaluation length: raw tokens per window, all of them scored")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30))
      ->capture_default_str();
  sub->add_option("--windows", windows, "Evaluate at most this many windows (0: all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
      ->capture_default_str();
  sub->add_option("--hist", hist, "Write the histogram of unique retrieved blocks (Appendix C) to this PNG");
  sub->add_option("--local", local,
                  "A standard model: read each window in independent pieces of this many tokens, no memory between "
                  "them (Table 1's baseline at l_local 360; 0: the whole window)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30))
      ->capture_default_str();
  sub->add_option("--tsv", tsv,
                  "Write the result as a tab-separated table, one row per granularity: model train_len eval_len k ppl "
                  "ci_low ci_high l_local xl_cache blocks attention_size granularity positions cmt_cutoff drop_rate "
                  "blocks_per_step unique_per_token windows tokens seconds");
  sub->add_option("--label", label,
                  "The model column of --tsv (default: standard, landmark, landmark-cmt or xl, from the checkpoint)");
  sub->add_option("--bootstrap", resamples, "Resamples of the 95% bootstrap interval over windows")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 24))
      ->capture_default_str();
  sub->add_option("--windows-tsv", windows_tsv,
                  "Write each window's summed nats as a table (window first_token tokens nats), for --paired-with");
  sub->add_option("--paired-with", paired,
                  "Compare with another evaluation of the same token file, window for window: a --windows-tsv file "
                  "whose length divides this one's or is a multiple of it (prints the perplexity ratio and its "
                  "paired bootstrap interval)")
      ->check(CLI::ExistingFile);
  infer.add(sub, true);
  infer.add_certify(sub);
}

void EvalFlags::check(const BeyondConfig& cfg) const {
  check_output_dirs("eval", {{"--tsv", &tsv}, {"--windows-tsv", &windows_tsv}, {"--hist", &hist}});
  LM_CHECK(!infer.all() || hist.empty(), "eval: --hist draws one granularity; choose one instead of 'all'");
  LM_CHECK(!infer.all() || (!cfg.certify && cfg.left_out < 0),
           "eval: --certify and --left-out read one granularity; choose one instead of 'all'");
  LM_CHECK(!infer.all() || (windows_tsv.empty() && paired.empty()),
           "eval: --windows-tsv and --paired-with compare one evaluation; choose one granularity instead of 'all'");
}

}  // namespace app
}  // namespace lm
