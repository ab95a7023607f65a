// fuzz_checkpoint.cpp: a checkpoint from a stranger. load_trained_model reads the safetensors
// header and tensors (checksums, dtypes, offsets), the tokenizer and model config in its metadata,
// builds the model and copies the weights in: every reader a `--checkpoint` flag reaches.
#include "fuzz/fuzz_util.h"
#include "infer/model_io.h"
#include "tensor/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lm::fuzz::scratch_path("checkpoint.safetensors");
  lm::fuzz::write_scratch(path, data, size);
  try {
    lm::LoadedModel m = lm::load_trained_model(path);
  } catch (const lm::Error&) {
  }
  return 0;
}
