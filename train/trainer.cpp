// trainer.cpp: the training loop (trainer.h).
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <set>
#include <sstream>
#include <type_traits>

#include "autograd/functions.h"
#include "landmark/attention.h"
#include "nn/gpt_io.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/files.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "train/batch.h"
#include "train/distributed.h"
#include "train/file_io.h"
#include "train/landmark_batch.h"
#include "train/token_file.h"
#include "train/tokenizer.h"

namespace lm {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

void save_training_checkpoint(const std::string& path, GPT& model, AdamW& opt, const nlohmann::json& metadata) {
  Checkpoint ck;
  for (auto& [name, p] : model.named_parameters()) ck.add("model." + name, p->value());
  for (auto& [name, t] : opt.named_state()) ck.add("optim." + name, *t);
  ck.metadata = metadata;
  save_safetensors(path, ck);
}

void load_model_weights(const Checkpoint& ck, GPT& model, AdamW* opt) {
  load_gpt_weights(ck, model);
  if (opt)
    for (auto& [name, s] : opt->named_state()) {
      const Tensor t = ck.get("optim." + name, s->shape(), s->dtype());
      require_finite(t, "optim." + name);
      s->copy_(t.to(s->device()));
    }
}

InitReport init_from_parent(GPT& model, const Checkpoint& parent, const Tokenizer& tok) {
  LM_CHECK(parent.metadata.is_object() && parent.metadata.contains("model"),
           "train --init-from: the parent is not a training checkpoint (no model config in its metadata)");
  const GPTConfig pc = gpt_config_from_json(parent.metadata.at("model"));
  const GPTConfig& c = model.config();
  InitReport r;
  std::set<std::string> taken;
  for (auto& [name, p] : model.named_parameters()) {
    const std::string key = "model." + name;
    if (!parent.has(key)) {
      r.fresh.push_back(name);
      continue;
    }
    const Tensor& t = parent.get(key);
    LM_CHECK(t.shape() == p->shape(), "train --init-from: tensor '"
                                          << name << "' is " << shape_str(t.shape()) << " in the parent but "
                                          << shape_str(p->shape()) << " in the new model (the parent has " << pc.n_layer
                                          << " layers, d " << pc.n_embd << ", " << pc.n_head
                                          << " heads: give the same --layers, --embd and --heads)");
    p->value().copy_(parent.get(key, p->shape(), p->dtype()).to(p->device()));
    r.copied.push_back(name);
    taken.insert(key);
  }
  for (const auto& [key, t] : parent.tensors)
    if (key.rfind("model.", 0) == 0 && !taken.count(key)) r.unused.push_back(key.substr(6));
  // Rows the parent never read as input: its own values there carry nothing to build on.
  std::vector<std::pair<std::string, int32_t>> fresh_rows;
  if (c.landmark() && !pc.landmark()) fresh_rows.push_back({"<|landmark|>", tok.special_id("<|landmark|>")});
  if (c.context_miss && !pc.context_miss) fresh_rows.push_back({"<|cmt|>", tok.special_id("<|cmt|>")});
  Tensor& w = model.wte.weight.value();  // (V, C) on the host: the model moves to its device later
  const int64_t base = tok.base_vocab_size(), C = w.shape()[1];
  LM_CHECK(w.device() == Device::CPU && w.is_contiguous() && w.shape()[0] >= base,
           "train --init-from: the token embedding is not a host (V, C) table with V >= " << base);
  auto set_rows = [&](auto* e) {
    std::vector<double> mean(static_cast<size_t>(C), 0.0);
    for (int64_t v = 0; v < base; ++v)
      for (int64_t j = 0; j < C; ++j) mean[static_cast<size_t>(j)] += e[v * C + j];
    for (const auto& [token, id] : fresh_rows) {
      LM_CHECK(id >= base && id < w.shape()[0], "train --init-from: the tokenizer has no " << token << " token");
      for (int64_t j = 0; j < C; ++j)
        e[id * C + j] =
            static_cast<std::decay_t<decltype(*e)>>(mean[static_cast<size_t>(j)] / static_cast<double>(base));
      r.rows.push_back({token, id});
    }
  };
  if (w.dtype() == DType::F64)
    set_rows(w.data<double>());
  else
    set_rows(w.data<float>());
  return r;
}

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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

// The learning rate at schedule position s (schedule_position: steps, or the clock when a time
// limit is set and the clock is further along).
double scheduled_lr(const TrainOptions& o, int64_t s) {
  if (o.schedule == "constant") return o.lr;
  if (o.schedule == "cosine") return lr_warmup_cosine(s, o.steps, o.lr, o.warmup, o.min_lr);
  return lr_one_cycle(s, o.steps, o.lr);
}

// Every setting that shapes a run's trajectory, listed once: the checkpoint records them and a
// resumed run takes them back from it. f(name, field, required): required fields are in every
// checkpoint this project wrote; the others arrived later and default to the command line.
template <class Options, class Visit>
void for_each_setting(Options& o, Visit&& f) {
  f("batch_size", o.batch_size, true);
  f("lr", o.lr, true);
  f("schedule", o.schedule, true);
  f("warmup", o.warmup, false);
  f("min_lr", o.min_lr, false);
  f("grad_accum", o.grad_accum, true);
  f("grad_clip", o.grad_clip, true);
  f("weight_decay", o.adamw.weight_decay, true);
  f("beta1", o.adamw.beta1, false);
  f("beta2", o.adamw.beta2, false);
  f("eps", o.adamw.eps, false);
  f("cmt_prob", o.cmt_prob, false);
  f("jump_max", o.jump_max, false);
  f("doc_starts", o.doc_starts, false);
  f("segment", o.segment, false);
}

nlohmann::json settings_to_json(const TrainOptions& o) {
  nlohmann::json j;
  for_each_setting(o, [&](const char* name, const auto& v, bool) { j[name] = v; });
  return j;
}

// The training settings of a checkpoint (its "train" object) into `o`, each checked for its kind
// first: nlohmann would read 2.5 as a batch of 2, and say "type must be number" without the name.
void settings_from_json(const nlohmann::json& j, TrainOptions& o, const std::string& where) {
  LM_CHECK(j.is_object(), where << "'train' (the training settings) must be an object, got " << j.dump().substr(0, 80));
  for_each_setting(o, [&](const char* name, auto& v, bool required) {
    using T = std::decay_t<decltype(v)>;
    if (!j.contains(name)) {
      LM_CHECK(!required, where << "the training setting '" << name << "' is missing");
      return;  // a setting that arrived later: the command line's value
    }
    const nlohmann::json& x = j[name];
    const char* kind = "a string";
    bool ok = x.is_string();
    if constexpr (std::is_same_v<T, bool>) {
      kind = "true or false";
      ok = x.is_boolean();
    } else if constexpr (std::is_integral_v<T>) {
      kind = "a whole number";
      ok = x.is_number_integer() && !(x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX));
    } else if constexpr (std::is_floating_point_v<T>) {
      kind = "a number";
      ok = x.is_number();
    }
    LM_CHECK(ok,
             where << "the training setting '" << name << "' must be " << kind << ", got " << x.dump().substr(0, 80));
    v = x.get<T>();
  });
}

