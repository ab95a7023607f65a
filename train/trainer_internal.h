// trainer_internal.h: internal to train/: what the files of train() share. The loop is trainer.cpp;
// its pieces: the schedule (trainer_schedule.cpp), the batch loss and validation (trainer_batch.cpp),
// Transformer-XL segments (trainer_xl.cpp), ranks (trainer_ranks.cpp), checkpoint and resume
// (trainer_checkpoint.cpp), --init-from (trainer_init_from.cpp), options and data (trainer_setup.cpp),
// the log and metrics (trainer_log.cpp). Not a public interface: callers outside train/ use trainer.h.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "landmark/layout.h"
#include "nn/checkpoint.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "sparse/attention.h"
#include "tensor/files.h"
#include "tensor/rng.h"
#include "train/distributed.h"
#include "train/landmark_batch.h"
#include "train/token_file.h"
#include "train/tokenizer.h"
#include "train/trainer.h"

namespace lm::trainer_internal {

// ---- options and data (trainer_setup.cpp) ----

// The options' own checks (each message names the flag); the XL ones are check_xl_options. With
// --init-from those that read the model config wait for read_parent (the keys not given are the
// parent's).
void validate(const TrainOptions& o);

// The tokenizer and both token files of --data, checked against each other.
struct TrainData {
  std::string tok_path;
  std::unique_ptr<Tokenizer> tok;
  TokenFile train, val;
  std::vector<int64_t> train_starts, val_starts;  // with --doc-starts: where windows may begin
  const std::vector<int64_t>* train_windows() const { return train_starts.empty() ? nullptr : &train_starts; }
  const std::vector<int64_t>* val_windows() const { return val_starts.empty() ? nullptr : &val_starts; }
  explicit TrainData(const std::string& dir);
};

// --doc-starts: the positions right after each "\n" token where a whole row of `row` tokens fits.
void find_document_starts(TrainData& data, const GPTConfig& mc, int64_t row);

// The run must fit: the batch splits evenly across the ranks, and each token file holds a row and
// its next-token targets.
void check_run_fits(const TrainOptions& o, const TrainData& data, int64_t row, const dist::World& world);

// ---- the batch loss (trainer_batch.cpp; its XL members in trainer_xl.cpp, its shards in
// trainer_ranks.cpp) ----

// One batch through the model: plain windows for a standard model; for a landmark model,
// windows with landmarks (and CMT / jumps as configured) and landmark attention as the core.
// A Transformer-XL model reads segments of S tokens as S / T windows, the cache carried from one to
// the next (forward_xl).
struct BatchLoss {
  const TrainOptions& o;
  const GPTConfig& mc;
  LandmarkDataOptions lmo;
  std::shared_ptr<CmtStats> cmt_stats = std::make_shared<CmtStats>();  // validation drop rate
  // --train-top-k-gates all: the left-out share per layer, summed over the step's micro-batches
  // (logged and reset after each step)
  std::shared_ptr<LeftOutStats> left_out = std::make_shared<LeftOutStats>();
  // The attention core of a landmark batch: dense, or top-k with --train-top-k (trainer_batch.cpp).
  AttentionFn attention_core(const LandmarkLayout& layout, bool training) const;
  // Data parallel (distributed.h): every rank draws the whole batch (cheap: token ids) and keeps
  // its rows, rank r of R the r-th of R equal slices, so R ranks read exactly the batch one would.
  int rank = 0, ranks = 1;
  Tensor shard(const Tensor& t) const;
  // The mean loss of one batch (validation; training goes through forward_backward).
  // starts: where windows may begin (document_starts; nullptr: anywhere)
  Var operator()(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed, uint64_t cursor,
                 bool training) const;
  // ranks x (targets in this rank's rows) / (targets in the batch), for targets y (B, T).
  double shard_weight(const Tensor& y) const;

  // One training micro-batch, forward and backward: the gradient of its mean loss divided by
  // grad_accum is added into the parameters' .grad; returns the mean loss. A non-finite loss stops
  // the run before its backward, naming the step.
  double forward_backward(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                          uint64_t cursor, int64_t step) const;

