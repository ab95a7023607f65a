// commands.h: the subcommands of the `landmark` program. Each *_command() registers its flags on
// the CLI11 app and returns a runner that calls the library once parsing succeeded.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace lm {
namespace app {

// The whole file as bytes; `what` names the command in the error when it cannot be read.
std::string read_text_file(const std::string& path, const char* what);  // apps/cmd_data.cpp

struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

Command prepare_command(CLI::App& app);  // apps/cmd_data.cpp
Command corpus_command(CLI::App& app);   // apps/cmd_data.cpp
Command passkey_data_command(CLI::App& app);  // apps/cmd_data.cpp
Command train_command(CLI::App& app);    // apps/cmd_train.cpp
Command plot_command(CLI::App& app);     // apps/cmd_train.cpp
Command plot_table_command(CLI::App& app);  // apps/cmd_train.cpp
Command info_command(CLI::App& app);     // apps/cmd_train.cpp
Command groups_command(CLI::App& app);   // apps/cmd_landmark.cpp
Command passkey_command(CLI::App& app);  // apps/cmd_infer.cpp
Command eval_command(CLI::App& app);     // apps/cmd_infer.cpp
Command generate_command(CLI::App& app); // apps/cmd_infer.cpp
Command attn_map_command(CLI::App& app); // apps/cmd_infer.cpp

}  // namespace app
}  // namespace lm