// A field of a checkpoint's metadata by its dotted path ("rng.offset"), or an error naming it.
const nlohmann::json& meta_field(const nlohmann::json& m, const std::string& name, const std::string& where) {
  const nlohmann::json* v = &m;
  size_t start = 0;
  for (;;) {
    const size_t dot = name.find('.', start);
    const std::string key = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    LM_CHECK(v->is_object() && v->contains(key), where << "'" << name << "' is missing from the metadata");
    v = &(*v)[key];
    if (dot == std::string::npos) return *v;
    start = dot + 1;
  }
}

// A count of the metadata: a JSON whole number in [0, max] (`max_text` says max in words).
// nlohmann alone would read -1 as 2^64 - 1 and 2.5 as 2.
uint64_t meta_count(const nlohmann::json& m, const std::string& name, uint64_t max, const char* max_text,
                    const std::string& where) {
  const nlohmann::json& v = meta_field(m, name, where);
  const bool whole = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  LM_CHECK(whole && v.get<uint64_t>() <= max, where << "'" << name << "' must be a whole number in [0, " << max_text
                                                    << "], got " << v.dump().substr(0, 80));
  return v.get<uint64_t>();
}

std::string meta_string(const nlohmann::json& m, const std::string& name, const std::string& where) {
  const nlohmann::json& v = meta_field(m, name, where);
  LM_CHECK(v.is_string(), where << "'" << name << "' must be a string, got " << v.dump().substr(0, 80));
  return v.get<std::string>();
}

