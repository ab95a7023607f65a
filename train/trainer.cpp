// trainer.cpp: the training loop (trainer.h).
#include "train/trainer.h"

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "autograd/functions.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "landmark/attention.h"
#include "train/batch.h"
#include "train/landmark_batch.h"
#include "train/token_file.h"
#include "train/tokenizer.h"

namespace lm {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

nlohmann::json gpt_config_to_json(const GPTConfig& c) {
  return nlohmann::json{{"vocab_size", c.vocab_size},     {"n_layer", c.n_layer},
                        {"n_head", c.n_head},             {"n_embd", c.n_embd},
                        {"block_size", c.block_size},     {"dropout", c.dropout},
                        {"rotary_base", c.rotary_base},   {"ln_eps", c.ln_eps},
                        {"bias", c.bias},                 {"attention", attention_kind_name(c.attention)},
                        {"landmark_every", c.landmark_every}, {"context_miss", c.context_miss}};
}

GPTConfig gpt_config_from_json(const nlohmann::json& j) {
  LM_CHECK(j.is_object(), "model config: expected a JSON object, got " << j.dump());
  GPTConfig c;
  try {
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    c.n_layer = j.at("n_layer").get<int64_t>();
    c.n_head = j.at("n_head").get<int64_t>();
    c.n_embd = j.at("n_embd").get<int64_t>();
    c.block_size = j.at("block_size").get<int64_t>();
    c.dropout = j.at("dropout").get<double>();
    c.rotary_base = j.at("rotary_base").get<double>();
    c.ln_eps = j.at("ln_eps").get<double>();
    c.bias = j.at("bias").get<bool>();
    c.attention = parse_attention_kind(j.value("attention", std::string("standard")));
    c.landmark_every = j.value("landmark_every", int64_t(50));
    c.context_miss = j.value("context_miss", false);
  } catch (const nlohmann::json::exception& e) {
    LM_FAIL("model config: " << e.what() << " in " << j.dump());
  }
  c.validate();
  return c;
}

void save_training_checkpoint(const std::string& path, GPT& model, AdamW& opt, const nlohmann::json& metadata) {
  Checkpoint ck;
  for (auto& [name, p] : model.named_parameters()) ck.add("model." + name, p->value());
  for (auto& [name, t] : opt.named_state()) ck.add("optim." + name, *t);
  ck.metadata = metadata;
  save_safetensors(path, ck);
}

void load_model_weights(const Checkpoint& ck, GPT& model, AdamW* opt) {
  for (auto& [name, p] : model.named_parameters())
    p->value().copy_(ck.get("model." + name, p->shape(), p->dtype()).to(p->device()));
  if (opt)
    for (auto& [name, t] : opt->named_state()) t->copy_(ck.get("optim." + name, t->shape(), t->dtype()).to(t->device()));
}

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string hms(double s) {
  long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string threads_note() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  return std::to_string(cpu::num_threads()) + " CPU thread(s) (OMP_NUM_THREADS=" + (env ? env : "unset") + ")";
}

double scheduled_lr(const TrainOptions& o, int64_t s) {
  if (o.schedule == "constant") return o.lr;
  if (o.schedule == "cosine") return lr_warmup_cosine(s, o.steps, o.lr, o.warmup, o.min_lr);
  return lr_one_cycle(s, o.steps, o.lr);
}

void validate(const TrainOptions& o) {
  LM_CHECK(o.batch_size > 0, "train: --batch must be positive, got " << o.batch_size);
  LM_CHECK(o.steps > 1, "train: --steps must be at least 2, got " << o.steps);
  LM_CHECK(o.grad_accum > 0, "train: --grad-accum must be positive, got " << o.grad_accum);
  LM_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr must be positive, got " << o.lr);
  LM_CHECK(o.schedule == "one-cycle" || o.schedule == "cosine" || o.schedule == "constant",
           "train: --schedule must be one-cycle, cosine or constant, got '" << o.schedule << "'");
  LM_CHECK(o.grad_clip >= 0, "train: --grad-clip must be >= 0, got " << o.grad_clip);
  LM_CHECK(o.eval_every >= 0 && o.eval_batches > 0, "train: --eval-every must be >= 0 and --eval-batches > 0");
  LM_CHECK(o.ckpt_every >= 0, "train: --ckpt-every must be >= 0, got " << o.ckpt_every);
  LM_CHECK(o.cmt_cutoff >= 0 && o.cmt_cutoff <= 1, "train: --cmt-cutoff must be in [0, 1], got " << o.cmt_cutoff);
  LM_CHECK(!o.data_dir.empty(), "train: --data is required (a directory made by `landmark prepare`)");
  LM_CHECK(!o.out_dir.empty(), "train: --out must not be empty");
}

// One batch through the model: plain windows for a standard model; for a landmark model,
// windows with landmarks (and CMT / jumps as configured) and landmark attention as the core.
struct BatchLoss {
  const TrainOptions& o;
  const GPTConfig& mc;
  LandmarkDataOptions lmo;
  std::shared_ptr<CmtStats> cmt_stats = std::make_shared<CmtStats>();  // validation drop rate
  Var operator()(GPT& model, const TokenFile& data, uint64_t seed, uint64_t cursor, bool training) const {
    if (!mc.landmark()) {
      Batch b = sample_batch(data, o.batch_size, mc.block_size, seed, cursor);
      return model.loss(b.x, b.y);
    }
    LandmarkBatch b = sample_landmark_batch(data, o.batch_size, mc.block_size, lmo, seed, cursor, training);
    LandmarkLayout layout = make_layout(b.kinds, model.device());
    if (!training && mc.context_miss) {
      layout.cmt_cutoff = o.cmt_cutoff;
      layout.cmt_stats = cmt_stats;
    }
    return model.loss(b.x, b.y, b.positions.to(model.device()), kIgnoreIndex, landmark_attention_core(layout));
  }
};

// Mean loss over a fixed set of validation windows (same windows at every evaluation).
double evaluate(GPT& model, const TokenFile& val, const TrainOptions& o, const BatchLoss& batch_loss) {
  NoGradGuard ng;
  model.eval();
  *batch_loss.cmt_stats = CmtStats{};
  double total = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i)
    total += batch_loss(model, val, o.seed ^ 0x5EEDEFA1ULL, static_cast<uint64_t>(i * o.batch_size), false).item();
  model.train();
  return total / static_cast<double>(o.eval_batches);
}

