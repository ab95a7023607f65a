// cmd_eval.cpp: `landmark passkey` and `landmark eval`, the paper's evaluations: thin wrappers over
// evals/passkey_eval.h and evals/eval.h. Each command parses its flags (apps/eval_flags.h), loads
// the model, calls the library and reports; every line and file it writes is formatted in
// apps/eval_output.h.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "apps/commands.h"
#include "apps/eval_flags.h"
#include "apps/eval_output.h"
#include "apps/infer_flags.h"
#include "apps/progress.h"
#include "beyond/block_scorers.h"
#include "evals/eval.h"
#include "evals/passkey_eval.h"
#include "infer/model_io.h"
#include "tensor/check.h"
#include "train/token_file.h"

namespace lm {
namespace app {

namespace {

int run_passkey(PasskeyFlags& f) {
  f.check_outputs();
  LoadedModel lm_model = load_trained_model(f.ckpt, f.infer.dev());
  const BeyondConfig cfg = f.infer.get(lm_model);
  // A standard model as --checkpoint is evaluated alone, with its own window.
  // A standard model without --scorer reads the prompt's last block_size tokens at once.
  const bool standard = !lm_model.model->config().landmark() && cfg.scorer == BlockScorer::Landmark;
  LM_CHECK(!standard || f.baseline.empty(),
           "passkey: --baseline is compared with a landmark --checkpoint, but " << f.ckpt << " is a standard model");
  LM_CHECK(!standard || !f.opts.recall,
           "passkey: --recall needs a landmark model; " << f.ckpt << " is a standard model");
  LoadedModel base;
  if (!f.baseline.empty()) {
    base = load_trained_model(f.baseline, f.infer.dev());
    LM_CHECK(base.tokenizer->fingerprint() == lm_model.tokenizer->fingerprint(),
             "passkey: the baseline was trained with another tokenizer");
  }
  PasskeyOptions o = f.opts;
  o.scoring = parse_passkey_scoring(f.scoring);
  const int64_t longest = f.lengths.empty() ? 0 : *std::max_element(f.lengths.begin(), f.lengths.end());
  InferFlags::check_reach(cfg, longest + passkey_max_new(o.scoring) - 1,
                          "a prompt of --lengths " + std::to_string(longest) + " and up to " +
                              std::to_string(passkey_max_new(o.scoring)) + " answer tokens (--scoring " + f.scoring +
                              ")");
  const GPTConfig& mc = lm_model.model->config();
  if (standard) o.window = mc.block_size;
  print_passkey_header(o, cfg, mc, standard, base.model != nullptr);
  PasskeyReport report(mc, cfg, standard, base.model ? base.model->config().block_size : 0);
  for (int64_t len : f.lengths) {
    ProgressLine lm_line(!mc.landmark() ? "standard:" : "landmark:");
    PasskeyResult r =
        passkey_accuracy(*lm_model.model, *lm_model.tokenizer, cfg, len, o, passkey_progress(lm_line, len));
    lm_line.finish();
    report.model_row(len, r);
    if (base.model) {
      PasskeyOptions ob = o;
      ob.window = base.model->config().block_size;
      ob.recall = false;
      report.baseline_row(len, passkey_accuracy(*base.model, *base.tokenizer, cfg, len, ob));
    }
    report.end_row(len, r, o.recall);
  }
  report.write(f, o.scoring);
  print_peak_memory();
  return 0;
}

// --paired-with: the other evaluation must have read this very token sequence (its length and
// CRC-32, recorded by --windows-tsv), its windows must lie in it, and one of the two lengths must
// be a multiple of the other.
void check_pairing(const EvalFlags& f, const PerplexityResult& other, int64_t other_length,
                   const TokensIdentity& other_id, const TokensIdentity& id) {
  LM_CHECK(other_id == id, "eval: --paired-with " << f.paired << " was made from a token file of " << other_id.str()
                                                  << ", but --tokens " << f.tokens << " has " << id.str()
                                                  << "; pairing compares two evaluations of one text");
  const int64_t N = id.tokens;
  LM_CHECK(other.windows <= (N - 1) / other_length,
           "eval: --paired-with " << f.paired << " has " << other.windows << " windows of " << other_length
                                  << " tokens, more than " << f.tokens << " holds (" << N
                                  << " tokens); was it made from another token file?");
  const int64_t hi = std::max(f.length, other_length), lo = std::min(f.length, other_length);
  LM_CHECK(hi % lo == 0, "eval: --paired-with " << f.paired << " was evaluated at length " << other_length
                                                << "; pairing needs one of the two lengths (here " << f.length
                                                << ") to be a multiple of the other");
}

// The windows of --tokens evaluated with `c`, the count of windows done on stderr as they go.
PerplexityResult evaluate_windows(const LoadedModel& m, const TokenFile& data, const BeyondConfig& c,
                                  const EvalFlags& f) {
  PerplexityResult r = evaluate_perplexity(
      *m.model, data.tokens(), c, m.landmark_id(), m.cmt_id(), f.length, f.windows,
      [](int64_t d, int64_t t) { std::fprintf(stderr, "\rwindow %lld/%lld", (long long)d, (long long)t); });
  std::fprintf(stderr, "\n");
  return r;
}

// --granularity all: the paper's Table 2, one evaluation per granularity.
int eval_granularities(const EvalFlags& f, const LoadedModel& m, const TokenFile& data, const BeyondConfig& cfg,
                       EvalRows& rows) {
  const bool cmt = m.model->config().context_miss;
  print_granularity_header(cmt);
  std::string intervals;
  for (Granularity g : {Granularity::TokenHead, Granularity::Head, Granularity::Token}) {
    BeyondConfig c = cfg;
    c.granularity = g;
    PerplexityResult r = evaluate_windows(m, data, c, f);
    print_granularity_row(g, f.length, cfg.k, r, cmt);
    const PerplexityInterval ci = bootstrap_perplexity_interval(r, 0.95, f.resamples);
    intervals += granularity_interval(g, r, ci);
    rows.add(c, r, ci);
    std::fflush(stdout);
  }
  print_granularity_intervals(intervals, f.resamples);
  rows.write(f.tsv);
  print_granularity_note(cfg.chunk_len);
  return 0;
}

int run_eval(EvalFlags& f) {
  LoadedModel m = load_trained_model(f.ckpt, f.infer.dev());
  BeyondConfig cfg = f.infer.get(m);
  cfg.standard_local = f.local;
  f.check(cfg);
  InferFlags::check_reach(cfg, f.length, "windows of --length " + std::to_string(f.length));
  // Read the other evaluation first: a bad file is refused before the evaluation, not after it.
  int64_t other_length = 0;
  PerplexityResult other;
  TokensIdentity other_id;
  if (!f.paired.empty()) other = read_window_sums(f.paired, &other_length, &other_id);
  LM_CHECK(f.local == 0 || (!m.model->config().landmark() && m.model->config().xl_cache == 0),
           "eval: --local reads a standard model's windows in pieces; a landmark model's local length is --chunk, "
           "a Transformer-XL model's its block size");
  TokenFile data(f.tokens);
  data.check_fingerprint(m.tokenizer->fingerprint());
  if (!data.checksummed())  // the note train prints for such files
    std::fprintf(stderr, "note: %s has no CRC-32 (written before version 2): read unverified\n", f.tokens.c_str());
  const TokensIdentity id =
      f.paired.empty() && f.windows_tsv.empty() ? TokensIdentity{} : tokens_identity(data.tokens());
  if (!f.paired.empty()) check_pairing(f, other, other_length, other_id, id);
  const GPTConfig& mc = m.model->config();
  // Read in blocks with retrieval: a landmark model, or (beyond the paper) a standard one with --scorer.
  const bool landmark = mc.landmark() || cfg.scorer != BlockScorer::Landmark;
  const int64_t B = mc.landmark() ? mc.landmark_every + 1 : mc.landmark_every;  // positions per retrieved block
  LM_CHECK(landmark || !f.infer.all(), "eval: --granularity all needs a landmark model (or --scorer)");
  // One row per evaluation for --tsv; the first eleven columns are docs/results/table1.tsv's.
  EvalRows rows(f.label, mc, f.length, landmark, B);
  if (f.infer.all()) return eval_granularities(f, m, data, cfg, rows);
  PerplexityResult r = evaluate_windows(m, data, cfg, f);
  print_eval_table(mc, cfg, r, f.length, landmark, B);
  const PerplexityInterval ci = print_interval(r, f.resamples);
  rows.add(cfg, r, ci);
  if (!f.windows_tsv.empty()) {
    write_window_sums(f.windows_tsv, r, f.length, id);
    std::printf("wrote %s (%lld windows)\n", f.windows_tsv.c_str(), (long long)r.windows);
  }
  if (!f.paired.empty())
    print_paired(f.paired, other_length, paired_bootstrap_ratio(r, f.length, other, other_length, 0.95, f.resamples),
                 f.resamples);
  print_retrieval_summary(mc, cfg, r, landmark);
  print_unique_blocks(r, cfg, f.hist);
  rows.write(f.tsv);
  return 0;
}

}  // namespace

Command passkey_command(CLI::App& app) {
  auto* sub = app.add_subcommand("passkey", "Pass-key retrieval accuracy against prompt length (Section 4.2)");
  auto flags = std::make_shared<PasskeyFlags>();
  flags->add(sub);
  return {sub, [flags]() { return run_passkey(*flags); }};
}

Command eval_command(CLI::App& app) {
  auto* sub = app.add_subcommand("eval", "Perplexity over long windows with cached retrieval (the paper's Tables 1-3)");
  auto flags = std::make_shared<EvalFlags>();
  flags->add(sub);
  return {sub, [flags]() { return run_eval(*flags); }};
}

}  // namespace app
}  // namespace lm