// A JSON value as a message shows it: a string without its quotes.
std::string shown(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The command line's value of a key in TrainOptions::given: a model config key, a training
// setting, or "seed".
nlohmann::json given_value(const TrainOptions& o, const std::string& key) {
  const nlohmann::json model = gpt_config_to_json(o.model), settings = settings_to_json(o);
  if (model.contains(key)) return model[key];
  if (settings.contains(key)) return settings[key];
  LM_CHECK(key == "seed", "train: TrainOptions::given names '" << key << "', which is no model or training setting");
  return o.seed;
}

void validate(const TrainOptions& o) {
  LM_CHECK(o.batch_size > 0, "train: --batch must be positive, got " << o.batch_size);
  LM_CHECK(o.steps > 1, "train: --steps must be at least 2, got " << o.steps);
  LM_CHECK(o.grad_accum > 0, "train: --grad-accum must be positive, got " << o.grad_accum);
  // One micro-batch is a (batch, T) tensor of token ids and its activations: past 2^31 tokens it
  // could not be held anyway, and the products below (tokens per step, cursors) must not wrap.
  constexpr int64_t kMaxBatchTokens = int64_t(1) << 31, kMaxAccum = int64_t(1) << 20;
  // Transformer-XL: the cache length is the model's, the segment the run's; they come together.
  const int64_t T = o.model.block_size, M = o.model.xl_cache, S = o.segment;
  LM_CHECK(M >= 0 && S >= 0, "train: --xl-cache and --segment must be >= 0, got " << M << " and " << S);
  if (M > 0 || S > 0) {
    LM_CHECK(!o.model.landmark(),
             "train: --xl-cache (Transformer-XL) needs --attention standard; landmark attention "
             "reaches past its window by retrieval instead");
    LM_CHECK(M > 0,
             "train: --segment " << S << " reads each row window by window through an XL cache: give --xl-cache M too");
    LM_CHECK(
        S > 0,
        "train: --xl-cache " << M << " needs --segment S, the tokens of each batch row, read as S / --block-size "
                             << "windows (the paper's XL setting: --block-size 256 --xl-cache 256 --segment 2048)");
    LM_CHECK(T > 0 && S % T == 0 && S >= 2 * T, "train: --segment " << S << " must be a multiple of --block-size " << T
                                                                    << " and at least two windows (" << 2 * T
                                                                    << "), so that training reads the cache");
    LM_CHECK(o.device == Device::CPU,
             "train: --xl-cache runs on the CPU only (the attention after a cached prefix has no "
             "CUDA kernel); use --device cpu");
  }
  const int64_t row = S > 0 ? S : T;
  LM_CHECK(row <= 0 || o.batch_size <= kMaxBatchTokens / row,
           "train: --batch " << o.batch_size << " x " << (S > 0 ? "--segment " : "--block-size ") << row
                             << " is more than " << kMaxBatchTokens << " tokens per micro-batch");
  LM_CHECK(o.grad_accum <= kMaxAccum, "train: --grad-accum " << o.grad_accum << " is more than " << kMaxAccum);
  LM_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr must be positive, got " << o.lr);
  LM_CHECK(o.schedule == "one-cycle" || o.schedule == "cosine" || o.schedule == "constant",
           "train: --schedule must be one-cycle, cosine or constant, got '" << o.schedule << "'");
  LM_CHECK(o.grad_clip >= 0, "train: --grad-clip must be >= 0, got " << o.grad_clip);
  LM_CHECK(o.eval_every >= 0 && o.eval_batches > 0, "train: --eval-every must be >= 0 and --eval-batches > 0");
  LM_CHECK(o.ckpt_every >= 0, "train: --ckpt-every must be >= 0, got " << o.ckpt_every);
  LM_CHECK(o.cmt_cutoff >= 0 && o.cmt_cutoff <= 1, "train: --cmt-cutoff must be in [0, 1], got " << o.cmt_cutoff);
  LM_CHECK(std::isfinite(o.time_limit_min) && o.time_limit_min >= 0,
           "train: --time-limit must be >= 0 minutes, got " << o.time_limit_min);
  LM_CHECK(std::isfinite(o.log_every_s) && o.log_every_s >= 0,
           "train: --log-every must be >= 0 seconds, got " << o.log_every_s);
  LM_CHECK(!o.data_dir.empty(), "train: --data is required (a directory made by `landmark prepare`)");
  LM_CHECK(!o.out_dir.empty(), "train: --out must not be empty");
}

// One batch through the model: plain windows for a standard model; for a landmark model,
// windows with landmarks (and CMT / jumps as configured) and landmark attention as the core.
// A Transformer-XL model reads segments of S tokens as S / T windows, the cache carried from one to
// the next (forward_xl).
struct BatchLoss {
  const TrainOptions& o;
  const GPTConfig& mc;
  LandmarkDataOptions lmo;
  std::shared_ptr<CmtStats> cmt_stats = std::make_shared<CmtStats>();  // validation drop rate
  // Data parallel (distributed.h): every rank draws the whole batch (cheap: token ids) and keeps
  // its rows, rank r of R the r-th of R equal slices, so R ranks read exactly the batch one would.
  int rank = 0, ranks = 1;
  Tensor shard(const Tensor& t) const {
    if (ranks == 1) return t;
    const int64_t rows = t.size(0) / ranks;
    return t.narrow(0, rank * rows, rows).contiguous();
  }
  // The mean loss of one batch (validation; training goes through forward_backward).
  // starts: where windows may begin (document_starts; nullptr: anywhere)
  Var operator()(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed, uint64_t cursor,
                 bool training) const {
    if (mc.xl_cache > 0) {
      Var total;
      const int64_t windows = xl_windows(model, data, starts, seed, cursor,
                                         [&](int64_t, Var loss) { total = total.defined() ? add(total, loss) : loss; });
      return mul(total, 1.0 / static_cast<double>(windows));
    }
    if (!mc.landmark()) {
      Batch b = sample_batch(data, o.batch_size, mc.block_size, seed, cursor, starts);
      return model.loss(shard(b.x), shard(b.y));
    }
    LandmarkBatch b = sample_landmark_batch(data, o.batch_size, mc.block_size, lmo, seed, cursor, training, starts);
    // The loss is a mean over the scored targets (landmarks and the CMT are not scored), whose
    // number may differ between rows: each rank's mean is weighted by its share of the batch's
    // targets, so the mean over ranks is the batch's mean.
    const double weight = ranks == 1 ? 1.0 : shard_weight(b.y);
    b.x = shard(b.x);
    b.y = shard(b.y);
    b.kinds = shard(b.kinds);
    b.positions = shard(b.positions);
    LandmarkLayout layout = make_layout(b.kinds, model.device());
    if (!training && mc.context_miss) {
      layout.cmt_cutoff = o.cmt_cutoff;
      layout.cmt_stats = cmt_stats;
    }
    Var loss = model.loss(b.x, b.y, b.positions.to(model.device()), kIgnoreIndex, landmark_attention_core(layout));
    return weight == 1.0 ? loss : mul(loss, weight);
  }
  // ranks x (targets in this rank's rows) / (targets in the batch), for targets y (B, T).
  double shard_weight(const Tensor& y) const {
    const std::vector<int32_t> v = y.to_vector<int32_t>();
    const int64_t T = y.size(1), rows = y.size(0) / ranks;
    int64_t mine = 0, all = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
      if (v[static_cast<size_t>(i)] == kIgnoreIndex) continue;
      ++all;
      if (i / T / rows == rank) ++mine;
    }
    return all == 0 ? 1.0 : static_cast<double>(ranks) * static_cast<double>(mine) / static_cast<double>(all);
  }

  // One training micro-batch, forward and backward: the gradient of its mean loss divided by
  // grad_accum is added into the parameters' .grad; returns the mean loss. A non-finite loss stops
  // the run before its backward, naming the step. An XL model runs each window's backward right
  // after its forward: the cache is a constant, so no graph spans two windows, and memory holds
  // one window's activations however long the segment (the gradient is the same as one backward
  // of the mean over the windows, summed in another order).
  double forward_backward(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                          uint64_t cursor, int64_t step) const {
    const double accum = static_cast<double>(o.grad_accum);
    auto check = [&](double lv) {
      LM_CHECK(std::isfinite(lv), "train: the loss became " << lv << " at step " << step + 1 << " (tensor: loss)");
    };
    if (mc.xl_cache > 0) {
      double total = 0;
      const int64_t windows = o.segment / mc.block_size;
      xl_windows(model, data, starts, seed, cursor, [&](int64_t, Var loss) {
        const double lv = loss.item();
        check(lv);
        mul(loss, 1.0 / (static_cast<double>(windows) * accum)).backward();
        total += lv;
      });
      return total / static_cast<double>(windows);
    }
    Var loss = (*this)(model, data, starts, seed, cursor, true);
    const double lv = loss.item();
    check(lv);
    (o.grad_accum == 1 ? loss : mul(loss, 1.0 / accum)).backward();
    return lv;
  }

  // The XL reading of one batch of segments: rows of S tokens at the sampler's starts, read as
  // S / T windows in order, the cache empty at the first; each window's mean loss goes to
  // on_window(w, loss) before the next window is read. Returns the number of windows.
  template <class OnWindow>
  int64_t xl_windows(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                     uint64_t cursor, OnWindow&& on_window) const {
    const int64_t T = mc.block_size, windows = o.segment / T;
    Batch b = sample_batch(data, o.batch_size, o.segment, seed, cursor, starts);  // x, y (B, S)
    b.x = shard(b.x);
    b.y = shard(b.y);
    XLCache cache;
    for (int64_t w = 0; w < windows; ++w)
      on_window(
          w, model.loss_xl(b.x.narrow(1, w * T, T).contiguous(), b.y.narrow(1, w * T, T).contiguous(), cache, &cache));
    return windows;
  }
};

