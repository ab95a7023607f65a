// fuzz_cli.cpp: the `landmark` command line. The input is argv (arguments separated by NUL
// bytes); the harness parses it with the program's parser (apps/commands.h register_commands).
// It does not run the command: that would write files and train models. Flags that parse are
// checked further by each command before it does work; tests/cli/test_bad_flags.sh runs those.
// Beyond "no crash", a parse that succeeds must not let a flag silently lose: no option --NAME
// was given together with its alternative --NAME-file (generate --prompt and --prompt-file,
// attn-map and explore --text and --text-file: one of the two would be dropped), and no unsigned
// (UINT) option took a value with a minus sign, which CLI11's strtoull would wrap to 2^64-1
// (every --seed). A violation aborts: a finding.
//
// The parser is built once per process, as apps/landmark.cpp builds it, and reused: CLI11's
// App::parse clears the results of the previous parse first (also after one that threw), so each
// input is parsed by a parser in the same state. Building it (every subcommand and option) took
// about 95% of each execution when it was rebuilt per input (213 executions per second under
// ASan against 8,174 reused, 20 s each on one core). What the reuse does not reset are the variables the
// options write into; parsing never reads them, so an input's outcome does not depend on the
// inputs before it. To check a finding, run the harness on that one input (a fresh process).
// Nor does CLI11 2.1's App::clear empty the record of the order options were given in
// (App::parse_order), which so grows by a pointer per option parsed: about 90 MB per million
// inputs, 1 GB over the ten-million run of docs/reliability.md. A fresh parser every 65,536
// inputs bounds it (a rebuild costs as much as about 40 parses).
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdlib>
#include <memory>

#include "apps/commands.h"
#include "fuzz/fuzz_util.h"

namespace {

struct Parser {
  CLI::App app{"landmark"};
  std::vector<lm::app::Command> commands;
  Parser() {
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Print help for every subcommand");
    commands = lm::app::register_commands(app);
  }
};

// The checks a successful parse must pass (see the file comment); aborts on a violation.
void check_parsed(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {  // the subcommands this input used
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->count() == 0) continue;
      const std::string name = opt->get_name();  // "--prompt"
      for (const CLI::Option* other : sub->get_options())
        if (other->count() > 0 && other->get_name() == name + "-file") std::abort();
      if (opt->get_type_name().rfind("UINT", 0) != 0) continue;
      for (const std::string& r : opt->results()) {
        size_t i = 0;
        while (i < r.size() && std::isspace(static_cast<unsigned char>(r[i]))) ++i;
        if (i < r.size() && r[i] == '-') std::abort();
      }
    }
    check_parsed(*sub);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<Parser> parser;
  static uint64_t inputs = 0;
  if (inputs++ % 65536 == 0) parser = std::make_unique<Parser>();
  std::vector<std::string> args;
  args.emplace_back();
  for (size_t i = 0; i < size && args.size() <= 32; ++i) {
    if (data[i] == 0) args.emplace_back();
    else args.back().push_back(static_cast<char>(data[i]));
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    parser->app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return 0;
  }
  check_parsed(parser->app);
  return 0;
}
