// trainer.cpp: the training loop of train() (trainer.h): a step of grad_accum micro-batches,
// clipping and AdamW, then the log line, validation and checkpoint when they are due. Not here: the
// schedule (trainer_schedule.cpp), the batch loss (trainer_batch.cpp, trainer_xl.cpp), ranks
// (trainer_ranks.cpp), checkpoints and resume (trainer_checkpoint.cpp, trainer_init_from.cpp),
// the checks of options and data (trainer_setup.cpp), what the log and metrics say (trainer_log.cpp).
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <ostream>
#include <string>
#include <utility>

#include "autograd/functions.h"
#include "nn/gpt_io.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "train/distributed.h"
#include "train/tokenizer.h"
#include "train/trainer_internal.h"

namespace lm {

using namespace trainer_internal;

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Name of the first parameter whose gradient holds a NaN or an infinity ("" if none).
std::string first_nonfinite_grad(GPT& model) {
  for (auto& [name, p] : model.named_parameters()) {
    if (!p->grad().defined()) continue;
    // x * 0 is 0 for every finite x and NaN for NaN and +-inf: one reduction per tensor.
    if (!std::isfinite(sum(mul(p->grad(), 0.0)).item())) return name;
  }
  return "";
}

// One optimizer step: grad_accum micro-batches, clipping, AdamW. Returns {loss, gradient norm}.
std::pair<double, double> train_step(GPT& model, AdamW& opt, const TrainData& data, const BatchLoss& batch_loss,
                                     const TrainOptions& o, uint64_t& cursor, int64_t step, double lr) {
  model.zero_grad();
  double loss_value = 0;
  for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
    const double lv = batch_loss.forward_backward(model, data.train, data.train_windows(), o.seed, cursor, step);
    cursor += static_cast<uint64_t>(o.batch_size);
    loss_value += lv / static_cast<double>(o.grad_accum);
  }
  if (batch_loss.ranks > 1) loss_value = average_over_ranks(model, loss_value, batch_loss.ranks);
  const double gnorm = o.grad_clip > 0 ? clip_grad_norm(model, o.grad_clip) : grad_norm(model);
  if (!std::isfinite(gnorm)) {
    const std::string bad = first_nonfinite_grad(model);
    LM_FAIL("train: non-finite gradient at step " << step + 1 << " in tensor " << (bad.empty() ? "(unknown)" : bad));
  }
  opt.step(lr);
  return {loss_value, gnorm};
}

// The model, optimizer and position of a run: built fresh from the seed, or restored from the
// checkpoint (weights, AdamW moments and step, data cursor, RNG state), then moved to the device.
// Seeds the global generator, then hands back the config: the model's weights are the first draws.
const GPTConfig& seeded(const TrainOptions& o, const GPTConfig& c) {
  manual_seed(o.seed);
  return c;
}

struct State {
  GPT model;
  AdamW opt;
  int64_t step = 0;
  uint64_t cursor = 0;
  std::string init_note;  // --init-from: what came from the parent (printed after the header)
  State(const TrainOptions& o, const Start& start, const Tokenizer& tok)
      : model(seeded(o, start.model)), opt(model, o.adamw) {
    if (!o.init_from.empty()) init_note = start_from_parent(model, o, start, tok);
    if (!o.resume.empty()) {
      load_model_weights(start.ck, model, &opt);
      step = start.step;
      cursor = start.cursor;
      opt.set_steps(step);
      global_rng() = start.rng;
    }
    model.to(o.device);
    opt.to(o.device);
  }
};

}  // namespace