BatchLoss make_batch_loss(const TrainOptions& o, const GPTConfig& mc, const Tokenizer& tok,
                          const std::string& tok_path) {
  BatchLoss bl{o, mc, LandmarkDataOptions{}};
  if (!mc.landmark()) return bl;
  bl.lmo.every = mc.landmark_every;
  bl.lmo.landmark_id = tok.special_id("<|landmark|>");
  bl.lmo.context_miss = mc.context_miss;
  bl.lmo.cmt_id = tok.special_id("<|cmt|>");
  bl.lmo.cmt_prob = o.cmt_prob;
  bl.lmo.jump_max = o.jump_max;
  LM_CHECK(bl.lmo.landmark_id >= 0,
           "train: the tokenizer in " << tok_path << " has no <|landmark|> token; re-run `landmark prepare`");
  LM_CHECK(!mc.context_miss || bl.lmo.cmt_id >= 0,
           "train: the tokenizer in " << tok_path << " has no <|cmt|> token; re-run `landmark prepare`");
  return bl;
}

// Mean loss over a fixed set of validation windows (same windows at every evaluation).
double evaluate(GPT& model, const TokenFile& val, const std::vector<int64_t>* starts, const TrainOptions& o,
                const BatchLoss& batch_loss) {
  NoGradGuard ng;
  model.eval();
  *batch_loss.cmt_stats = CmtStats{};
  double total = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i)
    total +=
        batch_loss(model, val, starts, o.seed ^ 0x5EEDEFA1ULL, static_cast<uint64_t>(i * o.batch_size), false).item();
  model.train();
  double mean = total / static_cast<double>(o.eval_batches);
  if (batch_loss.ranks > 1) {  // each rank scored its rows of the same batches: equal shares
    CmtStats& c = *batch_loss.cmt_stats;
    std::vector<double> v{mean, static_cast<double>(c.rows), static_cast<double>(c.dropped)};
    dist::allreduce_sum(v);
    mean = v[0] / static_cast<double>(batch_loss.ranks);
    c.rows = static_cast<int64_t>(v[1]);
    c.dropped = static_cast<int64_t>(v[2]);
  }
  return mean;
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

