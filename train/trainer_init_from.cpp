// trainer_init_from.cpp: train --init-from, a new run from a parent's weights (trainer.h,
// init_from_parent): the parent read and checked, the architecture it hands down, its weights
// copied and new token rows at the mean embedding. Not --resume, which continues a run
// (trainer_checkpoint.cpp); the fresh optimizer and schedule are the loop's (trainer.cpp).
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/gpt_io.h"
#include "tensor/files.h"
#include "train/tokenizer.h"
#include "train/trainer.h"
#include "train/trainer_internal.h"

namespace lm {

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

namespace trainer_internal {
namespace {

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

// --init-from: the keys of the model config the command line did not give (TrainOptions::given)
// are the parent's; the log line lists them. Those that shape the weights (layers, width, heads)
// must be the parent's either way: 4 heads would read the parent's 2 heads of 16 as 4 of 8.
// The attention kind and the XL cache are inherited too (a landmark parent fine-tuned without
// --attention stays a landmark model, an XL parent an XL model), and an XL parent's --segment
// (a training setting, from its "train" record) when the child keeps its cache and gives none.
void inherit_from_parent(Start& st, TrainOptions& o, const GPTConfig& pc, const nlohmann::json& parent_meta) {
  const std::string where = "train: --init-from " + o.init_from + ": ";
  const nlohmann::json parent = gpt_config_to_json(pc);
  nlohmann::json child = gpt_config_to_json(st.model);
  std::string list;
  for (const char* key : {"n_layer", "n_embd", "n_head", "block_size", "attention", "landmark_every", "xl_cache",
                          "rotary_base", "ln_eps", "bias"}) {
    if (o.given.count(key)) continue;
    child[key] = parent[key];
    list += std::string(list.empty() ? "" : ", ") + key + " " + shown(parent[key]);
  }
  if (!o.given.count("xl_cache") && !o.given.count("segment") && pc.xl_cache > 0) {
    const nlohmann::json* train = parent_meta.contains("train") ? &parent_meta["train"] : nullptr;
    if (train && train->is_object() && train->contains("segment") && (*train)["segment"].is_number_integer()) {
      o.segment = (*train)["segment"].get<int64_t>();
      list += ", segment " + std::to_string(o.segment);
    }
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

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void read_parent(Start& st, TrainOptions& o, const Tokenizer& tok, std::ostream& log) {
  const std::string where = "train: --init-from " + o.init_from + ": ";
  st.parent = load_safetensors(o.init_from);
  if (const std::string note = unverified_note(st.parent, o.init_from); !note.empty()) log << note << "\n";
  const GPTConfig pc = stored_model(st.parent, tok, o.init_from, where, o.data_dir);
  const uint64_t parent_step = meta_count(st.parent.metadata, "step", uint64_t(1) << 40, "2^40", where);
  inherit_from_parent(st, o, pc, st.parent.metadata);
  st.parent_record = {{"path", o.init_from},
                      {"crc32", file_crc32(o.init_from)},
                      {"step", parent_step},
                      {"attention", attention_kind_name(pc.attention)}};
  TrainOptions child = o;  // the inherited keys pass the flags' checks, those that waited for the parent too
  child.model = st.model;
  child.init_from.clear();  // the whole config is known now: validate() runs every check
  validate(child);
}

std::string start_from_parent(GPT& model, const TrainOptions& o, const Start& start, const Tokenizer& tok) {
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
  return log.str();
}

}  // namespace trainer_internal
}  // namespace lm