  // Transformer-XL (trainer_xl.cpp). The reading of one batch of segments: rows of S tokens at the
  // sampler's starts, read as S / T windows in order, the cache empty at the first; each window's
  // mean loss goes to on_window(w, loss) before the next window is read. Returns the number of
  // windows.
  int64_t xl_windows(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                     uint64_t cursor, const std::function<void(int64_t, Var)>& on_window) const;
  // operator() for an XL model: the mean of the windows' mean losses.
  Var xl_mean_loss(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                   uint64_t cursor) const;
  // forward_backward for an XL model, window by window.
  double xl_forward_backward(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                             uint64_t cursor, int64_t step) const;
};

BatchLoss make_batch_loss(const TrainOptions& o, const GPTConfig& mc, const Tokenizer& tok,
                          const std::string& tok_path);

// A training loss that is not finite stops the run, naming the step (0-based here, 1-based in words).
void check_loss(double loss, int64_t step);

// Mean loss over a fixed set of validation windows (same windows at every evaluation).
double evaluate(GPT& model, const TokenFile& val, const std::vector<int64_t>* starts, const TrainOptions& o,
                const BatchLoss& batch_loss);

// ---- Transformer-XL segments (trainer_xl.cpp) ----

// --train-top-k against the run's model (the parent's with --init-from, the checkpoint's with
// --resume): a landmark model without a CMT (trainer_setup.cpp).
void check_sparse_options(const TrainOptions& o, const GPTConfig& mc);

// The checks of --xl-cache and --segment, which come together (part of validate).
void check_xl_options(const TrainOptions& o);

// ---- ranks, data parallel (trainer_ranks.cpp) ----

// Validation: each rank scored its rows of the same batches; the mean over ranks of `mean`, and
// the CMT counts summed into `cmt`.
double validation_over_ranks(double mean, CmtStats& cmt, int ranks);
// A training step: the gradients and the loss averaged over the ranks; returns the loss.
double average_over_ranks(GPT& model, double loss, int ranks);
// With several ranks: how the batch is shared and how many gradient bytes each step sums.
void log_data_parallel(std::ostream& log, GPT& model, const TrainOptions& o, const dist::World& world);
// A stop asked for on any rank (a signal) stops them all after this step.
bool stop_on_any_rank(bool stop, const dist::World& world);
// With several ranks, every rank takes rank 0's clock and its over-the-limit flag.
void follow_root_clock(double& clock_s, bool& over_limit, const dist::World& world);

// ---- the schedule (trainer_schedule.cpp) ----

// The learning rate at schedule position s (schedule_position: steps, or the clock when a time
// limit is set and the clock is further along).
double scheduled_lr(const TrainOptions& o, int64_t s);

// The schedule against the clock (--time-limit). Every rank follows rank 0's clock, so all place
// the schedule, and stop, at the same step.
struct RunClock {
  const double t_start, limit_s;  // when the run started; the limit in seconds (0: none)
  double avg_step = 0;            // seconds per step, a running average
  bool over_limit = false;        // a step ended past the time limit: the next one is the last
  ScheduleClock schedule;

  RunClock(double start_s, double limit) : t_start(start_s), limit_s(limit) {}