// The tokenizer and both token files of --data, checked against each other.
struct TrainData {
  std::string tok_path;
  std::unique_ptr<Tokenizer> tok;
  TokenFile train, val;
  std::vector<int64_t> train_starts, val_starts;  // with --doc-starts: where windows may begin
  const std::vector<int64_t>* train_windows() const { return train_starts.empty() ? nullptr : &train_starts; }
  const std::vector<int64_t>* val_windows() const { return val_starts.empty() ? nullptr : &val_starts; }
  explicit TrainData(const std::string& dir)
      : tok_path(dir + "/tokenizer.json"),
        tok(load_tokenizer(tok_path)),
        train(dir + "/train.tokens"),
        val(dir + "/val.tokens") {
    for (const TokenFile* f : {&train, &val})
      LM_CHECK(f->fingerprint() == tok->fingerprint(),
               "train: token file " << f->path() << " was made with tokenizer " << f->fingerprint() << " but "
                                    << tok_path << " is " << tok->fingerprint() << "; re-run `landmark prepare`");
  }
};

// --doc-starts: the positions right after each "\n" token where a whole row of `row` tokens (a
// window, or an XL model's segment) still fits (a landmark window may span two more raw tokens:
// landmark_batch.cpp).
void find_document_starts(TrainData& data, const GPTConfig& mc, int64_t row) {
  const std::vector<int32_t> nl = data.tok->encode("\n");
  LM_CHECK(nl.size() == 1, "train: --doc-starts needs \"\\n\" to be one token, but "
                               << data.tok_path << " encodes it as " << nl.size() << " tokens");
  const int64_t spare = mc.landmark() ? 3 : 1;
  for (auto [file, starts] : {std::pair{&data.train, &data.train_starts}, std::pair{&data.val, &data.val_starts}}) {
    *starts = document_starts(*file, nl[0], file->size() - row - spare);
    LM_CHECK(!starts->empty(), "train: --doc-starts: " << file->path() << " has no document start with room for a "
                                                       << (mc.xl_cache > 0 ? "segment" : "window") << " of " << row
                                                       << " tokens");
  }
}

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

// The CRC-32 (zlib's) of a file's bytes, as 8 hex digits: names the exact parent of a fine-tune.
std::string file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in.good(), "train: cannot read " << path);
  uint32_t crc = 0;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    crc = crc32_update(crc, buf.data(), static_cast<size_t>(in.gcount()));
  }
  return crc32_hex(crc);
}

// The model config stored in a checkpoint, checked (every key, its kind and range), and checked
// against the data's tokenizer: the one it was trained with (fingerprint) and its vocabulary.
GPTConfig stored_model(const Checkpoint& ck, const Tokenizer& tok, const std::string& path, const std::string& where,
                       const std::string& data_dir) {
  const nlohmann::json& m = ck.metadata;
  LM_CHECK(m.is_object() && m.contains("model"),
           where << "not a training checkpoint (no model config in its metadata)");
  const std::string fingerprint = meta_string(m, "tokenizer_fingerprint", where);
  LM_CHECK(fingerprint == tok.fingerprint(), where << "trained with tokenizer " << fingerprint << " but the data in "
                                                   << data_dir << " uses " << tok.fingerprint()
                                                   << "; prepare the data with the checkpoint's tokenizer");
  GPTConfig c;
  try {
    c = gpt_config_from_json(m["model"]);
  } catch (const Error& e) {
    LM_FAIL(where << e.what());
  }
  LM_CHECK(c.vocab_size == tok.vocab_size(), where << "vocab_size is " << c.vocab_size << " in its model config but "
                                                   << tok.vocab_size() << " in the data's tokenizer");
  check_config_fits_checkpoint(c, ck, path);
  return c;
}

// --init-from: the keys of the model config the command line did not give (TrainOptions::given)
// are the parent's; the log line lists them. Those that shape the weights (layers, width, heads)
// must be the parent's either way: 4 heads would read the parent's 2 heads of 16 as 4 of 8.
void inherit_from_parent(Start& st, const TrainOptions& o, const GPTConfig& pc) {
  const std::string where = "train: --init-from " + o.init_from + ": ";
  const nlohmann::json parent = gpt_config_to_json(pc);
  nlohmann::json child = gpt_config_to_json(st.model);
  std::string list;
  for (const char* key :
       {"n_layer", "n_embd", "n_head", "block_size", "landmark_every", "rotary_base", "ln_eps", "bias"}) {
    if (o.given.count(key)) continue;
    child[key] = parent[key];
    list += std::string(list.empty() ? "" : ", ") + key + " " + shown(parent[key]);
  }
  for (const char* key : {"n_layer", "n_embd", "n_head"})
    LM_CHECK(child[key] == parent[key], where << key << " is " << shown(child[key]) << " on the command line but "
                                              << shown(parent[key]) << " in the parent (fine-tuning keeps the parent's "
                                              << "layout of weights: leave the flag out to take the parent's)");
  child["vocab_size"] = st.model.vocab_size;
  const bool fused = st.model.fused_attention;  // not part of the stored config
  st.model = gpt_config_from_json(child);
  st.model.fused_attention = fused;
  if (!list.empty()) st.inherited = "from the parent (not given here): " + list + "\n";
}

