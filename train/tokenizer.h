// tokenizer.h: text <-> token ids. ByteTokenizer maps each byte to its value; BpeTokenizer is
// byte-level BPE (trained here from a corpus, or GPT-2's published files). Special tokens (e.g.
// "<|landmark|>") are appended after the base vocabulary and never come out of encode().
// Base class and bytes in tokenizer.cpp, BPE (training, encoding, GPT-2 files) in bpe.cpp.
// Not here: token files and batching (token_file.h, batch.h), landmark insertion (landmark/).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. Never emits special tokens, even when the text spells their names.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // Ids -> text: base ids become their bytes, specials their names ("<|landmark|>"). Throws
  // lm::Error on an id outside [0, vocab_size()). The bytes of a split UTF-8 character are
  // returned as they are (decode is exact on bytes, not a validator).
  std::string decode(const std::vector<int32_t>& ids) const;

  virtual int64_t base_vocab_size() const = 0;  // ids that encode() can produce
  int64_t vocab_size() const { return base_vocab_size() + static_cast<int64_t>(specials_.size()); }
  virtual std::string kind() const = 0;  // "bytes" or "bpe"

  // Appends a special token after the base vocab and returns its id; an existing name returns
  // its old id (idempotent). special_id() is -1 for an unknown name.
  int32_t add_special(const std::string& name);
  int32_t special_id(const std::string& name) const;
  const std::vector<std::string>& specials() const { return specials_; }

  // Everything needed to rebuild this tokenizer: {"kind", base data (e.g. merges), "specials"}.
  nlohmann::json to_json() const;
  static std::unique_ptr<Tokenizer> from_json(const nlohmann::json& j);
  // A stable hash of to_json() ("fnv1a64:" + 16 hex digits). Two tokenizers with equal
  // fingerprints map text to the same ids; token files record it to catch mismatches. Note it
  // covers the specials, so add them before preparing data that is checked against it.
  std::string fingerprint() const;

 protected:
  virtual void base_to_json(nlohmann::json& j) const = 0;                  // fills the base data
  virtual void append_base_token(int32_t id, std::string& out) const = 0;  // id < base size

 private:
  std::vector<std::string> specials_;
};

// Writes to_json() to `path` (via path + ".tmp" and a rename) and reads it back.
void save_tokenizer(const Tokenizer& tok, const std::string& path);
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// One id per byte: id = byte value, base vocab 256. The reference every BPE test compares with.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override;
  int64_t base_vocab_size() const override { return 256; }
  std::string kind() const override { return "bytes"; }

 protected:
  void base_to_json(nlohmann::json& j) const override;
  void append_base_token(int32_t id, std::string& out) const override;
};

// Splits text into the chunks that BPE merges never cross: GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?L+| ?N+| ?[^sLN]+|s+(?!S)|s+
// with L = ASCII letters plus every byte >= 0x80 (so UTF-8 letters stay inside words), N = ASCII
// digits, s = ASCII whitespace. On ASCII text it splits exactly as GPT-2 does. Returns
// [begin, end) byte offsets that tile the text.
std::vector<std::pair<size_t, size_t>> pretokenize(const std::string& text);

// Byte-level BPE. Every base id stands for a byte string: 256 single bytes plus one id per merge.
class BpeTokenizer : public Tokenizer {
 public:
  struct Merge {
    int32_t left, right, result;
  };  // rank = position in merges()

  // Learns merges from `text` until the base vocab reaches `vocab_size` (>= 256) or no
  // adjacent pair occurs twice. Byte b gets id b, merge i gets id 256 + i. The most frequent
  // pair wins; ties go to the smallest (left, right) ids, so training is deterministic.
  // progress(merges_done, merges_wanted) is called now and then and at the end.
  // split_digits: no merge ever involves an ASCII digit, so every digit is a token of its own, as
  // in LLaMA's tokenizer (the paper's model); numbers then read digit by digit, and the merges
  // go to words. Encoding needs no flag: the merges alone decide it.
  static BpeTokenizer train(const std::string& text, int64_t vocab_size,
                            const std::function<void(int64_t, int64_t)>& progress = nullptr, bool split_digits = false);
  // GPT-2's encoder.json (token string -> id, bytes shown through GPT-2's byte-to-unicode map)
  // and vocab.bpe ("#version" line, then one "left right" merge per line, in rank order).
  // Entries that are neither bytes nor merge results (<|endoftext|>) become specials.
  static BpeTokenizer load_gpt2(const std::string& encoder_json_path, const std::string& vocab_bpe_path);
  // Rebuilds from the pieces to_json() stores; checks that they are consistent.
  BpeTokenizer(std::vector<int32_t> byte_ids, std::vector<Merge> merges);

  std::vector<int32_t> encode(const std::string& text) const override;
  int64_t base_vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  std::string kind() const override { return "bpe"; }

  const std::vector<Merge>& merges() const { return merges_; }
  const std::string& token_bytes(int32_t id) const;  // the bytes a base id stands for
  // One pre-tokenised chunk -> ids, merges applied by rank (exposed for tests).
  std::vector<int32_t> encode_chunk(const std::string& chunk) const;
  // Chunks longer than this go through merge_long_chunk (same result, O(n log n) instead of
  // n x merges applied); exposed so tests can compare the two paths.
  static constexpr size_t kLongChunk = 64;
  // Limits on what a tokenizer may hold (a tokenizer file from a stranger, or training on a run of
  // one repeated byte, where each merge doubles the longest token): bytes per token, and in all.
  static constexpr size_t kMaxTokenBytes = size_t(1) << 16, kMaxTotalBytes = size_t(1) << 26;

 protected:
  void base_to_json(nlohmann::json& j) const override;
  void append_base_token(int32_t id, std::string& out) const override;

 private:
  std::vector<int32_t> byte_ids_;                  // byte value -> id (256)
  std::vector<Merge> merges_;                      // in rank order
  std::vector<std::string> token_bytes_;           // id -> bytes
  std::unordered_map<uint64_t, int32_t> rank_of_;  // (left << 32 | right) -> rank
  std::vector<int32_t> merge_long_chunk(std::vector<int32_t> ids) const;
};

// GPT-2's reversible map from the 256 bytes to printable unicode characters (as UTF-8), so that
// its files can hold every byte as text: printable Latin-1 bytes map to themselves, the rest to
// U+0100 onwards in byte order.
std::vector<std::string> gpt2_byte_to_unicode();

}  // namespace lm
