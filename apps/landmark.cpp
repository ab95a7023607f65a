// landmark.cpp: the `landmark` command-line program. Each subcommand parses flags (CLI11) and
// calls one library function; no logic lives here. `landmark <command> --help` lists every flag
// with its default.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "apps/commands.h"
#include "tensor/check.h"
#include "train/distributed.h"

int main(int argc, char** argv) {
  // How idle OpenMP threads wait. libgomp's default spins ~3 ms before sleeping, which steals the
  // CPU from everything else on a small shared machine (inference alternates short parallel and
  // serial phases: we measured 70% of a pass-key run spinning); sleeping at once
  // (OMP_WAIT_POLICY=PASSIVE) makes every parallel region pay ~40 us to wake a thread, so decoding
  // a token could not use the second core. A short spin (GOMP_SPINCOUNT=10000, about 0.1 ms)
  // keeps threads awake through a decode step and asleep between jobs. libgomp reads these when
  // the program loads, so when neither is set we set the spin and start ourselves again. An
  // explicit value of either wins (tensor/cpu/parallel.h picks its grain from the same variables).
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("GOMP_SPINCOUNT", "10000", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
  }
  CLI::App app{"landmark: Landmark Attention from scratch in C++ (train, evaluate, inspect)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  std::vector<lm::app::Command> commands = lm::app::register_commands(app);
  if (lm::app::unknown_subcommand(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors print CLI11's message and exit 2, whatever CLI11's own code for the kind of
    // error (105 for a value out of range, 106 for a missing flag, ...); --help exits 0.
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto& c : commands) {
    if (!c.sub->parsed()) continue;
    // Under mpirun (train/distributed.h) an error on one rank stops every rank: the others would
    // otherwise wait forever in the next collective.
    try {
      const int status = c.run();
      lm::dist::finalize();
      return status;
    } catch (const lm::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
    std::fflush(stderr);
    lm::dist::abort_all(1);
    return 1;
  }
  return 0;
}