// --resume: every key the command line gave (TrainOptions::given) must equal the checkpoint's, the
// model config's, a training setting's or the seed: a resumed run is the run that was interrupted.
// A setting the checkpoint does not hold (one that arrived later) is the command line's.
void check_given_against_checkpoint(const TrainOptions& o, const nlohmann::json& m, const std::string& where) {
  for (const std::string& key : o.given) {
    const nlohmann::json& model = m["model"];
    const nlohmann::json* stored = model.contains(key) ? &model[key] : nullptr;
    if (!stored && m["train"].is_object() && m["train"].contains(key)) stored = &m["train"][key];
    if (!stored && key == "seed" && m.contains("seed")) stored = &m["seed"];
    const nlohmann::json cli = given_value(o, key);
    LM_CHECK(!stored || *stored == cli,
             where << key << " is " << shown(cli) << " on the command line but " << shown(*stored)
                   << " in the checkpoint (a resumed run continues the run as it was: leave the flag out, or start a "
                   << "new run from these weights with --init-from)");
  }
}

// A checkpoint's step, data cursor and generator state, each checked: the cursor is the number of
// windows drawn so far, step x batch x grad_accum (every micro-batch draws a batch); the
// generator was seeded with the run's seed; its offset counts draws, far below 2^63 in any run
// (and near 2^64 its next draws would wrap).
void read_position(Start& st, const TrainOptions& o, const nlohmann::json& m, const std::string& where) {
  constexpr uint64_t kMaxSteps = uint64_t(1) << 40, kMaxOffset = uint64_t(INT64_MAX);
  st.step = static_cast<int64_t>(meta_count(m, "step", kMaxSteps, "2^40", where));
  st.cursor = meta_count(m, "data_cursor", UINT64_MAX, "2^64 - 1", where);
  const uint64_t per_step = static_cast<uint64_t>(o.batch_size) * static_cast<uint64_t>(o.grad_accum);
  LM_CHECK(st.cursor % per_step == 0 && st.cursor / per_step == static_cast<uint64_t>(st.step),
           where << "'data_cursor' is " << st.cursor << ", but a run at step " << st.step << " with batch "
                 << o.batch_size << " and grad_accum " << o.grad_accum << " has drawn " << st.step << " x " << per_step
                 << " windows (step x batch x grad_accum)");
  st.rng.seed = meta_count(m, "rng.seed", UINT64_MAX, "2^64 - 1", where);
  LM_CHECK(st.rng.seed == o.seed, where << "'rng.seed' is " << st.rng.seed << " but 'seed' is " << o.seed
                                        << " (training seeds its generator with the run's seed)");
  st.rng.offset = meta_count(m, "rng.offset", kMaxOffset, "2^63 - 1", where);
  LM_CHECK(st.step < o.steps,
           "train: checkpoint " << o.resume << " is already at step " << st.step << " of --steps " << o.steps);
}

