// commands.h: the subcommands of the `landmark` program. Each *_command() registers its flags on
// the CLI11 app and returns a runner that calls the library once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
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

// For integer flags with a lower bound and no upper one (counts, indices, steps): CLI11's
// NonNegativeNumber and PositiveNumber are ranges up to DBL_MAX, and their error for -1 printed
// that bound in 309 digits. These say the bound in words; the help still reads NONNEGATIVE or
// POSITIVE. A value that is not an integer is refused here, before CLI11's conversion.
inline CLI::Validator int_at_least(long long lo, const std::string& name) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        long long v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return "not an integer: " + s;
        return v < lo ? "must be an integer >= " + std::to_string(lo) + ", got " + s : std::string();
      },
      name);
}
inline CLI::Validator non_negative_count() { return int_at_least(0, "NONNEGATIVE"); }
inline CLI::Validator positive_count() { return int_at_least(1, "POSITIVE"); }

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

// An empty value for a numeric flag (`--seed ''`, `--seed "$SEED"` with SEED unset, the empty
// pieces of `--lengths ,`) is refused at parse time, naming the flag (exit 2): CLI11 would read it
// as 0 wherever the flag's own check lets an empty string through. refuse_empty_numbers walks
// every option of `app` and of its subcommands whose value is an INT, UINT or FLOAT (or a list of
// them) and puts this check first; register_commands calls it once every subcommand is registered,
// so a flag added later is covered without a line of its own.
inline CLI::Validator non_empty_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        for (char c : s)
          if (!std::isspace(static_cast<unsigned char>(c))) return std::string();
        return "an empty value; give a number";
      },
      "");
}
inline void refuse_empty_numbers(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_numbers(*sub);
  for (CLI::Option* opt : app.get_options([](CLI::Option*) { return true; })) {
    if (opt->get_type_size() == 0) continue;  // a flag takes no value
    const std::string t = opt->get_type_name();
    bool numeric = false;
    for (const char* name : {"INT", "UINT", "FLOAT"}) {
      const size_t n = std::char_traits<char>::length(name);
      numeric = numeric || (t.compare(0, n, name) == 0 && (t.size() == n || t[n] == ':'));
    }
    if (numeric) opt->transform(non_empty_number());  // transform: before the option's own checks
  }
}

// `landmark foo`: CLI11 says only "A subcommand is required", and `landmark foo --help` prints the
// program's help with exit 0. When the first argument is not an option nor a subcommand of `app`,
// this prints "unknown subcommand 'foo'" and the subcommands to stderr and returns true (the
// program then exits 2).
inline bool unknown_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-' || argv[1][0] == 0) return false;
  const std::string name = argv[1];
  std::string names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) return false;
    names += "  " + sub->get_name() + std::string(std::max<size_t>(2, 15 - sub->get_name().size()), ' ') +
             sub->get_description() + "\n";
  }
  std::fprintf(stderr,
               "error: unknown subcommand '%s'; the subcommands are:\n%s(landmark <subcommand> --help lists "
               "its flags)\n",
               name.c_str(), names.c_str());
  return true;
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
