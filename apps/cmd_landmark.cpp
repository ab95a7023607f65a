// cmd_landmark.cpp: `landmark groups`: draw which softmax group every key falls into for every
// query of a small window (the picture in docs/landmark.md).
#include <iostream>
#include <memory>

#include "apps/commands.h"
#include "landmark/groups_plot.h"
#include "landmark/tokens.h"

namespace lm {
namespace app {

Command groups_command(CLI::App& app) {
  auto* sub = app.add_subcommand("groups", "Draw the grouped-softmax groups of a small window as a PNG");
  auto length = std::make_shared<int>(24);
  auto every = std::make_shared<int>(4);
  auto phase = std::make_shared<int>(1);
  auto cmt = std::make_shared<bool>(false);
  auto controlled = std::make_shared<std::vector<int>>();
  auto out = std::make_shared<std::string>("groups.png");
  sub->add_option("--length", *length, "Window length T")->check(CLI::Range(2, 128))->capture_default_str();
  sub->add_option("--every", *every, "F: regular tokens per block")->check(CLI::Range(1, 64))->capture_default_str();
  sub->add_option("--phase", *phase, "Regular tokens already in the first block before the window starts")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_flag("--cmt", *cmt, "Put a context-miss token at position 0");
  sub->add_option("--controlled", *controlled, "Indices (0-based) of landmarks controlled by the CMT")
      ->check(non_negative_int());
  sub->add_option("--out", *out, "PNG to write")->capture_default_str();
  auto run = [=]() {
    LM_CHECK(*phase < *every, "groups: --phase must be smaller than --every");
    std::vector<int32_t> kinds;
    if (*cmt) kinds.push_back(kContextMiss);
    int p = *phase, landmark_index = 0;
    while (static_cast<int>(kinds.size()) < *length) {
      if (p == *every) {
        bool ctrl = false;
        for (int c : *controlled) ctrl = ctrl || c == landmark_index;
        kinds.push_back(ctrl ? kControlledLandmark : kLandmark);
        ++landmark_index;
        p = 0;
      } else {
        kinds.push_back(kRegular);
        ++p;
      }
    }
    // An index past the window's landmarks would control nothing: refused rather than dropped.
    for (int c : *controlled)
      LM_CHECK(c < landmark_index, "groups: --controlled " << c << " is past the window's " << landmark_index
                                                           << " landmarks (indices count from 0)");
    plot_groups(
        kinds, *out,
        "grouped softmax: T " + std::to_string(*length) + ", F " + std::to_string(*every) + (*cmt ? ", with CMT" : ""));
    std::cout << "wrote " << *out << "\n";
    return 0;
  };
  return {sub, run};
}

}  // namespace app
}  // namespace lm
