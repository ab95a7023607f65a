// metrics.h: reading the training log (one JSON object per line in metrics.jsonl, written by
// train()) and turning it into a loss-curve PNG. This is the only place that knows both the log
// format and the plot library; the training loop writes lines and never draws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lm {

struct MetricsLog {
  std::vector<double> step, loss, lr, tokens_per_s;  // one entry per training step
  std::vector<double> val_step, val_loss;            // one entry per evaluation
};

// Throws lm::Error naming the file and line for a line that is not a JSON object with either
// "loss" or "val_loss". Blank lines, and the record of an --init-from run's parent (an object with
// "parent"), are skipped.
MetricsLog read_metrics(const std::string& path);

// Training loss (raw and smoothed) and validation loss against step, written to png_path.
// Other logs can be overlaid (e.g. standard vs landmark attention), each labelled. log_y: a log
// loss axis, which keeps a loss falling from 6 to 0.1 readable all the way down. offsets (one per
// log, or none): steps added to that log's steps, so a run that continues another (--init-from)
// is drawn where its parent stopped.
void plot_loss_curves(const std::vector<std::string>& metrics_paths, const std::vector<std::string>& labels,
                      const std::string& png_path, const std::string& title, bool log_y = false,
                      const std::vector<int64_t>& offsets = {});

// A table of numbers read from a tab-separated file (what `passkey --tsv` and the demos write):
// a header line of column names, then rows of numbers; "-" or "nan" is a missing value (NaN).
// Throws lm::Error naming the file, line and column for a row of the wrong width or a cell that
// is not a number.
struct NumberTable {
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;  // rows[i][j]: column j of row i
};
NumberTable read_number_table(const std::string& path);

// Every column after the first against the first, one line each, labelled by the header
// (`landmark plot-table`): e.g. pass-key accuracy per model against prompt length.
struct TableChartOptions {
  std::string title, x_label, y_label;
  bool log_x = false;
  std::optional<std::pair<double, double>> y_range;
};
void plot_number_table(const std::string& tsv_path, const std::string& png_path, const TableChartOptions& options);

}  // namespace lm
