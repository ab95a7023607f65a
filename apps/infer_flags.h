// infer_flags.h: the retrieval flags every inference command shares (apps/cmd_infer.cpp,
// apps/cmd_eval.cpp), checked against the model they will run.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "beyond/block_scorers.h"
#include "beyond/config.h"
#include "infer/model_io.h"
#include "tensor/check.h"

namespace lm {
namespace app {

struct InferFlags {
  BeyondConfig cfg;
  std::string granularity = "token-head", positions = "stingy", device = "cpu", kv_dtype = "f32", search = "scan",
              scorer = "landmark";
  CLI::Option *cutoff_opt = nullptr, *scorer_opt = nullptr, *reps_opt = nullptr, *no_cmt_skip_opt = nullptr;
  // The flags that only a reading in blocks uses (a landmark model, or a standard one with
  // --scorer): a standard model read by its window refuses them (get()), instead of ignoring them.
  std::vector<CLI::Option*> block_opts;
  // `all_granularities`: accept "all" (eval runs the three, as in the paper's Table 2).
  // `mass_recall`: offer --mass-recall (the commands that print it: eval, passkey, generate).
  void add(CLI::App* sub, bool all_granularities = false, bool mass_recall = true) {
    sub->add_option("--device", device, "cpu or cuda (block K/V stay in host memory unless --blocks-on-device)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    sub->add_flag("--blocks-on-device", cfg.blocks_on_device,
                  "--device cuda: keep block K/V in GPU memory too (no offload: nothing crosses to the GPU per "
                  "retrieval; the context is then bounded by GPU memory)");
    block_opts.push_back(
        sub->add_option(
               "--chunk", cfg.chunk_len,
               "Raw tokens read per step (the paper's l_local). With stingy positions [tail | chunk] starts "
               "after k + 1 slots of F + 1 positions, so the chunk's last query sits at (k + 1)(F + 1) + t + "
               "chunk + floor((t + chunk) / F) - 1, t the tail's tokens (0 to F - 1; 0 while every chunk read "
               "so far is a multiple of F): with k 4, F 50 and --chunk 250, 509 at t 0 and up to 558. Keep that "
               "under the model's training window (the demo's models: 512; the demo reads with --chunk 200: "
               "458, at most 507)")
            ->check(CLI::Range(int64_t(1), int64_t(1) << 30))
            ->capture_default_str());
    block_opts.push_back(sub->add_option("--k", cfg.k, "Blocks retrieved per query")
                             ->check(CLI::Range(int64_t(0), int64_t(1) << 20))
                             ->capture_default_str());
    block_opts.push_back(sub->add_option("--capacity", cfg.capacity, "Keep only the newest S blocks (0: all)")
                             ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
                             ->capture_default_str());
    std::vector<std::string> modes{"token-head", "token", "head"};
    if (all_granularities) modes.push_back("all");
    block_opts.push_back(
        sub->add_option("--granularity", granularity,
                        all_granularities
                            ? "token-head | token | head | all: who shares a retrieval (all: the three, Table 2)"
                            : "token-head | token | head: who shares a retrieval")
            ->check(CLI::IsMember(modes))
            ->capture_default_str());
    block_opts.push_back(sub->add_option("--positions", positions, "stingy | exact")
                             ->check(CLI::IsMember({"stingy", "exact"}))
                             ->capture_default_str());
    block_opts.push_back(
        sub->add_option("--block-dir", cfg.block_dir,
                        "Keep block K/V on disk, in a fresh unlinked file in this directory (read back only when "
                        "retrieved)")
            ->check(CLI::ExistingDirectory));
    block_opts.push_back(
        sub->add_option(
               "--kv-dtype", kv_dtype,
               "f32 | f16: how block K/V are stored (f16: half the memory or disk, and half the bytes read per "
               "retrieval; converted back to f32 for attention)")
            ->check(CLI::IsMember({"f32", "f16"}))
            ->capture_default_str());
    block_opts.push_back(
        sub->add_option("--search", search,
                        "scan | bounded | approx: how each query finds its top k landmarks (scan: every key scored; "
                        "bounded: tiles of keys skipped when their bound cannot win; both exact. approx: only the "
                        "--search-tiles tiles of highest bound scored, not exact). Bounded and approx serve token-head "
                        "granularity on the CPU; the rest always scans")
            ->check(CLI::IsMember({"bounded", "scan", "approx"}))
            ->capture_default_str());
    block_opts.push_back(
        sub->add_option("--search-tiles", cfg.search_tiles,
                        "--search approx: tiles of 64 landmark keys scored per query (more only when k keys need more; "
                        "the rest only bounded)")
            ->check(CLI::Range(int64_t(1), int64_t(1) << 30))
            ->capture_default_str());
    no_cmt_skip_opt = sub->add_flag(
        "!--no-cmt-skip", cfg.cmt_skip,
        "Models trained with --cmt: retrieve and read the blocks of rows below the cutoff too, as the paper "
        "does (by default they read none: the same logits, fewer blocks read)");
    block_opts.push_back(
        sub->add_option("--left-out", cfg.left_out,
                        "Beyond the paper, adaptive k: each row retrieves the fewest of its best blocks (at most --k) "
                        "whose left-out weight is at most this (prints mean k, rows capped, the certified bound). "
                        "Needs --positions exact, --search scan, token-head granularity, the CPU")
            ->check(real_in(0.0, 1.0)));
    scorer_opt = sub->add_option("--scorer", scorer,
                                 "Beyond the paper: how a cached block is scored for retrieval. landmark (the paper: "
                                 "its landmark key; landmark models) | mean (the mean of its keys) | quest (the "
                                 "per-feature min/max bound) | reps (its --reps most attended keys) | oracle (its "
                                 "exact attention mass; texts up to 32768 tokens). mean, quest, reps and oracle also "
                                 "read a standard model in blocks of its landmark_every tokens")
                     ->check(CLI::IsMember({"landmark", "mean", "quest", "reps", "oracle"}))
                     ->capture_default_str();
    reps_opt = sub->add_option("--reps", cfg.reps, "--scorer reps: representative keys kept per block")
                   ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
                   ->capture_default_str();
    if (mass_recall)
      block_opts.push_back(sub->add_flag(
          "--mass-recall", cfg.mass_recall,
          "Beyond the paper: print the share of the oracle's block attention mass the chosen blocks hold, "
          "and their overlap (IoU) with the oracle's top k (keeps every key in fast memory; CPU)"));
    cutoff_opt =
        sub->add_option("--cmt-cutoff", cfg.cmt_cutoff,
                        "Models trained with --cmt: S(CMT) below this gates retrieved blocks with 0 (Appendix D)")
            ->check(real_in(0.0, 1.0))
            ->capture_default_str();
  }
  // Beyond the paper (eval, passkey): the left-out certificate (beyond/certificate.h).
  void add_certify(CLI::App* sub) {
    sub->add_flag("--certify", cfg.certify,
                  "Beyond the paper: per layer, the weight each row would give the cached blocks it did not "
                  "retrieve (mean, 99th percentile, max) and the worst certified bound on an attention output's "
                  "error. Needs --positions exact and the CPU; scores every cached landmark for every row");
  }
  // The device to load the model on; first the flags that depend on it (before any model work).
  Device dev() const {
    LM_CHECK(!cfg.blocks_on_device || device == "cuda",
             "--blocks-on-device: block K/V can be kept on the device only with --device cuda (on the CPU they are "
             "in host memory already)");
    LM_CHECK(!cfg.blocks_on_device || (cfg.block_dir.empty() && kv_dtype == "f32"),
             "--blocks-on-device: block K/V kept in GPU memory are neither in files (--block-dir) nor f16 "
             "(--kv-dtype f16)");
    return parse_device(device);
  }
  bool all() const { return granularity == "all"; }
  // --scorer oracle reads texts up to kOracleMaxTokens. The furthest token a run feeds is known
  // before it starts (`reach`; `how` says what makes it): a run past the limit is refused then,
  // not after minutes of work.
  static void check_reach(const BeyondConfig& cfg, int64_t reach, const std::string& how) {
    LM_CHECK(cfg.scorer != BlockScorer::Oracle || reach <= kOracleMaxTokens,
             "--scorer oracle: the oracle scores every cached key (dense), for texts up to "
                 << kOracleMaxTokens << " tokens; this run reaches " << reach << " (" << how << ")");
  }
  // The configuration for `m`; refuses a CMT cutoff for a model without a context-miss token.
  BeyondConfig get(const LoadedModel& m) {
    LM_CHECK(cutoff_opt == nullptr || cutoff_opt->count() == 0 || m.model->config().context_miss,
             "--cmt-cutoff: this model was trained without a context-miss token (train --cmt); there is no CMT to cut");
    LM_CHECK(no_cmt_skip_opt == nullptr || no_cmt_skip_opt->count() == 0 || m.model->config().context_miss,
             "--no-cmt-skip: this model was trained without a context-miss token (train --cmt); no row is gated off, "
             "there are no skipped blocks to read");
    if (!m.model->config().landmark() && m.model->config().xl_cache == 0 &&
        (scorer_opt == nullptr || scorer_opt->count() == 0)) {  // (--scorer landmark is refused below)
      std::string given;
      for (const CLI::Option* o : block_opts)
        if (o->count() > 0) given += (given.empty() ? "" : ", ") + o->get_name();
      LM_CHECK(given.empty(), given << ": this is a standard model, read by its own window without retrieval; these "
                                    << "flags act on a reading in blocks (a landmark model, or --scorer mean, quest, "
                                    << "reps or oracle)");
    }
    cfg.granularity = parse_granularity(all() ? "token-head" : granularity);
    cfg.positions = parse_position_mode(positions);
    cfg.kv_f16 = kv_dtype == "f16";
    (void)dev();  // the device flags' checks
    cfg.search = parse_key_search(search);
    LM_CHECK(!(cfg.certify || cfg.left_out >= 0) || device == "cpu",
             "--certify, --left-out: the left-out weights are computed by the CPU rows only; use --device cpu");
    LM_CHECK(!(cfg.certify || cfg.left_out >= 0) || m.model->config().landmark(),
             "--certify, --left-out: the left-out weights are those of a landmark model's retrieval; this model has "
             "no landmarks");
    cfg.scorer = parse_block_scorer(scorer);
    LM_CHECK(
        m.model->config().landmark() || cfg.scorer != BlockScorer::Landmark || scorer_opt == nullptr ||
            scorer_opt->count() == 0,
        "--scorer landmark: this is a standard model, it has no landmark keys; choose mean, quest, reps or oracle");
    LM_CHECK(reps_opt == nullptr || reps_opt->count() == 0 || cfg.scorer == BlockScorer::Reps,
             "--reps: only --scorer reps keeps representative keys (the scorer here is " << scorer << ")");
    LM_CHECK(m.model->config().xl_cache == 0 || (cfg.scorer == BlockScorer::Landmark && !cfg.mass_recall),
             "--scorer, --mass-recall: a Transformer-XL model reads its own memory, not retrieved blocks");
    LM_CHECK(m.model->config().landmark() || cfg.scorer != BlockScorer::Landmark || !cfg.mass_recall,
             "--mass-recall: a standard model is read in blocks only with --scorer mean, quest, reps or oracle");
    LM_CHECK(!(cfg.scorer != BlockScorer::Landmark || cfg.mass_recall) || device == "cpu",
             "--scorer " << scorer << ", --mass-recall: the block summaries are scored on the CPU; use --device cpu");
    cfg.validate();  // before any output: e.g. --certify without --positions exact
    return cfg;
  }
};

}  // namespace app
}  // namespace lm
