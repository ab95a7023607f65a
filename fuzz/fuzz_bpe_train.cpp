// fuzz_bpe_train.cpp: BPE training on any text (prepare --tokenizer bpe). The trained tokenizer
// must round-trip its own training text, with and without digits kept apart, and survive a
// save/load through JSON unchanged.
#include <cstdlib>

#include "fuzz/fuzz_util.h"
#include "tensor/check.h"
#include "train/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const bool split_digits = data[0] & 1;
  const int64_t vocab = 256 + data[0] % 64;
  lm::BpeTokenizer tok = lm::BpeTokenizer::train(text, vocab, nullptr, split_digits);
  if (tok.base_vocab_size() > vocab) std::abort();
  const std::vector<int32_t> ids = tok.encode(text);
  if (tok.decode(ids) != text) std::abort();
  std::unique_ptr<lm::Tokenizer> back = lm::Tokenizer::from_json(tok.to_json());
  if (back->encode(text) != ids) std::abort();
  return 0;
}
