// fuzz_cli.cpp: the `landmark` command line. The input is argv (arguments separated by NUL
// bytes); the harness builds the program's parser (apps/commands.h register_commands) and parses.
// It does not run the command: that would write files and train models. Flags that parse are
// checked further by each command before it does work; tests/cli/test_bad_flags.sh runs those.
#include <CLI/CLI.hpp>

#include "apps/commands.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  args.emplace_back();
  for (size_t i = 0; i < size && args.size() <= 32; ++i) {
    if (data[i] == 0) args.emplace_back();
    else args.back().push_back(static_cast<char>(data[i]));
  }
  CLI::App app{"landmark"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  std::vector<lm::app::Command> commands = lm::app::register_commands(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
  }
  return 0;
}
