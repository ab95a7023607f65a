// model_io.cpp: load_trained_model (model_io.h).
#include "infer/model_io.h"

#include <iostream>

#include "nn/checkpoint.h"
#include "train/trainer.h"

namespace lm {

LoadedModel load_trained_model(const std::string& path, Device device) {
  Checkpoint ck = load_safetensors(path);
  if (!ck.checksummed)
    std::cerr << "note: " << path << " has no per-tensor CRC-32s (written before they existed): loaded unverified\n";
  LM_CHECK(ck.metadata.is_object() && ck.metadata.contains("model") && ck.metadata.contains("tokenizer"),
           "load: " << path << " has no model config or tokenizer in its metadata (not a training checkpoint)");
  LoadedModel m;
  m.metadata = ck.metadata;
  m.tokenizer = Tokenizer::from_json(ck.metadata["tokenizer"]);
  m.model = std::make_unique<GPT>(gpt_config_from_json(ck.metadata["model"]));
  load_model_weights(ck, *m.model, nullptr);
  m.model->eval();
  m.model->to(device);
  return m;
}

}  // namespace lm
