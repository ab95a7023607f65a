// trainer_log.cpp: what a run writes as it goes (trainer.h): the opening lines and the progress
// line of the log, and the lines of metrics.jsonl (each step's loss, each validation), reopened on
// resume without the steps to be done again. Not the reading of metrics.jsonl or the loss plot
// (metrics.h), nor when the loop writes (trainer.cpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

#include "tensor/cpu/parallel.h"
#include "train/file_io.h"
#include "train/trainer_internal.h"

namespace lm::trainer_internal {
namespace {

std::string hms(double s) {
  long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string threads_note() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  return std::to_string(cpu::num_threads()) + " CPU thread(s) (OMP_NUM_THREADS=" + (env ? env : "unset") + ")";
}

// Rewrites metrics.jsonl without the lines whose "step" is past `step` (temp file + rename). A
// missing file is fine (a resume into a fresh --out); a line that is not JSON is kept as it is.
void drop_metrics_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  if (dropped > 0) write_file_atomic(path, kept);
}

}  // namespace

// The two opening lines: the model and where it runs, the data and where the run starts.
void log_header(std::ostream& log, const TrainOptions& o, const GPTConfig& mc, GPT& model, const TrainData& data,
                int64_t step) {
  log << "training " << model.num_parameters() << " parameters (" << mc.n_layer << " layers, d " << mc.n_embd << ", "
      << mc.n_head << " heads, T " << mc.block_size << ", vocab " << mc.vocab_size << ", "
      << attention_kind_name(mc.attention) << " attention"
      << (mc.landmark() ? " every " + std::to_string(mc.landmark_every) + (mc.context_miss ? " + CMT" : "") : "")
      << (mc.xl_cache > 0 ? " with an XL cache of " + std::to_string(mc.xl_cache) : "")
      << (o.train_top_k > 0
              ? ", trained top-" + std::to_string(o.train_top_k) + " with " + o.train_top_k_gates + " gates"
              : "")
      << ") on " << device_name(o.device) << ", " << threads_note()
      << (dist::world().size > 1 ? ", " + std::to_string(dist::world().size) + " ranks (" + dist::backend_name() + ")"
                                 : "")
      << "\n"
      << "data: " << data.train.size() << " train / " << data.val.size() << " val tokens"
      << (o.doc_starts ? std::string(mc.xl_cache > 0 ? " (segments" : " (windows") + " start at one of " +
                             std::to_string(data.train_starts.size()) + " / " + std::to_string(data.val_starts.size()) +
                             " documents)"
                       : "")
      << (mc.xl_cache > 0 ? "; rows are segments of " + std::to_string(o.segment) + " tokens read as " +
                                std::to_string(o.segment / mc.block_size) + " windows, the cache carried across"
                          : "")
      << "; " << o.batch_size * row_tokens(o, mc) * o.grad_accum << " tokens per step; "
      << (!o.resume.empty()     ? "resuming at step " + std::to_string(step)
          : o.init_from.empty() ? "fresh start"
                                : "a new run from the weights of " + o.init_from)
      << (o.time_limit_min > 0 ? "; at most " + hms(60.0 * o.time_limit_min) +
                                     ", the schedule following the clock when the steps fall behind it"
                               : "")
      << "\n";
  if (!data.train.checksummed() || !data.val.checksummed())
    log << "note: the token files in " << o.data_dir << " have no CRC-32 (written before version 2): read unverified\n";
}

// Rank 0 points `metrics` at out_dir/metrics.jsonl (other ranks leave it writing nowhere), through
// the checked open of tensor/files.h (no link, FIFO, device or directory there; whole lines; a
// failed write is an error, not a lost line). On resume, lines past the checkpoint's step
// (written before a kill, and about to be written again) are dropped first, so every step appears
// once.
void open_metrics(const TrainOptions& o, const std::string& path, int64_t step, const dist::World& world,
                  std::unique_ptr<AppendFile>& file, std::ostream& metrics) {
  if (!world.root()) return;
  std::filesystem::create_directories(o.out_dir);
  require_replaceable_output(path, "train: the metrics log");  // before reading it for the resume
  if (!o.resume.empty()) drop_metrics_after(path, step);
  file = std::make_unique<AppendFile>(path, o.resume.empty(), "train: the metrics log");
  metrics.rdbuf(file.get());
  metrics.exceptions(std::ios::badbit);  // a failed write reaches the caller as the file's error
}

void log_step_metrics(std::ostream& metrics, int64_t step, double loss, double lr, double gnorm, double tps,
                      double elapsed, int ranks, const std::string& extra) {
  metrics << "{\"step\":" << step << ",\"loss\":" << std::setprecision(8) << loss << ",\"lr\":" << lr
          << ",\"grad_norm\":" << gnorm << ",\"tokens_per_s\":" << std::setprecision(6) << tps
          << ",\"elapsed_s\":" << elapsed << ",\"ranks\":" << ranks << extra << "}\n";
}

double take_left_out(LeftOutStats& st, std::string& field) {
  field.clear();
  if (st.rows.empty()) return -1;
  std::ostringstream os;
  os << ",\"left_out_mass\":[" << std::setprecision(6);
  double total = 0;
  for (size_t l = 0; l < st.rows.size(); ++l) {
    os << (l ? "," : "") << st.mean(l);
    total += st.mean(l);
  }
  os << "]";
  field = os.str();
  const double mean = total / static_cast<double>(st.rows.size());
  st = LeftOutStats{};
  return mean;
}

// The progress line: the attention kind ("xl" for a Transformer-XL model), step, loss, learning
// rate, speed, elapsed and the time left (by steps, or by the time limit when that comes first).
std::string progress_line(const TrainOptions& o, const GPTConfig& mc, int64_t step, double loss, double lr, double tps,
                          double elapsed, double avg_step) {
  double eta = avg_step * static_cast<double>(o.steps - step);
  if (o.time_limit_min > 0) eta = std::min(eta, std::max(0.0, 60.0 * o.time_limit_min - elapsed));
  char line[240];
  std::snprintf(line, sizeof line, "%s step %6lld/%lld | loss %.4f | lr %.2e | %7.0f tok/s | elapsed %s | ETA %s",
                mc.xl_cache > 0 ? "xl" : attention_kind_name(mc.attention), static_cast<long long>(step),
                static_cast<long long>(o.steps), loss, lr, tps, hms(elapsed).c_str(), hms(eta).c_str());
  return line;
}

// Validation: the loss (and, with a CMT, its drop rate) into the metrics log, the result and the
// progress log.
void validate_and_log(GPT& model, const TrainData& data, const TrainOptions& o, const GPTConfig& mc,
                      const BatchLoss& batch_loss, int64_t step, std::ostream& metrics, std::ostream& log,
                      TrainResult& res) {
  res.last_val_loss = evaluate(model, data.val, data.val_windows(), o, batch_loss);
  metrics << "{\"step\":" << step << ",\"val_loss\":" << std::setprecision(8) << res.last_val_loss;
  if (mc.context_miss) {
    res.last_cmt_drop_rate = batch_loss.cmt_stats->drop_rate();
    metrics << ",\"cmt_cutoff\":" << o.cmt_cutoff << ",\"cmt_drop_rate\":" << res.last_cmt_drop_rate;
  }
  metrics << "}\n";
  log << "step " << step << " | validation loss " << std::fixed << std::setprecision(4) << res.last_val_loss;
  if (mc.context_miss) log << " | CMT cutoff " << o.cmt_cutoff << ", drop rate " << res.last_cmt_drop_rate;
  log << std::defaultfloat << "\n" << std::flush;
}

}  // namespace lm::trainer_internal
