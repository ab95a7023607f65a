// gpt_io.h: a GPT between memory and a checkpoint: its config as JSON, and its weights from a
// loaded safetensors file. Shared by training (train/trainer_checkpoint.cpp: checkpoints and
// resume; train/trainer_init_from.cpp: --init-from) and inference (infer/model_io.cpp), so that
// reading a model needs nothing of the training loop. Not here: the file format itself
// (nn/checkpoint.h) or optimizer state (the trainer loads AdamW's moments next to these weights).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "nn/checkpoint.h"
#include "nn/gpt.h"

namespace lm {

nlohmann::json gpt_config_to_json(const GPTConfig& c);
// The config back, validated (GPTConfig::validate). Every key is required: a missing one, or one of
// the wrong kind (a fraction where a count belongs, an infinity), is an error naming it.
GPTConfig gpt_config_from_json(const nlohmann::json& j);

// Before a model is built from a checkpoint's config: the file must hold at least about as many
// values as that model has parameters, else an error naming `path` and both counts. A small file
// whose config describes a huge model (n_layer 400, d 1024: 20 GB) is refused before anything is
// allocated, so what loading a checkpoint can allocate is bounded by the file's own size.
void check_config_fits_checkpoint(const GPTConfig& config, const Checkpoint& ckpt, const std::string& path);

// A stored tensor that is NaN or infinite is an error naming `name` and the element: loading it
// would only fail later, as a NaN loss far from its cause. Integer tensors pass.
void require_finite(const Tensor& t, const std::string& name);

// Every parameter of `model` from the checkpoint's "model.<name>" tensor: a missing tensor or a
// shape mismatch is an error naming the tensor (and both shapes), a non-finite value too.
void load_gpt_weights(const Checkpoint& ckpt, GPT& model);

}  // namespace lm
