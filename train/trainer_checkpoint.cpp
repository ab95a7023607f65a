// trainer_checkpoint.cpp: a training checkpoint in and out (trainer.h): the tensors, the metadata a
// resumed run needs (settings, position, generator), and --resume's checks of each field against
// its kind, its range and the command line. Not the file format (nn/checkpoint.h) or the model
// config as JSON (nn/gpt_io.h); a new run from a parent's weights is trainer_init_from.cpp.
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "nn/gpt_io.h"
#include "tensor/files.h"
#include "tensor/rng.h"
#include "train/trainer.h"
#include "train/trainer_internal.h"

namespace lm {

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

namespace trainer_internal {
namespace {

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
  f("train_top_k", o.train_top_k, false);
  f("train_top_k_gates", o.train_top_k_gates, false);
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

std::string meta_string(const nlohmann::json& m, const std::string& name, const std::string& where) {
  const nlohmann::json& v = meta_field(m, name, where);
  LM_CHECK(v.is_string(), where << "'" << name << "' must be a string, got " << v.dump().substr(0, 80));
  return v.get<std::string>();
}

// The command line's value of a key in TrainOptions::given: a model config key, a training
// setting, or "seed".
nlohmann::json given_value(const TrainOptions& o, const std::string& key) {
  const nlohmann::json model = gpt_config_to_json(o.model), settings = settings_to_json(o);
  if (model.contains(key)) return model[key];
  if (settings.contains(key)) return settings[key];
  LM_CHECK(key == "seed", "train: TrainOptions::given names '" << key << "', which is no model or training setting");
  return o.seed;
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

}  // namespace

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

// A JSON value as a message shows it: a string without its quotes.
std::string shown(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

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

Start resolve_start(TrainOptions& o, const Tokenizer& tok, std::ostream& log) {
  Start st;
  st.model = o.model;
  st.model.vocab_size = tok.vocab_size();
  LM_CHECK(o.resume.empty() || o.init_from.empty(),
           "train: --init-from starts a new run from another model's weights and --resume continues a run: give one of "
           "them");
  if (!o.init_from.empty()) read_parent(st, o, tok, log);
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

}  // namespace trainer_internal
}  // namespace lm