Start resolve_start(TrainOptions& o, const Tokenizer& tok, std::ostream& log) {
  Start st;
  st.model = o.model;
  st.model.vocab_size = tok.vocab_size();
  LM_CHECK(o.resume.empty() || o.init_from.empty(),
           "train: --init-from starts a new run from another model's weights and --resume continues a run: give one of "
           "them");
  if (!o.init_from.empty()) {
    const std::string where = "train: --init-from " + o.init_from + ": ";
    st.parent = load_safetensors(o.init_from);
    if (const std::string note = unverified_note(st.parent, o.init_from); !note.empty()) log << note << "\n";
    const GPTConfig pc = stored_model(st.parent, tok, o.init_from, where, o.data_dir);
    const uint64_t parent_step = meta_count(st.parent.metadata, "step", uint64_t(1) << 40, "2^40", where);
    inherit_from_parent(st, o, pc);
    st.parent_record = {{"path", o.init_from},
                        {"crc32", file_crc32(o.init_from)},
                        {"step", parent_step},
                        {"attention", attention_kind_name(pc.attention)}};
    TrainOptions child = o;  // the inherited block size and landmark_every pass the flags' checks
    child.model = st.model;
    validate(child);
  }
  if (o.resume.empty()) return st;
  const std::string where = "train: --resume " + o.resume + ": ";
  st.ck = load_safetensors(o.resume);
  if (const std::string note = unverified_note(st.ck, o.resume); !note.empty()) log << note << "\n";
  const nlohmann::json& m = st.ck.metadata;
  st.model = stored_model(st.ck, tok, o.resume, where, o.data_dir);
  meta_field(m, "train", where);
  check_given_against_checkpoint(o, m, where);
  if (m.contains("parent")) st.parent_record = m["parent"];
  o.seed = meta_count(m, "seed", UINT64_MAX, "2^64 - 1", where);
  settings_from_json(m["train"], o, where);
  // Without --steps a resumed run ends where it was going to: its schedule is the one it had
  // (the command line's default of 1000 once stretched a 20-step run's schedule to 1000 steps).
  const int64_t total = m.contains("total_steps")
                            ? static_cast<int64_t>(meta_count(m, "total_steps", uint64_t(1) << 40, "2^40", where))
                            : o.steps;
  if (!o.steps_given) o.steps = total;
  // The checkpoint's settings pass the same checks as the command line's (a file edited by hand,
  // or from a stranger, must not train with a batch of 0 or a wrapped size).
  TrainOptions resumed = o;
  resumed.model = st.model;
  try {
    validate(resumed);
  } catch (const Error& e) {
    LM_FAIL("train: the training settings stored in " << o.resume << " are invalid: " << e.what());
  }
  read_position(st, o, m, where);
  if (total != o.steps)
    log << "note: --steps " << o.steps << " differs from the checkpoint's " << total
        << "; the learning-rate schedule now spans " << o.steps << " steps\n";
  return st;
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
  if (batch_loss.ranks > 1) {  // the mean over all ranks' rows: gradients and the loss
    std::vector<Tensor> grads;
    for (Var* p : model.parameters()) grads.push_back(p->grad());
    dist::average_gradients(grads);
    std::vector<double> l{loss_value};
    dist::allreduce_sum(l);
    loss_value = l[0] / static_cast<double>(batch_loss.ranks);
  }
  const double gnorm = o.grad_clip > 0 ? clip_grad_norm(model, o.grad_clip) : grad_norm(model);
  if (!std::isfinite(gnorm)) {
    const std::string bad = first_nonfinite_grad(model);
    LM_FAIL("train: non-finite gradient at step " << step + 1 << " in tensor " << (bad.empty() ? "(unknown)" : bad));
  }
  opt.step(lr);
  return {loss_value, gnorm};
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

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
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
    if (!o.init_from.empty()) {
      const InitReport r = init_from_parent(model, start.parent, tok);
      std::ostringstream log;
      log << "init from " << o.init_from << " (step " << start.parent_record["step"] << ", "
          << start.parent_record["attention"].get<std::string>() << " attention, crc32 "
          << start.parent_record["crc32"].get<std::string>() << "): " << r.copied.size() << " tensors copied";
      for (const auto& [token, id] : r.rows)
        log << "; " << token << " row (id " << id << ") set to the mean token embedding";
      if (!r.fresh.empty()) log << "; kept fresh (not in the parent): " << join(r.fresh);
      if (!r.unused.empty()) log << "; not used (not in this model): " << join(r.unused);
      log << "; a fresh optimizer and schedule\n";
      init_note = log.str();
    }
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

// What a checkpoint records besides the tensors: everything a resumed run needs (trainer.h).
nlohmann::json checkpoint_metadata(const TrainOptions& o, const GPTConfig& mc, const Tokenizer& tok, int64_t step,
                                   uint64_t cursor, const nlohmann::json& parent) {
  nlohmann::json m{{"kind", "training"},
                   {"step", step},
                   {"total_steps", o.steps},
                   {"data_cursor", cursor},
                   {"rng", {{"seed", global_rng().seed}, {"offset", global_rng().offset}}},
                   {"seed", o.seed},
                   {"model", gpt_config_to_json(mc)},
                   {"train", settings_to_json(o)},
                   {"tokenizer", tok.to_json()},
                   {"tokenizer_fingerprint", tok.fingerprint()}};
  if (!parent.is_null()) m["parent"] = parent;
  return m;
}

// The two opening lines: the model and where it runs, the data and where the run starts.
void log_header(std::ostream& log, const TrainOptions& o, const GPTConfig& mc, GPT& model, const TrainData& data,
                int64_t step) {
  log << "training " << model.num_parameters() << " parameters (" << mc.n_layer << " layers, d " << mc.n_embd << ", "
      << mc.n_head << " heads, T " << mc.block_size << ", vocab " << mc.vocab_size << ", "
      << attention_kind_name(mc.attention) << " attention"
      << (mc.landmark() ? " every " + std::to_string(mc.landmark_every) + (mc.context_miss ? " + CMT" : "") : "")
      << (mc.xl_cache > 0 ? " with an XL cache of " + std::to_string(mc.xl_cache) : "") << ") on "
      << device_name(o.device) << ", " << threads_note()
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

// The run must fit: the batch splits evenly across the ranks, and each token file holds a row and
// its next-token targets.
void check_run_fits(const TrainOptions& o, const TrainData& data, int64_t row, const dist::World& world) {
  LM_CHECK(o.batch_size % world.size == 0, "train: --batch " << o.batch_size
                                                             << (o.resume.empty() ? "" : " (the resumed run's)")
                                                             << " does not split evenly across " << world.size
                                                             << " ranks; give a multiple of " << world.size);
  LM_CHECK(data.train.size() > row + 1 && data.val.size() > row + 1,
           "train: the token files need more than " << (o.segment > 0 ? "--segment" : "block_size")
                                                    << " + 1 = " << row + 1 << " tokens (train has "
                                                    << data.train.size() << ", val " << data.val.size() << ")");
}

// Rank 0 points `metrics` at out_dir/metrics.jsonl (other ranks leave it writing nowhere). On
// resume, lines past the checkpoint's step (written before a kill, and about to be written again)
// are dropped first, so every step appears once.
void open_metrics(const TrainOptions& o, const std::string& path, int64_t step, const dist::World& world,
                  std::ofstream& file, std::ostream& metrics) {
  if (!world.root()) return;
  std::filesystem::create_directories(o.out_dir);
  if (!o.resume.empty()) drop_metrics_after(path, step);
  file.open(path, o.resume.empty() ? std::ios::trunc : std::ios::app);
  LM_CHECK(file.good(), "train: cannot write " << path);
  metrics.rdbuf(file.rdbuf());
}

// With several ranks: how the batch is shared and how many gradient bytes each step sums.
void log_data_parallel(std::ostream& log, GPT& model, const TrainOptions& o, const dist::World& world) {
  if (world.size <= 1) return;
  int64_t grad_bytes = 0;
  for (Var* p : model.parameters())
    grad_bytes += p->value().numel() * static_cast<int64_t>(dtype_size(p->value().dtype()));
  log << "data parallel: " << world.size << " ranks of " << o.batch_size / world.size << " rows each; " << grad_bytes
      << " bytes of gradients summed across ranks per step (one all-reduce)\n";
}

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
  int64_t position(int64_t step, int64_t steps, double t0, const dist::World& world) {
    double clock_s = t0 - t_start + avg_step;
    if (world.size > 1) {
      std::vector<double> c{clock_s, over_limit ? 1.0 : 0.0};
      dist::broadcast(c);
      clock_s = c[0];
      over_limit = c[1] != 0;
    }
    return over_limit ? steps - 1 : schedule.position(step, steps, clock_s, limit_s);
  }
};

// A stop asked for on any rank (a signal) stops them all after this step.
bool stop_on_any_rank(bool stop, const dist::World& world) {
  if (world.size <= 1) return stop;
  std::vector<double> f{stop ? 1.0 : 0.0};
  dist::allreduce_sum(f);
  return f[0] > 0;
}

}  // namespace

