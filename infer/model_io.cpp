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
  // loaded and generated other text).
  const GPTConfig config = gpt_config_from_json(ck.metadata["model"]);
  check_config_fits_checkpoint(config, ck, path);
  LM_CHECK(m.tokenizer->vocab_size() == config.vocab_size,
           "load: " << path << ": the tokenizer has " << m.tokenizer->vocab_size() << " tokens but the model's vocabulary is "
                    << config.vocab_size << " (the metadata's tokenizer is not the model's)");
  if (ck.metadata.contains("tokenizer_fingerprint")) {
    const std::string want = ck.metadata["tokenizer_fingerprint"].is_string()
                                 ? ck.metadata["tokenizer_fingerprint"].get<std::string>() : std::string("(not a string)");
    LM_CHECK(want == m.tokenizer->fingerprint(), "load: " << path << ": the tokenizer's fingerprint is "
                                                     << m.tokenizer->fingerprint() << " but training recorded " << want
                                                     << " (the metadata's tokenizer was changed)");
  }
  m.model = std::make_unique<GPT>(config);
  load_gpt_weights(ck, *m.model);
  m.model->eval();
  m.model->to(device);
  return m;
}

}  // namespace lm
