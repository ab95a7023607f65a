// gpt_io.cpp: a GPT's config as JSON and its weights from a checkpoint (gpt_io.h).
#include "nn/gpt_io.h"

#include <cmath>
#include <cstdint>

namespace lm {

nlohmann::json gpt_config_to_json(const GPTConfig& c) {
  return nlohmann::json{{"vocab_size", c.vocab_size},
                        {"n_layer", c.n_layer},
                        {"n_head", c.n_head},
                        {"n_embd", c.n_embd},
                        {"block_size", c.block_size},
                        {"dropout", c.dropout},
                        {"rotary_base", c.rotary_base},
                        {"ln_eps", c.ln_eps},
                        {"bias", c.bias},
                        {"attention", attention_kind_name(c.attention)},
                        {"landmark_every", c.landmark_every},
                        {"context_miss", c.context_miss},
                        {"xl_cache", c.xl_cache}};
}

namespace {

// One key of a stored model config: it must be there (no default stands in for a key that is
// missing: a damaged name once turned a landmark model into a standard one), and of its kind. An
// error names the key in words; ranges are GPTConfig::validate's.
const nlohmann::json& config_key(const nlohmann::json& j, const char* key) {
  LM_CHECK(j.contains(key), "model config: '" << key << "' is missing (every architecture key is required: without "
                                              << "it the file does not say which model it holds)");
  return j[key];
}
int64_t config_int(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = config_key(j, key);
  // A number written with a fraction (302.7) is not a count, and nlohmann would truncate it.
  LM_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)),
           "model config: '" << key << "' must be a whole number, got " << v.dump());
  return v.get<int64_t>();
}
double config_real(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = config_key(j, key);
  // Parsed JSON holds no NaN or infinity, but a config built in memory can.
  LM_CHECK(v.is_number() && std::isfinite(v.get<double>()),
           "model config: '" << key << "' must be a finite number, got " << v.dump());
  return v.get<double>();
}
bool config_bool(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = config_key(j, key);
  LM_CHECK(v.is_boolean(), "model config: '" << key << "' must be true or false, got " << v.dump());
  return v.get<bool>();
}

}  // namespace

GPTConfig gpt_config_from_json(const nlohmann::json& j) {
  LM_CHECK(j.is_object(), "model config: expected a JSON object, got " << j.dump());
  GPTConfig c;
  c.vocab_size = config_int(j, "vocab_size");
  c.n_layer = config_int(j, "n_layer");
  c.n_head = config_int(j, "n_head");
  c.n_embd = config_int(j, "n_embd");
  c.block_size = config_int(j, "block_size");
  c.dropout = config_real(j, "dropout");
  c.rotary_base = config_real(j, "rotary_base");
  c.ln_eps = config_real(j, "ln_eps");
  c.bias = config_bool(j, "bias");
  const nlohmann::json& attention = config_key(j, "attention");
  LM_CHECK(attention.is_string(),
           "model config: 'attention' must be \"standard\" or \"landmark\", got " << attention.dump());
  c.attention = parse_attention_kind(attention.get<std::string>());
  c.landmark_every = config_int(j, "landmark_every");
  c.context_miss = config_bool(j, "context_miss");
  c.xl_cache = config_int(j, "xl_cache");
  c.validate();
  return c;
}

void check_config_fits_checkpoint(const GPTConfig& config, const Checkpoint& ckpt, const std::string& path) {
  double values = 0;  // the model's tensors only (a training checkpoint also holds optimizer moments)
  for (const auto& [name, t] : ckpt.tensors)
    if (name.rfind("model.", 0) == 0) values += static_cast<double>(t.numel());
  // approx_params() slightly overcounts (it assumes biases); half of it is a safe lower bound.
  LM_CHECK(values >= 0.5 * config.approx_params(),
           path << ": the model config describes about " << config.approx_params() << " parameters but the file holds "
                << values << " model values (a damaged or hand-edited config?)");
}

void require_finite(const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F64) return;
  const Tensor c = t.to(Device::CPU).contiguous();
  const float* pf = c.dtype() == DType::F32 ? c.data<float>() : nullptr;
  const double* pd = c.dtype() == DType::F64 ? c.data<double>() : nullptr;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const double v = pf ? static_cast<double>(pf[i]) : pd[i];
    LM_CHECK(std::isfinite(v), "checkpoint tensor '" << name << "' holds " << (std::isnan(v) ? "NaN" : "an infinity")
                                                     << " at element " << i
                                                     << " (saved from a run that diverged, or corrupt)");
  }
}

void load_gpt_weights(const Checkpoint& ck, GPT& model) {
  for (auto& [name, p] : model.named_parameters()) {
    const Tensor t = ck.get("model." + name, p->shape(), p->dtype());
    require_finite(t, "model." + name);
    p->value().copy_(t.to(p->device()));
  }
}

}  // namespace lm