int64_t row_tokens(const TrainOptions& o, const GPTConfig& mc) { return mc.xl_cache > 0 ? o.segment : mc.block_size; }

int64_t schedule_position(int64_t step, int64_t total, double elapsed_s, double limit_s) {
  LM_CHECK(total > 0 && step >= 0, "schedule_position: step " << step << " of " << total);
  int64_t s = step;
  if (limit_s > 0) {
    const double by_time = std::floor(std::max(0.0, elapsed_s) / limit_s * static_cast<double>(total));
    s = std::max(s, static_cast<int64_t>(std::min(by_time, static_cast<double>(total))));
  }
  return std::min(s, total - 1);
}

int64_t ScheduleClock::position(int64_t step, int64_t total, double elapsed_s, double limit_s) {
  const int64_t by_clock = schedule_position(step, total, elapsed_s, limit_s);
  const int64_t margin = std::max<int64_t>(1, total / 50);
  if (by_clock - step >= margin) following = true;
  return following ? by_clock : std::min(step, total - 1);
}

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
  const int64_t row = row_tokens(o, mc);
  check_run_fits(o, data, row, world);
  if (o.doc_starts) find_document_starts(data, mc, row);
  BatchLoss batch_loss = make_batch_loss(o, mc, *data.tok, data.tok_path);
  batch_loss.rank = world.rank;
  batch_loss.ranks = world.size;
  State st(o, start, *data.tok);
  const std::string ckpt_path = o.out_dir + "/checkpoint.safetensors", metrics_path = o.out_dir + "/metrics.jsonl";
  std::ofstream metrics_file;
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
    metrics << "{\"step\":" << step << ",\"loss\":" << std::setprecision(8) << loss_value << ",\"lr\":" << lr
            << ",\"grad_norm\":" << gnorm << ",\"tokens_per_s\":" << std::setprecision(6) << tps
            << ",\"elapsed_s\":" << elapsed << ",\"ranks\":" << world.size << "}\n";
    const bool stop = stop_on_any_rank(stop_requested().load(), world);
    const bool last = step == o.steps, reached = o.stop_at > 0 && step >= o.stop_at;
    clock.over_limit = limit_s > 0 && now_s() - t_start > limit_s;
    const bool ending = last || stop || final_by_time || reached;
    if (!o.quiet && (ending || step == 1 || elapsed - last_line >= o.log_every_s)) {
      log << progress_line(o, mc, step, loss_value, lr, tps, elapsed, clock.avg_step)
          << (world.size > 1 ? " | ranks " + std::to_string(world.size) : "") << "\n"
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
