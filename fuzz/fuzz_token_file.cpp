// fuzz_token_file.cpp: a token file from a stranger (train --data). TokenFile checks magic,
// version, width, vocab, count, fingerprint, CRC-32 and every token; what it accepts must hold
// only tokens below its vocabulary.
#include <cstdlib>

#include "fuzz/fuzz_util.h"
#include "tensor/check.h"
#include "train/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lm::fuzz::scratch_path("tokens.bin");
  lm::fuzz::write_scratch(path, data, size);
  try {
    lm::TokenFile f(path);
    for (int64_t i = 0; i < f.size(); ++i)
      if (f[i] < 0 || f[i] >= f.vocab()) std::abort();  // accepted a token outside the vocabulary
  } catch (const lm::Error&) {
  }
  return 0;
}