TrainResult train(const TrainOptions& opts, std::ostream& log_all) {
  TrainOptions o = opts;  // on resume, the training settings are replaced by the checkpoint's
  validate(o);
  // Data parallel: rank 0 alone prints, writes metrics and checkpoints; every rank trains.
  const dist::World& world = dist::world();
  std::ostream null_out(nullptr);
  std::ostream& log = world.root() ? log_all : null_out;
  TrainData data(o.data_dir);
  const Start start = resolve_start(o, *data.tok, log);
  const GPTConfig& mc = start.model;
  mc.validate();
  check_sparse_options(o, mc);
  const int64_t row = row_tokens(o, mc);
  check_run_fits(o, data, row, world);
  if (o.doc_starts) find_document_starts(data, mc, row);
  BatchLoss batch_loss = make_batch_loss(o, mc, *data.tok, data.tok_path);
  batch_loss.rank = world.rank;
  batch_loss.ranks = world.size;
  State st(o, start, *data.tok);
  const std::string ckpt_path = o.out_dir + "/checkpoint.safetensors", metrics_path = o.out_dir + "/metrics.jsonl";
  std::unique_ptr<AppendFile> metrics_file;
  std::ostream metrics(nullptr);  // rank 0: the file; other ranks: nowhere
  open_metrics(o, metrics_path, st.step, world, metrics_file, metrics);
  if (!o.init_from.empty()) metrics << nlohmann::json{{"parent", start.parent_record}}.dump() << "\n";
  log_header(log, o, mc, st.model, data, st.step);
  log << start.inherited << st.init_note;
  log_data_parallel(log, st.model, o, world);

  TrainResult res;
  const int64_t tokens_per_step = o.batch_size * row * o.grad_accum;
  RunClock clock(now_s(), 60.0 * o.time_limit_min);
  const double t_start = clock.t_start, limit_s = clock.limit_s;
  double last_line = -INFINITY;
  stop_requested() = false;
  while (st.step < o.steps) {
    const double t0 = now_s();
    const int64_t position = clock.position(st.step, o.steps, t0, world);
    const bool final_by_time = limit_s > 0 && position == o.steps - 1 && st.step < o.steps - 1;
    const double lr = scheduled_lr(o, position);
    const auto [loss_value, gnorm] = train_step(st.model, st.opt, data, batch_loss, o, st.cursor, st.step, lr);
    const int64_t step = ++st.step;
    const double t1 = now_s(), dt = t1 - t0, elapsed = t1 - t_start;
    clock.avg_step = clock.avg_step == 0 ? dt : 0.9 * clock.avg_step + 0.1 * dt;
    res.last_loss = loss_value;
    const double tps = static_cast<double>(tokens_per_step) / dt;
    std::string left_out_field;
    const double left_out = take_left_out(*batch_loss.left_out, left_out_field);
    log_step_metrics(metrics, step, loss_value, lr, gnorm, tps, elapsed, world.size, left_out_field);
    const bool stop = stop_on_any_rank(stop_requested().load(), world);
    const bool last = step == o.steps, reached = o.stop_at > 0 && step >= o.stop_at;
    clock.over_limit = limit_s > 0 && now_s() - t_start > limit_s;
    const bool ending = last || stop || final_by_time || reached;
    if (!o.quiet && (ending || step == 1 || elapsed - last_line >= o.log_every_s)) {
      log << progress_line(o, mc, step, loss_value, lr, tps, elapsed, clock.avg_step)
          << (world.size > 1 ? " | ranks " + std::to_string(world.size) : "")
          << (left_out >= 0 ? " | left out " + std::to_string(left_out).substr(0, 6) : "") << "\n"
          << std::flush;
      last_line = elapsed;
    }
    if (o.eval_every > 0 && (step % o.eval_every == 0 || ending))  // and at the end, however it comes
      validate_and_log(st.model, data, o, mc, batch_loss, step, metrics, log, res);
    metrics.flush();
    if (ending || (o.ckpt_every > 0 && step % o.ckpt_every == 0)) {
      if (world.root())
        save_training_checkpoint(ckpt_path, st.model, st.opt,
                                 checkpoint_metadata(o, mc, *data.tok, step, st.cursor, start.parent_record));
      res.checkpoint = ckpt_path;
      if (!o.quiet && o.log_every_s == 0) log << "saved " << ckpt_path << " at step " << step << "\n";
    }
    if (ending && !last) {
      res.stop_reason = stop ? "interrupted" : final_by_time ? "time limit" : "stop-at";
      break;
    }
  }
  if (res.stop_reason.empty()) res.stop_reason = "done";
  res.step = st.step;
  res.seconds = now_s() - t_start;
  return res;
}

}  // namespace lm
