// eval_flags.h: the flags of `landmark passkey` and `landmark eval` (apps/cmd_eval.cpp runs them),
// registered on their subcommands in the order --help lists them, and the checks that need only
// the flags (output paths, what --granularity all excludes). Not the retrieval flags both share
// with the other inference commands (apps/infer_flags.h), nor what they print (apps/eval_output.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "apps/infer_flags.h"
#include "beyond/config.h"
#include "evals/passkey_eval.h"

namespace lm {
namespace app {

// Refuses an output file whose directory is missing, or a path the writer would refuse (a FIFO,
// a device, a link: require_replaceable_output), before a long evaluation, not after it:
// outputs are (flag, path) pairs; an empty path, or none, means the file will not be written.
void check_output_dirs(const char* command, std::initializer_list<std::pair<const char*, const std::string*>> outputs);

// `landmark passkey`: pass-key retrieval accuracy against prompt length (Section 4.2).
struct PasskeyFlags {
  std::string ckpt, baseline;
  std::vector<int64_t> lengths{512, 1024, 2048, 4096, 8192, 16384, 32768};
  PasskeyOptions opts;
  std::string scoring = "strict", png, tsv, answers, recall_png = "passkey_recall.png";
  CLI::Option* recall_png_opt = nullptr;  // --recall-plot: given without --recall it is refused
  InferFlags infer;
  void add(CLI::App* sub);  // binds the flags to these fields: the object must not move afterwards
  // The output paths, and the flags that act only with another (--recall-plot needs --recall).
  void check_outputs() const;
};

// `landmark eval`: perplexity over long windows with cached retrieval (the paper's Tables 1-3).
struct EvalFlags {
  std::string ckpt, tokens;
  int64_t length = 2048, windows = 0;
  std::string hist;
  int64_t local = 0;
  std::string tsv, label;
  int64_t resamples = 2000;
  std::string windows_tsv, paired;
  InferFlags infer;
  void add(CLI::App* sub);  // binds the flags to these fields: the object must not move afterwards
  // The output paths, then what one evaluation of --granularity all cannot give (cfg: infer.get()'s).
  void check(const BeyondConfig& cfg) const;
};

}  // namespace app
}  // namespace lm
