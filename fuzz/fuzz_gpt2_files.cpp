// fuzz_gpt2_files.cpp: GPT-2's encoder.json + vocab.bpe from a stranger (prepare --gpt2-files).
// The input is split in two (fuzz_util.h split_two); a tokenizer that loads must round-trip text.
#include <cstdlib>

#include "fuzz/fuzz_util.h"
#include "tensor/check.h"
#include "train/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string enc_path = lm::fuzz::scratch_path("encoder.json"), bpe_path = lm::fuzz::scratch_path("vocab.bpe");
  std::string enc, bpe;
  lm::fuzz::split_two(data, size, enc, bpe);
  lm::fuzz::write_scratch(enc_path, reinterpret_cast<const uint8_t*>(enc.data()), enc.size());
  lm::fuzz::write_scratch(bpe_path, reinterpret_cast<const uint8_t*>(bpe.data()), bpe.size());
  try {
    lm::BpeTokenizer tok = lm::BpeTokenizer::load_gpt2(enc_path, bpe_path);
    const std::string text = "Hello world, 2023 times\n";
    if (tok.decode(tok.encode(text)) != text) std::abort();
  } catch (const lm::Error&) {
  }
  return 0;
}
