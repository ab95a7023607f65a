// eval_output.cpp: what `landmark passkey` and `landmark eval` print and write (eval_output.h):
// the formats only; the commands that decide what to evaluate are apps/cmd_eval.cpp.
#include "apps/eval_output.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "beyond/block_scorers.h"
#include "train/file_io.h"

namespace lm {
namespace app {

namespace {
std::string fmt_g(double v) {  // a number for a TSV cell, 6 significant digits
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
std::string pct(double share) {  // a share as a percentage with one decimal, for the TSV
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", 100 * share);
  return buf;
}

std::string escape_tabs(const std::string& s) {  // one TSV cell: tabs, newlines and backslashes escaped
  std::string out;
  for (char c : s) {
    if (c == '\t')
      out += "\\t";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\\')
      out += "\\\\";
    else
      out += c;
  }
  return out;
}

// "<what> (layer x head): rows of recall in %" for one result or the pooled one.
void print_recall(const PasskeyResult& r, int64_t n_layer, int64_t n_head, const std::string& what) {
  std::printf("  retrieval recall, %s: %% of answer-token queries whose top k held the key's block\n", what.c_str());
  std::printf("  %8s", "");
  for (int64_t h = 0; h < n_head; ++h) std::printf("  head %-3lld", static_cast<long long>(h));
  std::printf("\n");
  for (int64_t l = 0; l < n_layer; ++l) {
    std::printf("  layer %-2lld", static_cast<long long>(l));
    for (int64_t h = 0; h < n_head; ++h) {
      const double v = r.recall(l, h, n_head);
      if (v < 0)
        std::printf("  %8s", "-");
      else
        std::printf("  %7.1f%%", 100 * v);
    }
    std::printf("   (%lld queries per head)\n",
                static_cast<long long>(r.recall_queries[static_cast<size_t>(l * n_head)]));
  }
}
}  // namespace

// --search approx: how many (query, layer, head) rows could not prove their top k (eval, passkey).
void print_approx_search(const BeyondConfig& cfg, int64_t budget_cut, int64_t rows) {
  std::printf(
      "approx search (%lld tiles): %lld of %lld (query, layer, head) rows ran out of tiles before their top k "
      "was proven (%.2f%%); the rest chose exactly the scan's blocks\n",
      static_cast<long long>(cfg.search_tiles), static_cast<long long>(budget_cut), static_cast<long long>(rows),
      rows ? 100.0 * static_cast<double>(budget_cut) / static_cast<double>(rows) : 0.0);
}

// --certify (beyond the paper): per layer, the weight rows would give the cached blocks they left
// out, and the largest certified bound on an attention output's error (eval, passkey).
void print_certificate(const CertificateStats& c, const char* where, FILE* out) {
  std::fprintf(out,
               "left-out weight M per (query, head) row%s (--certify; exact positions; the bound: |y_all - y_S|):\n",
               where);
  const std::vector<CertificateStats::Layer> layers = c.summary();
  for (size_t l = 0; l < layers.size(); ++l) {
    const CertificateStats::Layer& s = layers[l];
    std::fprintf(out, "  layer %zu: %lld rows, M mean %.3g, 99th percentile %.3g, max %.3g; worst bound %.4g\n", l,
                 static_cast<long long>(s.rows), s.mean, s.p99, s.max, s.bound_max);
  }
  if (layers.empty()) std::fprintf(out, "  no row had a block cached\n");
}

// Beyond the paper: what dropping gated-off CMT rows' blocks and adaptive k saved (eval, passkey).
void print_trims(const BeyondConfig& cfg, bool cmt, int64_t unique, int64_t attended, int64_t rows, int64_t blocks,
                 int64_t capped, FILE* out) {
  if (cmt && cfg.cmt_cutoff > 0)
    std::fprintf(out, "CMT skip %s: %lld distinct blocks attended of %lld chosen (summed over (chunk, layer) pairs)\n",
                 cfg.cmt_skip ? "on" : "off (--no-cmt-skip)", static_cast<long long>(attended),
                 static_cast<long long>(unique));
  if (cfg.left_out >= 0)
    std::fprintf(
        out,
        "adaptive k (--left-out %g, --k %lld): mean k %.3f over %lld (query, layer, head) rows, %.2f%% capped at "
        "k with the left-out weight above %g\n",
        cfg.left_out, static_cast<long long>(cfg.k),
        rows ? static_cast<double>(blocks) / static_cast<double>(rows) : 0.0, static_cast<long long>(rows),
        rows ? 100.0 * static_cast<double>(capped) / static_cast<double>(rows) : 0.0, cfg.left_out);
}

// Beyond the paper (block_scorers.h): what scoring the cached blocks cost, and, with --mass-recall,
// how the chosen blocks agree with the oracle's (eval, passkey).
void print_scoring(const BeyondConfig& cfg, int64_t keys_scored, int64_t rows, int64_t summary_bytes,
                   const OracleAgreement& oracle, FILE* out) {
  const bool own = cfg.scorer != BlockScorer::Landmark;
  std::fprintf(out,
               "block scorer %s%s: %.1f %s scored per (query, head) row with a cache; %lld bytes per block in fast "
               "memory to score it (all layers)%s\n",
               block_scorer_name(cfg.scorer), own ? " (beyond the paper)" : "",
               rows ? static_cast<double>(keys_scored) / static_cast<double>(rows) : 0.0,
               own ? "summary rows" : "landmark keys", static_cast<long long>(summary_bytes),
               cfg.mass_recall && cfg.scorer != BlockScorer::Oracle ? ", and every key for --mass-recall" : "");
  // With no row that had a block cached (--k 0, or texts shorter than a block) there is nothing to
  // compare: "n/a", not a share of 0 over 0 rows.
  if (cfg.mass_recall && oracle.rows == 0)
    std::fprintf(out, "mass recall against the oracle: n/a (no (query, layer, head) row chose among cached blocks%s)\n",
                 cfg.k == 0 ? ": --k 0" : "");
  else if (cfg.mass_recall)
    std::fprintf(out,
                 "mass recall against the oracle: %.4f of the cached blocks' attention mass in the chosen blocks, IoU "
                 "%.4f with the oracle's top k, over %lld (query, layer, head) rows\n",
                 oracle.recall_sum / static_cast<double>(oracle.rows),
                 oracle.iou_sum / static_cast<double>(oracle.rows), static_cast<long long>(oracle.rows));
}

void print_peak_memory() {
  // Linux reports kilobytes.
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    std::printf("peak resident memory: %.0f MB\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
}

// ---- passkey ----

void print_passkey_header(const PasskeyOptions& o, const BeyondConfig& cfg, const GPTConfig& mc, bool standard,
                          bool baseline) {
  char cutoff_note[128] = "";
  if (mc.context_miss) std::snprintf(cutoff_note, sizeof cutoff_note, ", CMT cutoff %g", cfg.cmt_cutoff);
  if (cfg.kv_f16)
    std::snprintf(cutoff_note + std::strlen(cutoff_note), sizeof cutoff_note - std::strlen(cutoff_note),
                  ", block K/V in f16");
  if (cfg.search == KeySearch::Bounded)
    std::snprintf(cutoff_note + std::strlen(cutoff_note), sizeof cutoff_note - std::strlen(cutoff_note),
                  ", %s top-k search", key_search_name(cfg.search));
  if (cfg.search == KeySearch::Approx)
    std::snprintf(cutoff_note + std::strlen(cutoff_note), sizeof cutoff_note - std::strlen(cutoff_note),
                  ", approx top-k search (%lld tiles)", static_cast<long long>(cfg.search_tiles));
  if (cfg.scorer != BlockScorer::Landmark)
    std::snprintf(cutoff_note + std::strlen(cutoff_note), sizeof cutoff_note - std::strlen(cutoff_note),
                  ", %s model, %s block scorer", mc.landmark() ? "landmark" : "standard",
                  block_scorer_name(cfg.scorer));
  if (standard)
    std::printf("pass-key retrieval: %lld trials per length, a standard model reading the last %lld tokens\n",
                static_cast<long long>(o.trials), static_cast<long long>(mc.block_size));
  else
    std::printf("pass-key retrieval: %lld trials per length, k %lld, chunk %lld, %s positions, %s granularity%s\n",
                static_cast<long long>(o.trials), static_cast<long long>(cfg.k), static_cast<long long>(cfg.chunk_len),
                position_mode_name(cfg.positions), granularity_name(cfg.granularity), cutoff_note);
  if (o.depth >= 0) std::printf("key depth: %g of the filler text (0: first, 1: right before the question)\n", o.depth);
  std::printf("scoring: %s\n", o.scoring == PasskeyScoring::Strict
                                   ? "strict (after leading spaces, the answer starts with exactly the key's digits)"
                                   : "paper (the first integer within the first 100 generated tokens equals the key)");
  const bool std_model = !mc.landmark();  // read by its window, or in blocks with --scorer
  std::printf("%8s  %14s%s\n", "length", std_model ? "standard" : "landmark",
              baseline ? "  baseline (own window)" : "");
}

std::function<void(const PasskeyProgress&)> passkey_progress(ProgressLine& line, int64_t len) {
  return [&line, len](const PasskeyProgress& p) {
    const std::string where = "length " + std::to_string(len) + ", trial " + std::to_string(p.trials_done + 1) + "/" +
                              std::to_string(p.trials) + " (" + std::to_string(p.correct) + " correct)";
    if (p.prompt > 0)
      line.update(p.read, p.prompt, where);
    else if (p.trials_done == p.trials)
      line.finish();
    else
      line.restart();
  };
}

PasskeyReport::PasskeyReport(const GPTConfig& mc_, const BeyondConfig& cfg_, bool standard_, int64_t baseline_window_)
    : mc(mc_), cfg(cfg_), standard(standard_), std_model(!mc_.landmark()), baseline_window(baseline_window_) {
  const std::string scored_by =
      cfg.scorer == BlockScorer::Landmark ? "" : std::string(", ") + block_scorer_name(cfg.scorer);
  s_lm = plot::Series{standard    ? "standard (window)"
                      : std_model ? "standard (k " + std::to_string(cfg.k) + scored_by + ")"
                                  : "landmark (k " + std::to_string(cfg.k) + scored_by + ")",
                      {},
                      {},
                      {}};
  s_base = plot::Series{"baseline (window)", {}, {}, {}};
  pooled.recall_hits.assign(static_cast<size_t>(mc.n_layer * mc.n_head), 0);
  pooled.recall_queries = pooled.recall_hits;
  table = std_model ? "length\tstandard_pct\n" : "length\tlandmark_pct\tbaseline_pct\n";
  answer_table = "length\ttrial\tkey\tcorrect\tanswer\n";
}

void PasskeyReport::model_row(int64_t len, const PasskeyResult& r) {
  std::printf("%8lld  %5.1f%% (%2lld/%2lld)", static_cast<long long>(len), 100 * r.accuracy(),
              static_cast<long long>(r.correct), static_cast<long long>(r.trials));
  s_lm.x.push_back(static_cast<double>(len));
  s_lm.y.push_back(100 * r.accuracy());
  table += std::to_string(len) + "\t" + pct(r.accuracy()) + (std_model ? "" : "\t");
  for (size_t t = 0; t < r.answers.size(); ++t)
    answer_table += std::to_string(len) + "\t" + std::to_string(t) + "\t" + std::to_string(r.keys[t]) + "\t" +
                    (r.hits[t] ? "1\t" : "0\t") + escape_tabs(r.answers[t]) + "\n";
}

void PasskeyReport::baseline_row(int64_t len, const PasskeyResult& b) {
  std::printf("  %5.1f%% (%2lld/%2lld)", 100 * b.accuracy(), static_cast<long long>(b.correct),
              static_cast<long long>(b.trials));
  s_base.x.push_back(static_cast<double>(len));
  s_base.y.push_back(100 * b.accuracy());
  table += pct(b.accuracy());
}

void PasskeyReport::end_row(int64_t len, const PasskeyResult& r, bool recall) {
  table += "\n";
  std::printf("   [%.1f s]\n", r.seconds);
  if (!standard && cfg.search == KeySearch::Approx) print_approx_search(cfg, r.budget_cut, r.search_rows);
  if (!standard)
    print_trims(cfg, mc.context_miss, r.unique, r.attended, r.adaptive_rows, r.adaptive_blocks, r.adaptive_capped);
  if (cfg.certify || cfg.left_out >= 0) print_certificate(r.certificate, (", length " + std::to_string(len)).c_str());
  if (!standard) {
    print_scoring(cfg, r.keys_scored, r.scored_rows, r.summary_bytes, r.oracle);
    std::printf("answers: %.3g ms per generated token (%lld tokens, after each prompt was read)\n",
                r.answer_tokens ? 1000.0 * r.answer_seconds / static_cast<double>(r.answer_tokens) : 0.0,
                static_cast<long long>(r.answer_tokens));
  }
  if (recall) {
    print_recall(r, mc.n_layer, mc.n_head, "length " + std::to_string(len));
    for (size_t i = 0; i < pooled.recall_hits.size(); ++i) {
      pooled.recall_hits[i] += r.recall_hits[i];
      pooled.recall_queries[i] += r.recall_queries[i];
    }
  }
  std::fflush(stdout);
}

void PasskeyReport::write(const PasskeyFlags& f, PasskeyScoring scoring) const {
  if (!f.png.empty()) {
    plot::LineChartOptions lo;
    lo.title = std::string("pass-key retrieval (") + passkey_scoring_name(scoring) + " scoring)";
    lo.x_label = "prompt length (tokens)";
    lo.y_label = "accuracy (%)";
    lo.log_x = true;
    lo.y_range = std::make_pair(0.0, 100.0);
    lo.markers = true;
    std::vector<plot::Series> series{s_lm};
    if (baseline_window > 0) {
      series.push_back(s_base);
      const int64_t window = baseline_window;
      lo.x_marks.push_back({static_cast<double>(window), "baseline window (" + std::to_string(window) + ")"});
      // Room left of the window's edge, so the mark is not on the frame.
      const auto [shortest, longest] = std::minmax_element(s_lm.x.begin(), s_lm.x.end());
      const double lo_x = std::min(*shortest, static_cast<double>(window)) / 1.5, hi_x = *longest * 1.5;
      lo.x_range = std::make_pair(lo_x, std::max(hi_x, 2 * lo_x));
    }
    plot::line_chart(f.png, series, lo);
    std::printf("wrote %s\n", f.png.c_str());
  }
  if (!f.tsv.empty()) {
    write_file_atomic(f.tsv, table, "passkey --tsv");
    std::printf("wrote %s\n", f.tsv.c_str());
  }
  if (!f.answers.empty()) {
    write_file_atomic(f.answers, answer_table, "passkey --answers");
    std::printf("wrote %s\n", f.answers.c_str());
  }
  if (f.opts.recall) {
    print_recall(pooled, mc.n_layer, mc.n_head, "all lengths");
    std::vector<double> v(pooled.recall_hits.size());
    for (int64_t l = 0; l < mc.n_layer; ++l)
      for (int64_t h = 0; h < mc.n_head; ++h) {
        const double x = pooled.recall(l, h, mc.n_head);
        v[static_cast<size_t>(l * mc.n_head + h)] = x < 0 ? NAN : 100 * x;
      }
    plot::HeatmapOptions ho;
    ho.title = "retrieval recall of the key's block (k " + std::to_string(cfg.k) + ", all lengths)";
    ho.x_label = "head";
    ho.y_label = "layer";
    ho.value_label = "% of answer queries";
    ho.v_min = 0.0;
    ho.v_max = 100.0;
    ho.width = 160 + 90 * static_cast<int>(mc.n_head);
    ho.height = 160 + 90 * static_cast<int>(mc.n_layer);
    plot::heatmap(f.recall_png, static_cast<int>(mc.n_layer), static_cast<int>(mc.n_head), v, ho);
    std::printf("wrote %s (grey: no query with the key's block in the cache)\n", f.recall_png.c_str());
  }
}

// ---- eval ----

EvalRows::EvalRows(const std::string& label, const GPTConfig& mc_, int64_t length_, bool landmark_, int64_t B_)
    : mc(mc_), length(length_), landmark(landmark_), xl(mc_.xl_cache > 0), B(B_) {
  rows =
      "model\ttrain_len\teval_len\tk\tppl\tci_low\tci_high\tl_local\txl_cache\tblocks\tattention_size\t"
      "granularity\tpositions\tcmt_cutoff\tdrop_rate\tblocks_per_step\tunique_per_token\twindows\ttokens\tseconds\t"
      "scorer\tmass_recall\tiou\n";
  model_name = !label.empty()  ? label
               : mc.landmark() ? (mc.context_miss ? "landmark-cmt" : "landmark")
               : xl            ? "xl"
                               : "standard";
  LM_CHECK(model_name.size() <= 64 && model_name.find_first_of("\t\n") == std::string::npos,
           "eval: --label must be at most 64 characters with no tab or newline, got '" << model_name << "'");
}

void EvalRows::add(const BeyondConfig& c, const PerplexityResult& r, const PerplexityInterval& ci) {
  const int64_t l_local = landmark               ? c.chunk_len
                          : xl                   ? mc.block_size
                          : c.standard_local > 0 ? std::min(c.standard_local, length)
                                                 : length;
  const int64_t attention = landmark ? c.chunk_len + c.k * B : xl ? mc.block_size + mc.xl_cache : l_local;
  const OracleAgreement& o = r.oracle;
  char buf[1200];
  std::snprintf(
      buf, sizeof buf,
      "%s\t%lld\t%lld\t%s\t%.4f\t%.4f\t%.4f\t%lld\t%s\t%s\t%lld\t%s\t%s\t%s\t%s\t%s\t%s\t%lld\t%lld\t%.1f\t%s\t%"
      "s\t%s\n",
      model_name.c_str(), (long long)mc.block_size, (long long)length, landmark ? std::to_string(c.k).c_str() : "-",
      r.perplexity(), ci.low, ci.high, (long long)l_local, xl ? std::to_string(mc.xl_cache).c_str() : "-",
      landmark ? (c.capacity > 0 ? std::to_string(c.capacity).c_str() : "all") : "-", (long long)attention,
      landmark ? granularity_name(c.granularity) : "-", landmark ? position_mode_name(c.positions) : "-",
      mc.context_miss ? fmt_g(c.cmt_cutoff).c_str() : "-", mc.context_miss ? fmt_g(r.drop_rate()).c_str() : "-",
      landmark ? fmt_g(r.fetched_per_step()).c_str() : "-", landmark ? fmt_g(r.unique_per_token()).c_str() : "-",
      (long long)r.windows, (long long)r.tokens, r.seconds, landmark ? block_scorer_name(c.scorer) : "-",
      o.rows ? fmt_g(o.recall_sum / static_cast<double>(o.rows)).c_str() : "-",
      o.rows ? fmt_g(o.iou_sum / static_cast<double>(o.rows)).c_str() : "-");
  rows += buf;
}

void EvalRows::write(const std::string& tsv) const {
  if (tsv.empty()) return;
  write_file_atomic(tsv, rows, "eval --tsv");
  std::printf("wrote %s\n", tsv.c_str());
}

PerplexityInterval print_interval(const PerplexityResult& r, int64_t resamples) {
  PerplexityInterval ci = bootstrap_perplexity_interval(r, 0.95, resamples);
  std::printf("perplexity %.4f, 95%% bootstrap interval [%.4f, %.4f] (%lld resamples of the %lld windows)\n",
              r.perplexity(), ci.low, ci.high, (long long)resamples, (long long)r.windows);
  return ci;
}

void print_granularity_header(bool cmt) {
  std::printf("%-8s %-9s %-12s %-3s %-14s %-26s %-13s %-10s%s\n", "Per Head", "Per Token", "Eval. Length", "k",
              "Blocks (all)", "Blocks (per chunk, layer)", "unique/token", "Perplexity", cmt ? "  drop_rate" : "");
}

void print_granularity_row(Granularity g, int64_t length, int64_t k, const PerplexityResult& r, bool cmt) {
  std::printf("%-8s %-9s %-12lld %-3lld %-14lld %-26.1f %-13.3f %-10.4f", g == Granularity::Token ? "no" : "yes",
              g == Granularity::Head ? "no" : "yes", (long long)length, (long long)k, (long long)r.fetched,
              r.fetched_per_step(), r.unique_per_token(), r.perplexity());
  if (cmt) std::printf("  %.4f", r.drop_rate());
  std::printf("\n");
}

std::string granularity_interval(Granularity g, const PerplexityResult& r, const PerplexityInterval& ci) {
  char note[160];
  std::snprintf(note, sizeof note, "%s: perplexity %.4f, 95%% bootstrap interval [%.4f, %.4f]\n", granularity_name(g),
                r.perplexity(), ci.low, ci.high);
  return note;
}

void print_granularity_intervals(const std::string& intervals, int64_t resamples) {
  std::printf("%s(%lld resamples of the windows)\n", intervals.c_str(), (long long)resamples);
}

void print_granularity_note(int64_t chunk_len) {
  std::printf(
      "(chunk %lld; Blocks: blocks retrieved per chunk and layer with a cache, a set shared by the heads of a "
      "token or the tokens of a head counted once; unique/token: distinct blocks per chunk and layer over its "
      "queries)\n",
      (long long)chunk_len);
}

void print_eval_table(const GPTConfig& mc, const BeyondConfig& cfg, const PerplexityResult& r, int64_t length,
                      bool landmark, int64_t B) {
  const bool xl = mc.xl_cache > 0;
  std::printf("%-12s %-8s %-9s %-7s %-3s %-15s %s\n", "Eval. Length", "l_local", "XL cache", "Blocks", "k",
              "Attention Size", "Perplexity");
  if (landmark)
    std::printf("%-12lld %-8lld %-9s %-7s %-3lld %-15lld %.4f\n", (long long)length, (long long)cfg.chunk_len, "None",
                cfg.capacity > 0 ? std::to_string(cfg.capacity).c_str() : "all", (long long)cfg.k,
                (long long)(cfg.chunk_len + cfg.k * B), r.perplexity());
  else if (xl)  // Table 1's XL rows: local length T, an XL cache of M, attention size T + M
    std::printf("%-12lld %-8lld %-9lld %-7s %-3s %-15lld %.4f\n", (long long)length, (long long)mc.block_size,
                (long long)mc.xl_cache, "None", "-", (long long)(mc.block_size + mc.xl_cache), r.perplexity());
  else {
    const int64_t l = cfg.standard_local > 0 ? std::min(cfg.standard_local, length) : length;
    std::printf("%-12lld %-8lld %-9s %-7s %-3s %-15lld %.4f\n", (long long)length, (long long)l, "None", "None", "-",
                (long long)l, r.perplexity());
  }
  if (xl)
    std::printf(
        "(%lld windows, %lld tokens scored: every position of each window, read in pieces of %lld tokens with "
        "the XL cache carried across, empty at each window's start; %.4f nats/token, %.1f s; attention size = "
        "local length + XL cache)\n",
        (long long)r.windows, (long long)r.tokens, (long long)mc.block_size, r.nll, r.seconds);
  else
    std::printf("(%lld windows, %lld tokens scored: every position of each window; %.4f nats/token, %.1f s; %s)\n",
                (long long)r.windows, (long long)r.tokens, r.nll, r.seconds,
                !mc.landmark() && landmark ? "a standard model read in blocks of F; attention size = chunk + k F"
                : landmark                 ? (cfg.kv_f16 ? "attention size = chunk + k (F + 1); block K/V in f16"
                                                         : "attention size = chunk + k (F + 1)")
                : cfg.standard_local > 0 && cfg.standard_local < length
                    ? "each window read in independent pieces of l_local tokens, no memory between them"
                    : "each window read at once");
}

void print_paired(const std::string& paired, int64_t other_length, const PairedRatio& p, int64_t resamples) {
  std::printf(
      "paired with %s (windows of %lld): on the %lld tokens both scored (%lld spans of %lld), perplexity "
      "%.4f here against %.4f there, ratio %.4f, 95%% paired bootstrap interval [%.4f, %.4f] (%lld "
      "resamples of the spans)\n",
      paired.c_str(), (long long)other_length, (long long)p.tokens, (long long)p.spans, (long long)p.span_length,
      p.ppl_a, p.ppl_b, p.ratio, p.low, p.high, (long long)resamples);
  std::printf("paired ratio=%.4f ci_low=%.4f ci_high=%.4f ppl=%.4f ppl_other=%.4f spans=%lld span_length=%lld\n",
              p.ratio, p.low, p.high, p.ppl_a, p.ppl_b, (long long)p.spans, (long long)p.span_length);
}

void print_retrieval_summary(const GPTConfig& mc, const BeyondConfig& cfg, const PerplexityResult& r, bool landmark) {
  if (landmark)
    std::printf(
        "retrieval (%s granularity): %lld blocks retrieved in all, %.1f per chunk and layer (Table 2's count), "
        "%.3f unique blocks per token, over %lld (chunk, layer) pairs with a cache\n",
        granularity_name(cfg.granularity), (long long)r.fetched, r.fetched_per_step(), r.unique_per_token(),
        (long long)r.retrieval_steps);
  if (landmark && cfg.search == KeySearch::Approx) print_approx_search(cfg, r.budget_cut, r.search_rows);
  if (landmark)
    print_trims(cfg, mc.context_miss, r.unique, r.attended, r.adaptive_rows, r.adaptive_blocks, r.adaptive_capped);
  if (landmark && (cfg.certify || cfg.left_out >= 0)) print_certificate(r.certificate, "");
  if (landmark) print_scoring(cfg, r.keys_scored, r.scored_rows, r.summary_bytes, r.oracle);
  if (mc.context_miss)
    std::printf(
        "perplexity=%.4f drop_rate=%.4g (CMT cutoff %g: share of the %lld (query, layer, head) CMT scores below "
        "it)\n",
        r.perplexity(), r.drop_rate(), cfg.cmt_cutoff, (long long)r.cmt_rows);
}

void print_unique_blocks(const PerplexityResult& r, const BeyondConfig& cfg, const std::string& hist) {
  if (!r.unique_blocks.empty()) {
    double mean = 0;
    for (int64_t u : r.unique_blocks) mean += static_cast<double>(u);
    mean /= static_cast<double>(r.unique_blocks.size());
    std::printf("unique blocks retrieved in the penultimate chunk: mean %.2f of %lld cached (%s granularity)\n", mean,
                (long long)r.cached_at_penultimate, granularity_name(cfg.granularity));
    const std::vector<double> by_layer = r.unique_by_layer();
    std::printf("  by layer:");
    for (size_t l = 0; l < by_layer.size(); ++l)
      std::printf(" layer %zu %.2f%s", l, by_layer[l], l + 1 < by_layer.size() ? "," : "\n");
    if (!hist.empty()) {
      plot::HistogramOptions o;
      o.title = "unique retrieved blocks, penultimate chunk (" + std::string(granularity_name(cfg.granularity)) + ")";
      o.x_label = "unique blocks (of " + std::to_string(r.cached_at_penultimate) + " cached)";
      o.y_label = "count (windows x layers)";
      o.integer_bins = true;
      std::vector<double> v(r.unique_blocks.begin(), r.unique_blocks.end());
      plot::histogram(hist, v, 0, o);
      std::printf("wrote %s\n", hist.c_str());
    }
  }
}

}  // namespace app
}  // namespace lm
