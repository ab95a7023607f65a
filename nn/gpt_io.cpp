// gpt_io.cpp: a GPT's config as JSON and its weights from a checkpoint (gpt_io.h).
#include "nn/gpt_io.h"

#include <cmath>

namespace lm {

nlohmann::json gpt_config_to_json(const GPTConfig& c) {
  return nlohmann::json{{"vocab_size", c.vocab_size},     {"n_layer", c.n_layer},
                        {"n_head", c.n_head},             {"n_embd", c.n_embd},
                        {"block_size", c.block_size},     {"dropout", c.dropout},
                        {"rotary_base", c.rotary_base},   {"ln_eps", c.ln_eps},
                        {"bias", c.bias},                 {"attention", attention_kind_name(c.attention)},
                        {"landmark_every", c.landmark_every}, {"context_miss", c.context_miss},
                        {"xl_cache", c.xl_cache}};
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
    c.xl_cache = j.value("xl_cache", int64_t(0));  // absent in checkpoints from before the XL option
  } catch (const nlohmann::json::exception& e) {
    LM_FAIL("model config: " << e.what() << " in " << j.dump());
  }
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
                                   << " at element " << i << " (saved from a run that diverged, or corrupt)");
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
