// metrics.h: reading the training log (one JSON object per line in metrics.jsonl, written by
// train()) and turning it into a loss-curve PNG. This is the only place that knows both the log
// format and the plot library; the training loop writes lines and never draws.
#pragma once

#include <string>
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
// loss axis, which keeps a loss falling from 6 to 0.1 readable all the way down.
void plot_loss_curves(const std::vector<std::string>& metrics_paths, const std::vector<std::string>& labels,
                      const std::string& png_path, const std::string& title, bool log_y = false);

}  // namespace lm
