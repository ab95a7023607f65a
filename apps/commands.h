// commands.h: the subcommands of the `landmark` program. Each *_command() registers its flags on
// the CLI11 app and returns a runner that calls the library once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace lm {
namespace app {

// Validators for real-valued flags. CLI11's Range lets NaN through (every comparison with NaN is
// false: the library's own checks refused it later, naming a parameter instead of the flag) and
// its PositiveNumber prints its upper bound, DBL_MAX, in 309 digits. These refuse NaN and
// infinity at parse time (a usage error, exit 2) and say the bound in words.
inline CLI::Validator real_check(double lo, double hi, bool open_low, const std::string& what) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return "not a number: " + s;
        if (!std::isfinite(v) || (open_low ? v <= lo : v < lo) || v > hi) return "must be " + what + ", got " + s;
        return std::string();
      },
      what);
}
inline CLI::Validator real_in(double lo, double hi) {  // lo <= x <= hi
  std::ostringstream os;
  os << "in [" << lo << ", " << hi << "]";
  return real_check(lo, hi, false, os.str());
}
inline CLI::Validator real_positive() { return real_check(0, HUGE_VAL, true, "a positive number"); }
inline CLI::Validator real_non_negative() { return real_check(0, HUGE_VAL, false, "a number >= 0"); }

// For integer flags that cannot be negative, above all unsigned ones (seeds): CLI11 reads an
// unsigned value with strtoull, which skips leading white space and takes "-1", wrapping it to
// 2^64-1. This refuses a minus sign after any white space at parse time (exit 2); whether the
// rest is a number is left to the conversion.
inline CLI::Validator non_negative_int() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        size_t first = 0;
        while (first < s.size() && std::isspace(static_cast<unsigned char>(s[first]))) ++first;
        return first < s.size() && s[first] == '-' ? "must be >= 0, got " + s : std::string();
      },
      "NONNEGATIVE");
}

// The whole file as bytes; `what` names the command in the error when it cannot be read.
std::string read_text_file(const std::string& path, const char* what);  // apps/cmd_data.cpp

struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

Command prepare_command(CLI::App& app);       // apps/cmd_data.cpp
Command corpus_command(CLI::App& app);        // apps/cmd_data.cpp
Command passkey_data_command(CLI::App& app);  // apps/cmd_data.cpp
Command train_command(CLI::App& app);         // apps/cmd_train.cpp
Command plot_command(CLI::App& app);          // apps/cmd_train.cpp
Command plot_table_command(CLI::App& app);    // apps/cmd_train.cpp
Command info_command(CLI::App& app);          // apps/cmd_train.cpp
Command groups_command(CLI::App& app);        // apps/cmd_landmark.cpp
Command passkey_command(CLI::App& app);       // apps/cmd_eval.cpp
Command eval_command(CLI::App& app);          // apps/cmd_eval.cpp
Command generate_command(CLI::App& app);      // apps/cmd_infer.cpp
Command attn_map_command(CLI::App& app);      // apps/cmd_infer.cpp
Command explore_command(CLI::App& app);       // apps/cmd_explore.cpp
Command tasks_data_command(CLI::App& app);    // apps/cmd_tasks.cpp
Command tasks_eval_command(CLI::App& app);    // apps/cmd_tasks.cpp

// Every subcommand above registered on `app`, in the order `--help` lists them (apps/cmd_data.cpp).
// The program and the command-line fuzz harness (fuzz/fuzz_cli.cpp) build the same parser with it.
std::vector<Command> register_commands(CLI::App& app);

}  // namespace app
}  // namespace lm