// Name of the first parameter whose gradient holds a NaN or an infinity ("" if none).
std::string first_nonfinite_grad(GPT& model) {
  for (auto& [name, p] : model.named_parameters()) {
    if (!p->grad().defined()) continue;
    // x * 0 is 0 for every finite x and NaN for NaN and +-inf: one reduction per tensor.
    if (!std::isfinite(sum(mul(p->grad(), 0.0)).item())) return name;
  }
  return "";
}

}  // namespace

TrainResult train(const TrainOptions& opts, std::ostream& log) {
  TrainOptions o = opts;  // on resume, the training settings are replaced by the checkpoint's
  validate(o);
  namespace fs = std::filesystem;
  const std::string tok_path = o.data_dir + "/tokenizer.json";
  std::unique_ptr<Tokenizer> tok = load_tokenizer(tok_path);
  TokenFile train_data(o.data_dir + "/train.tokens"), val_data(o.data_dir + "/val.tokens");
  for (const TokenFile* f : {&train_data, &val_data})
    LM_CHECK(f->fingerprint() == tok->fingerprint(),
             "train: token file " << f->path() << " was made with tokenizer " << f->fingerprint() << " but " << tok_path
                                  << " is " << tok->fingerprint() << "; re-run `landmark prepare`");

  GPTConfig mc = o.model;
  mc.vocab_size = tok->vocab_size();
  Checkpoint ck;
  nlohmann::json prev;
  if (!o.resume.empty()) {
    ck = load_safetensors(o.resume);
    prev = ck.metadata;
    LM_CHECK(prev.contains("tokenizer_fingerprint") && prev.contains("model") && prev.contains("step"),
             "train: " << o.resume << " is not a training checkpoint (no step/model/tokenizer in its metadata)");
    LM_CHECK(prev["tokenizer_fingerprint"].get<std::string>() == tok->fingerprint(),
             "train: checkpoint " << o.resume << " was trained with tokenizer " << prev["tokenizer_fingerprint"].get<std::string>()
                                  << " but the data in " << o.data_dir << " uses " << tok->fingerprint());
    mc = gpt_config_from_json(prev["model"]);
    // Everything that shapes the trajectory comes from the checkpoint, so a resumed run is the
    // run that was interrupted; only --steps (to extend a run) and bookkeeping flags (output,
    // evaluation, checkpoint cadence, time limits) are taken from the command line.
    const nlohmann::json& t = prev.at("train");
    o.seed = prev.at("seed").get<uint64_t>();
    o.batch_size = t.at("batch_size").get<int64_t>();
    o.lr = t.at("lr").get<double>();
    o.schedule = t.at("schedule").get<std::string>();
    o.warmup = t.value("warmup", o.warmup);
    o.min_lr = t.value("min_lr", o.min_lr);
    o.grad_accum = t.at("grad_accum").get<int64_t>();
    o.grad_clip = t.at("grad_clip").get<double>();
    o.adamw.weight_decay = t.at("weight_decay").get<double>();
    o.adamw.beta1 = t.value("beta1", o.adamw.beta1);
    o.adamw.beta2 = t.value("beta2", o.adamw.beta2);
    o.adamw.eps = t.value("eps", o.adamw.eps);
    o.cmt_prob = t.value("cmt_prob", o.cmt_prob);
    o.jump_max = t.value("jump_max", o.jump_max);
    if (prev.value("total_steps", o.steps) != o.steps)
      log << "note: --steps " << o.steps << " differs from the checkpoint's " << prev.value("total_steps", o.steps)
          << "; the learning-rate schedule now spans " << o.steps << " steps\n";
  }
  mc.validate();
  LM_CHECK(train_data.size() > mc.block_size + 1 && val_data.size() > mc.block_size + 1,
           "train: the token files need more than block_size + 1 = " << mc.block_size + 1 << " tokens (train has "
                                                                     << train_data.size() << ", val " << val_data.size() << ")");

  BatchLoss batch_loss{o, mc, LandmarkDataOptions{}};
  if (mc.landmark()) {
    batch_loss.lmo.every = mc.landmark_every;
    batch_loss.lmo.landmark_id = tok->special_id("<|landmark|>");
    batch_loss.lmo.context_miss = mc.context_miss;
    batch_loss.lmo.cmt_id = tok->special_id("<|cmt|>");
    batch_loss.lmo.cmt_prob = o.cmt_prob;
    batch_loss.lmo.jump_max = o.jump_max;
    LM_CHECK(batch_loss.lmo.landmark_id >= 0, "train: the tokenizer in " << tok_path
                                                  << " has no <|landmark|> token; re-run `landmark prepare`");
    LM_CHECK(!mc.context_miss || batch_loss.lmo.cmt_id >= 0,
             "train: the tokenizer in " << tok_path << " has no <|cmt|> token; re-run `landmark prepare`");
  }

  manual_seed(o.seed);
  GPT model(mc);
  AdamW opt(model, o.adamw);
  int64_t step = 0;
  uint64_t cursor = 0;
  if (!o.resume.empty()) {
    load_model_weights(ck, model, &opt);
    step = prev["step"].get<int64_t>();
    cursor = prev["data_cursor"].get<uint64_t>();
    opt.set_steps(step);
    global_rng() = RngState{prev["rng"]["seed"].get<uint64_t>(), prev["rng"]["offset"].get<uint64_t>()};
    LM_CHECK(step < o.steps, "train: checkpoint " << o.resume << " is already at step " << step << " of --steps " << o.steps);
  }
  model.to(o.device);
  opt.to(o.device);

  fs::create_directories(o.out_dir);
  const std::string ckpt_path = o.out_dir + "/checkpoint.safetensors", metrics_path = o.out_dir + "/metrics.jsonl";
  std::ofstream metrics(metrics_path, o.resume.empty() ? std::ios::trunc : std::ios::app);
  LM_CHECK(metrics.good(), "train: cannot write " << metrics_path);

  const int64_t T = mc.block_size, tokens_per_step = o.batch_size * T * o.grad_accum;
  log << "training " << model.num_parameters() << " parameters (" << mc.n_layer << " layers, d " << mc.n_embd << ", "
      << mc.n_head << " heads, T " << T << ", vocab " << mc.vocab_size << ", " << attention_kind_name(mc.attention) << " attention"
      << (mc.landmark() ? " every " + std::to_string(mc.landmark_every) + (mc.context_miss ? " + CMT" : "") : "")
      << ") on " << device_name(o.device) << ", "
      << threads_note() << "\n"
      << "data: " << train_data.size() << " train / " << val_data.size() << " val tokens; " << tokens_per_step
      << " tokens per step; " << (o.resume.empty() ? "fresh start" : "resuming at step " + std::to_string(step)) << "\n";

  auto metadata = [&](int64_t done) {
    return nlohmann::json{{"kind", "training"},
                          {"step", done},
                          {"total_steps", o.steps},
                          {"data_cursor", cursor},
                          {"rng", {{"seed", global_rng().seed}, {"offset", global_rng().offset}}},
                          {"seed", o.seed},
                          {"model", gpt_config_to_json(mc)},
                          {"train",
                           {{"batch_size", o.batch_size}, {"lr", o.lr}, {"schedule", o.schedule}, {"warmup", o.warmup},
                            {"min_lr", o.min_lr}, {"grad_accum", o.grad_accum}, {"grad_clip", o.grad_clip},
                            {"weight_decay", o.adamw.weight_decay}, {"beta1", o.adamw.beta1}, {"beta2", o.adamw.beta2},
                            {"eps", o.adamw.eps}, {"cmt_prob", o.cmt_prob}, {"jump_max", o.jump_max}}},
                          {"tokenizer", tok->to_json()},
                          {"tokenizer_fingerprint", tok->fingerprint()}};
  };

  TrainResult res;
  const double t_start = now_s();
  double avg_step = 0;
  int64_t timed = 0;
  stop_requested() = false;
  while (step < o.steps) {
    const double t0 = now_s();
    const double lr = scheduled_lr(o, step);
    model.zero_grad();
    double loss_value = 0;
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      Var loss = batch_loss(model, train_data, o.seed, cursor, true);
      cursor += static_cast<uint64_t>(o.batch_size);
      const double lv = loss.item();
      LM_CHECK(std::isfinite(lv), "train: the loss became " << lv << " at step " << step + 1 << " (tensor: loss)");
      (o.grad_accum == 1 ? loss : mul(loss, 1.0 / static_cast<double>(o.grad_accum))).backward();
      loss_value += lv / static_cast<double>(o.grad_accum);
    }
    const double gnorm = o.grad_clip > 0 ? clip_grad_norm(model, o.grad_clip) : grad_norm(model);
    if (!std::isfinite(gnorm)) {
      std::string bad = first_nonfinite_grad(model);
      LM_FAIL("train: non-finite gradient at step " << step + 1 << " in tensor " << (bad.empty() ? "(unknown)" : bad));
    }
    opt.step(lr);
    ++step;
    const double dt = now_s() - t0;
    avg_step = timed == 0 ? dt : 0.9 * avg_step + 0.1 * dt;
    ++timed;
    res.last_loss = loss_value;
    const double tps = static_cast<double>(tokens_per_step) / dt, elapsed = now_s() - t_start;
    metrics << "{\"step\":" << step << ",\"loss\":" << std::setprecision(8) << loss_value << ",\"lr\":" << lr
            << ",\"grad_norm\":" << gnorm << ",\"tokens_per_s\":" << std::setprecision(6) << tps
            << ",\"elapsed_s\":" << elapsed << "}\n";
    if (!o.quiet) {
      char line[200];
      std::snprintf(line, sizeof line, "step %6lld/%lld | loss %.4f | lr %.2e | %7.0f tok/s | elapsed %s | ETA %s",
                    static_cast<long long>(step), static_cast<long long>(o.steps), loss_value, lr, tps, hms(elapsed).c_str(),
                    hms(avg_step * static_cast<double>(o.steps - step)).c_str());
      log << line << "\n" << std::flush;
    }
    const bool last = step == o.steps;
    if (o.eval_every > 0 && (step % o.eval_every == 0 || last)) {
      res.last_val_loss = evaluate(model, val_data, o, batch_loss);
      metrics << "{\"step\":" << step << ",\"val_loss\":" << std::setprecision(8) << res.last_val_loss;
      if (mc.context_miss) {
        res.last_cmt_drop_rate = batch_loss.cmt_stats->drop_rate();
        metrics << ",\"cmt_cutoff\":" << o.cmt_cutoff << ",\"cmt_drop_rate\":" << res.last_cmt_drop_rate;
      }
      metrics << "}\n";
      log << "step " << step << " | validation loss " << std::fixed << std::setprecision(4) << res.last_val_loss;
      if (mc.context_miss) log << " | CMT cutoff " << o.cmt_cutoff << ", drop rate " << res.last_cmt_drop_rate;
      log << std::defaultfloat << "\n";
    }
    metrics.flush();
    const bool out_of_time = o.time_limit_min > 0 && now_s() - t_start > 60.0 * o.time_limit_min;
    const bool stop = stop_requested().load(), reached = o.stop_at > 0 && step >= o.stop_at;
    if (last || stop || out_of_time || reached || (o.ckpt_every > 0 && step % o.ckpt_every == 0)) {
      save_training_checkpoint(ckpt_path, model, opt, metadata(step));
      res.checkpoint = ckpt_path;
      if (!o.quiet) log << "saved " << ckpt_path << " at step " << step << "\n";
    }
    if ((stop || out_of_time || reached) && !last) {
      res.stop_reason = stop ? "interrupted" : out_of_time ? "time limit" : "stop-at";
      break;
    }
  }
  if (res.stop_reason.empty()) res.stop_reason = "done";
  res.step = step;
  return res;
}

}  // namespace lm
