// model_io.h: a trained model back from its checkpoint, with the tokenizer it was trained with
// (both are in the checkpoint's metadata), ready for inference.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/gpt.h"
#include "train/tokenizer.h"

namespace lm {

struct LoadedModel {
  std::unique_ptr<GPT> model;
  std::unique_ptr<Tokenizer> tokenizer;
  nlohmann::json metadata;
  int32_t landmark_id() const { return tokenizer->special_id("<|landmark|>"); }
  int32_t cmt_id() const { return tokenizer->special_id("<|cmt|>"); }  // -1 when the tokenizer has none
};

// Throws lm::Error naming the file when it is not a training checkpoint of this project.
LoadedModel load_trained_model(const std::string& checkpoint_path, Device device = Device::CPU);

}  // namespace lm
