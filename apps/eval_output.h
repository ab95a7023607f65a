// eval_output.h: what `landmark passkey` and `landmark eval` print and write (apps/cmd_eval.cpp):
// their tables and summary lines on stdout, the rows of their --tsv and --answers files, their
// plots. Every format of the two commands is here, so a byte of their output changes in one place.
// Not their flags (apps/eval_flags.h), nor the evaluations (evals/passkey_eval.h, evals/eval.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "apps/eval_flags.h"
#include "apps/progress.h"
#include "beyond/config.h"
#include "evals/eval.h"
#include "evals/passkey_eval.h"
#include "nn/gpt.h"
#include "plot/plot.h"

namespace lm {
namespace app {

// ---- both commands: the lines beyond the paper's tables ----

// --search approx: how many (query, layer, head) rows could not prove their top k (eval, passkey).
void print_approx_search(const BeyondConfig& cfg, int64_t budget_cut, int64_t rows);
// --certify (beyond the paper): per layer, the weight rows would give the cached blocks they left
// out, and the largest certified bound on an attention output's error (eval, passkey).
void print_certificate(const CertificateStats& c, const char* where, FILE* out = stdout);
// Beyond the paper: what dropping gated-off CMT rows' blocks and adaptive k saved (eval, passkey).
void print_trims(const BeyondConfig& cfg, bool cmt, int64_t unique, int64_t attended, int64_t rows, int64_t blocks,
                 int64_t capped, FILE* out = stdout);
// Beyond the paper (block_scorers.h): what scoring the cached blocks cost, and, with --mass-recall,
// how the chosen blocks agree with the oracle's ("n/a" when no row chose among cached blocks)
// (eval, passkey; generate on stderr). `out`: where these lines go.
void print_scoring(const BeyondConfig& cfg, int64_t keys_scored, int64_t rows, int64_t summary_bytes,
                   const OracleAgreement& oracle, FILE* out = stdout);
// The most resident memory this process held at any point.
void print_peak_memory();

// ---- passkey ----

// The opening lines: the settings, the key's depth, the scoring, and the table's column heads.
// `standard`: a standard model read by its last window (no --scorer).
void print_passkey_header(const PasskeyOptions& o, const BeyondConfig& cfg, const GPTConfig& mc, bool standard,
                          bool baseline);

// Progress on stderr while a length runs: the trial, the correct count so far, and how far the
// current prompt has been read.
std::function<void(const PasskeyProgress&)> passkey_progress(ProgressLine& line, int64_t len);

// The table as the lengths run (a row per length on stdout, and the --tsv and --answers tables),
// the --plot series and the pooled recall; written out by write() after the last length.
struct PasskeyReport {
  const GPTConfig& mc;
  const BeyondConfig& cfg;
  bool standard, std_model;  // read by its last window; a standard model (by its window, or in blocks)
  int64_t baseline_window;   // the --baseline model's block size (0: no baseline)
  plot::Series s_lm, s_base;
  PasskeyResult pooled;
  std::string table, answer_table;

  PasskeyReport(const GPTConfig& mc, const BeyondConfig& cfg, bool standard, int64_t baseline_window);
  void model_row(int64_t len, const PasskeyResult& r);     // the --checkpoint model's cells and answers
  void baseline_row(int64_t len, const PasskeyResult& b);  // the --baseline model's cell
  // The row's end: its time, the lines beyond the paper, and with `recall` the row's recall table.
  void end_row(int64_t len, const PasskeyResult& r, bool recall);
  // --plot, --tsv, --answers, and with --recall the recall over all lengths and its heat map.
  void write(const PasskeyFlags& f, PasskeyScoring scoring) const;
};

// ---- eval ----

// The --tsv table of eval: its header, then one row per evaluation. The model column is --label,
// or the kind of model (checked: at most 64 characters, no tab or newline).
struct EvalRows {
  const GPTConfig& mc;
  int64_t length;
  bool landmark, xl;
  int64_t B;  // positions per retrieved block
  std::string model_name, rows;

  EvalRows(const std::string& label, const GPTConfig& mc, int64_t length, bool landmark, int64_t B);
  void add(const BeyondConfig& c, const PerplexityResult& r, const PerplexityInterval& ci);
  void write(const std::string& tsv) const;  // to --tsv, when given
};

// The perplexity and its bootstrap interval, printed; returns the interval.
PerplexityInterval print_interval(const PerplexityResult& r, int64_t resamples);

// --granularity all, the paper's Table 2: the column heads, a row per granularity, the intervals
// line (`intervals`: a granularity_interval per row) and the closing note.
void print_granularity_header(bool cmt);
void print_granularity_row(Granularity g, int64_t length, int64_t k, const PerplexityResult& r, bool cmt);
std::string granularity_interval(Granularity g, const PerplexityResult& r, const PerplexityInterval& ci);
void print_granularity_intervals(const std::string& intervals, int64_t resamples);
void print_granularity_note(int64_t chunk_len);

// One evaluation: Table 1's row (landmark, XL or standard) and the line on what was scored.
void print_eval_table(const GPTConfig& mc, const BeyondConfig& cfg, const PerplexityResult& r, int64_t length,
                      bool landmark, int64_t B);
// --paired-with: the ratio against the other evaluation, in words and as one key=value line.
void print_paired(const std::string& paired, int64_t other_length, const PairedRatio& p, int64_t resamples);
// What retrieval did (blocks, and the lines beyond the paper), and the CMT drop rate.
void print_retrieval_summary(const GPTConfig& mc, const BeyondConfig& cfg, const PerplexityResult& r, bool landmark);
// Appendix C: unique blocks retrieved in the penultimate chunk, by layer, and --hist's histogram.
void print_unique_blocks(const PerplexityResult& r, const BeyondConfig& cfg, const std::string& hist);

}  // namespace app
}  // namespace lm
