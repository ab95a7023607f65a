// model_io.cpp: load_trained_model (model_io.h).
#include "infer/model_io.h"

#include <iostream>

#include "nn/checkpoint.h"
#include "nn/gpt_io.h"

namespace lm {

LoadedModel load_trained_model(const std::string& path, Device device) {
  Checkpoint ck = load_safetensors(path);
  if (const std::string note = unverified_note(ck, path); !note.empty()) std::cerr << note << "\n";
  LM_CHECK(ck.metadata.is_object() && ck.metadata.contains("model") && ck.metadata.contains("tokenizer"),
           "load: " << path << " has no model config or tokenizer in its metadata (not a training checkpoint)");
  LoadedModel m;
  m.metadata = ck.metadata;
  m.tokenizer = Tokenizer::from_json(ck.metadata["tokenizer"]);
  // The tokenizer must be the one the model was trained with: same vocabulary size as the
  // model's embedding, and the fingerprint training recorded (a tokenizer one merge short once
  // loaded and generated other text). The fingerprint is required: every training checkpoint has
  // one, and without it two byte ids swapped in the metadata once decoded "Tha sky is yallow".
  const GPTConfig config = gpt_config_from_json(ck.metadata["model"]);
  check_config_fits_checkpoint(config, ck, path);
  LM_CHECK(m.tokenizer->vocab_size() == config.vocab_size,
           "load: " << path << ": the tokenizer has " << m.tokenizer->vocab_size()
                    << " tokens but the model's vocabulary is " << config.vocab_size
                    << " (the metadata's tokenizer is not the model's)");
  const nlohmann::json& fp =
      ck.metadata.contains("tokenizer_fingerprint") ? ck.metadata["tokenizer_fingerprint"] : nlohmann::json();
  LM_CHECK(fp.is_string(), "load: " << path << ": the metadata's 'tokenizer_fingerprint' is "
                                    << (fp.is_null() ? std::string("missing") : "not a string: " + fp.dump())
                                    << " (training records it; without it a changed tokenizer cannot be told)");
  LM_CHECK(fp.get<std::string>() == m.tokenizer->fingerprint(),
           "load: " << path << ": the tokenizer's fingerprint is " << m.tokenizer->fingerprint()
                    << " but training recorded " << fp.get<std::string>() << " (the metadata's tokenizer was changed)");
  m.model = std::make_unique<GPT>(config);
  load_gpt_weights(ck, *m.model);
  m.model->eval();
  m.model->to(device);
  return m;
}

}  // namespace lm