  // The schedule position for a step starting at t0. With a time limit, the schedule is placed
  // where this step is expected to end, so the step that reaches the limit runs at the schedule's
  // final learning rate and is the last one. A step that overruns the limit (a slow step) is
  // followed by one more at the final rate.
  int64_t position(int64_t step, int64_t steps, double t0, const dist::World& world);
};

// ---- checkpoint and resume (trainer_checkpoint.cpp) ----

// Where a run starts: fresh, or from a checkpoint whose model config and training settings
// replace the command line's (a resumed run is the run that was interrupted; only --steps, to
// extend it, and bookkeeping flags such as output, evaluation, checkpoint cadence and time limits
// come from the command line, and a model or training flag given explicitly must agree with the
// checkpoint), or from a parent's weights (--init-from: the parent's architecture where the
// command line gives none).
struct Start {
  GPTConfig model;
  Checkpoint ck;     // empty for a fresh start
  int64_t step = 0;  // --resume: the checkpoint's step, data cursor and generator state
  uint64_t cursor = 0;
  RngState rng;
  Checkpoint parent;             // --init-from: the checkpoint whose weights the run starts from
  nlohmann::json parent_record;  // path, CRC-32, step and attention of the parent (null: none);
                                 // kept in every checkpoint of the run, resumed ones included
  std::string inherited;         // --init-from: the log line naming what was taken from the parent
};

Start resolve_start(TrainOptions& o, const Tokenizer& tok, std::ostream& log);

// What a checkpoint records besides the tensors: everything a resumed run needs (trainer.h).
nlohmann::json checkpoint_metadata(const TrainOptions& o, const GPTConfig& mc, const Tokenizer& tok, int64_t step,
                                   uint64_t cursor, const nlohmann::json& parent);

// A count of the metadata: a JSON whole number in [0, max] (`max_text` says max in words).
uint64_t meta_count(const nlohmann::json& m, const std::string& name, uint64_t max, const char* max_text,
                    const std::string& where);

// The model config stored in a checkpoint, checked (every key, its kind and range), and checked
// against the data's tokenizer: the one it was trained with (fingerprint) and its vocabulary.
GPTConfig stored_model(const Checkpoint& ck, const Tokenizer& tok, const std::string& path, const std::string& where,
                       const std::string& data_dir);

// A JSON value as a message shows it: a string without its quotes.
std::string shown(const nlohmann::json& v);

// ---- --init-from (trainer_init_from.cpp) ----

// The parent of --init-from into `st`: loaded, checked against the data, its architecture where
// the command line gives none (and, for an XL parent, its --segment), and its record (path,
// CRC-32, step, attention); then the options' checks on the child.
void read_parent(Start& st, TrainOptions& o, const Tokenizer& tok, std::ostream& log);

// init_from_parent on a freshly built model, and the log line that says what it did.
std::string start_from_parent(GPT& model, const TrainOptions& o, const Start& start, const Tokenizer& tok);

// ---- the log and the metrics (trainer_log.cpp) ----

// The two opening lines: the model and where it runs, the data and where the run starts.
void log_header(std::ostream& log, const TrainOptions& o, const GPTConfig& mc, GPT& model, const TrainData& data,
                int64_t step);

// Rank 0 points `metrics` at out_dir/metrics.jsonl (other ranks leave it writing nowhere). On
// resume, lines past the checkpoint's step (written before a kill, and about to be written again)
// are dropped first, so every step appears once.
void open_metrics(const TrainOptions& o, const std::string& path, int64_t step, const dist::World& world,
                  std::unique_ptr<AppendFile>& file, std::ostream& metrics);

// One step's line of metrics.jsonl.
// --train-top-k-gates all: the step's left-out share per layer as a metrics field
// (,"left_out_mass":[layer 0, layer 1, ...]) in `field`, the stats reset; returns the mean over
// layers for the progress line, or -1 (and an empty field) when none were recorded.
double take_left_out(LeftOutStats& st, std::string& field);
// One step's metrics line; `extra` (a JSON field list starting with a comma, or "") goes at its end.
void log_step_metrics(std::ostream& metrics, int64_t step, double loss, double lr, double gnorm, double tps,
                      double elapsed, int ranks, const std::string& extra = "");

// The progress line: the attention kind ("xl" for a Transformer-XL model), step, loss, learning
// rate, speed, elapsed and the time left (by steps, or by the time limit when that comes first).
std::string progress_line(const TrainOptions& o, const GPTConfig& mc, int64_t step, double loss, double lr, double tps,
                          double elapsed, double avg_step);

// Validation: the loss (and, with a CMT, its drop rate) into the metrics log, the result and the
// progress log.
void validate_and_log(GPT& model, const TrainData& data, const TrainOptions& o, const GPTConfig& mc,
                      const BatchLoss& batch_loss, int64_t step, std::ostream& metrics, std::ostream& log,
                      TrainResult& res);

}  // namespace lm::trainer_internal
