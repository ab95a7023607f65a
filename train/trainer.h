// trainer.h: the training loop. It owns nothing clever: sample a batch, forward, backward,
// (clip), AdamW with the scheduled learning rate, log one line, and now and then evaluate on
// held-out data and checkpoint. Everything needed to continue bit for bit is in the checkpoint:
// weights, AdamW moments and step, the RNG state, the data cursor, the configs and the tokenizer.
// Plots are made afterwards from the metrics log (train/metrics.h), not here.
#pragma once

#include <atomic>
#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/gpt.h"
#include "nn/gpt_io.h"  // configs as JSON, weights from checkpoints (shared with infer/)
#include "nn/optim.h"

namespace lm {

class Tokenizer;

struct TrainOptions {
  GPTConfig model;
  std::string data_dir;              // from `landmark prepare`: tokenizer.json, train.tokens, val.tokens
  std::string out_dir = "runs/run";  // checkpoint.safetensors, metrics.jsonl (+ loss.png by the CLI)
  int64_t batch_size = 8;
  int64_t steps = 1000;     // total optimizer steps (the schedule spans these)
  bool steps_given = true;  // on resume: false takes the total from the checkpoint (the CLI
                            // when --steps is absent), true extends or shortens the run to `steps`
  int64_t grad_accum = 1;   // micro-batches per step
  double lr = 2e-3;
  std::string schedule = "one-cycle";  // one-cycle (the paper's) | cosine | constant
  int64_t warmup = 100;                // cosine only
  double min_lr = 4e-4;                // cosine only
  AdamWConfig adamw;
  double grad_clip = 1.0;    // 0 disables
  int64_t eval_every = 100;  // 0 disables periodic validation
  int64_t eval_batches = 8;
  int64_t ckpt_every = 500;   // 0: only at the end / on interrupt
  double time_limit_min = 0;  // > 0: stop (and checkpoint) after this many minutes; the learning-
                              // rate schedule then follows the clock when it leads the steps
                              // (ScheduleClock), so a cut run still ends annealed
  int64_t stop_at = 0;        // > 0: stop (and checkpoint) on reaching this step; resume later
  uint64_t seed = 1337;
  bool doc_starts = false;  // every training and validation window starts at a document (right
                            // after a "\n" token, or at the file's start) instead of anywhere
  Device device = Device::CPU;
  std::string resume;     // checkpoint to continue from ("" = start fresh)
  std::string init_from;  // a new run starting from this checkpoint's weights (fine-tuning;
                          // init_from_parent), with a fresh optimizer and schedule
  // The keys of the model config and the training settings (and "seed") that the command line gave
  // explicitly; the other values above are defaults. With --resume each must equal the
  // checkpoint's (an error names the key and both values), and every other comes from it. With
  // --init-from, n_layer, n_embd, n_head, block_size, attention, landmark_every, xl_cache,
  // rotary_base, ln_eps and bias not listed are the parent's (the log lists them; an XL parent's
  // segment too), and n_layer, n_embd and n_head must be.
  std::set<std::string> given;
  bool quiet = false;      // no progress lines
  double log_every_s = 0;  // a progress line at most this often (0: every step)
  // Landmark models only (model.landmark(); F and the CMT switch live in model):
  double cmt_prob = 0.5;  // P_CMT, chance that a landmark is CMT-controlled in training
  int64_t jump_max = 1;   // p_jump for positional jumps in training (1 = off)
  double cmt_cutoff = 0;  // validation with a CMT: drop controlled blocks when P(CMT) < this
  // Training with the cache (beyond the paper; sparse/attention.h): K > 0 trains (and validates)
  // with top-k landmark attention, each query reaching the tokens of its K best-scored earlier
  // blocks only; 0 is the paper's dense training. The gate variant: "chosen" or "all".
  int64_t train_top_k = 0;
  std::string train_top_k_gates = "chosen";
  // Transformer-XL models only (model.xl_cache = M > 0): each batch row is a contiguous segment of
  // this many tokens, a multiple of model.block_size T, read as segment / T consecutive windows with
  // the cache carried from one to the next (empty at the segment's start); one optimizer step per
  // micro-batch of segments, the loss over every token. 0 = no segments (every other model).
  int64_t segment = 0;
};

// The tokens one batch row reads: the segment of an XL model, else the window T.
int64_t row_tokens(const TrainOptions& o, const GPTConfig& mc);

struct TrainResult {
  int64_t step = 0;  // steps completed in total (incl. before a resume)
  double last_loss = 0, last_val_loss = -1;
  double last_cmt_drop_rate = -1;  // of the last validation, for CMT models
  std::string stop_reason;         // "done", "time limit", "stop-at", "interrupted"
  std::string checkpoint;          // path of the last checkpoint written
  double seconds = 0;              // wall time of this call
};

// Where the learning-rate schedule stands after `step` of `total` steps, `elapsed_s` seconds into
// a run limited to `limit_s` seconds (0: no limit): the further of step and the time fraction
// elapsed/limit of `total`, within [0, total - 1]. Without a limit a run is the same on every
// machine (bit for bit); with one, a slower machine moves through the schedule by the clock.
int64_t schedule_position(int64_t step, int64_t total, double elapsed_s, double limit_s);

// The schedule position a run uses, step after step: the step count until the clock's position
// (schedule_position) leads it by a margin of 2% of the schedule (at least one step), and from
// then on the clock's (never behind the steps). The margin keeps a run that is on course to
// finish its steps within the limit off the clock, although its first steps are slower (caches
// and pages warming up) and put the clock a step or two ahead: such a run is then the same bit for
// bit on every machine and thread count, as without a limit. A run that is really too slow falls
// behind by more than the margin early and follows the clock from there.
struct ScheduleClock {
  bool following = false;  // the clock has led by the margin: it drives the schedule from now on
  int64_t position(int64_t step, int64_t total, double elapsed_s, double limit_s);
};

// Set from a SIGINT handler (or a test) to make train() stop after the current step, checkpoint
// and return with stop_reason "interrupted".
std::atomic<bool>& stop_requested();

// Runs (or resumes) training. Progress lines go to `log`; metrics to out_dir/metrics.jsonl.
// Throws lm::Error on bad options, missing data, a tokenizer mismatch, or a non-finite loss or
// gradient (naming the step and the tensor).
TrainResult train(const TrainOptions& opts, std::ostream& log);

// Parameter and optimizer state in and out of checkpoints (used by train() and by tests).
void save_training_checkpoint(const std::string& path, GPT& model, AdamW& opt, const nlohmann::json& metadata);
// Loads weights (and optimizer moments when `opt` is given) into an already-built model.
void load_model_weights(const Checkpoint& ckpt, GPT& model, AdamW* opt);

// train --init-from: the weights of `parent` (a training checkpoint) copied into `model`, which was
// built fresh from the new run's config. Every parameter the parent has must have the same shape
// (an error names the tensor and both shapes); parameters the parent lacks (a block type it did
// not have) keep their fresh initialisation and are listed. Token embedding rows that the parent
// never read (the landmark token's when it was a standard model, the context-miss token's when it
// had none) are set to the mean of the regular tokens' rows: an input that looks like an average
// token to the pretrained layers, and an output logit near the average one, where the parent's own
// row has only been pushed down (as the target it never was) and shrunk by weight decay.
struct InitReport {
  std::vector<std::string> copied, fresh, unused;     // parameter names: from the parent, kept fresh, parent-only
  std::vector<std::pair<std::string, int32_t>> rows;  // (token, id) whose embedding row was set to the mean
};
InitReport init_from_parent(GPT& model, const Checkpoint& parent, const Tokenizer& tok);

}  // namespace lm
