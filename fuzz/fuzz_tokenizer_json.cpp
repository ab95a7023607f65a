// fuzz_tokenizer_json.cpp: a tokenizer file from a stranger (what `prepare` writes and every
// checkpoint embeds). A tokenizer that loads must be usable: encoding then decoding gives back
// the text, for a fixed sentence and for the input's own bytes.
#include <cstdlib>

#include "fuzz/fuzz_util.h"
#include "tensor/check.h"
#include "train/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lm::fuzz::scratch_path("tokenizer.json");
  lm::fuzz::write_scratch(path, data, size);
  std::unique_ptr<lm::Tokenizer> tok;
  try {
    tok = lm::load_tokenizer(path);
  } catch (const lm::Error&) {
    return 0;
  }
  const std::string texts[2] = {"The pass key is 31415. Remember it.\n", std::string(reinterpret_cast<const char*>(data), size)};
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok->encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();  // an id the model could not embed
    if (tok->decode(ids) != text) std::abort();              // the tokenizer loses text
  }
  return 0;
}
