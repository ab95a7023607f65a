// token_file.h: a corpus stored as token ids, with a small header that says how to read it and
// which tokenizer made it. TokenFile reads and validates a whole file into memory; prepare_tokens
// turns text files into one. Not here: choosing training windows (batch.h), tokenizing (tokenizer.h).
//
// Layout (all integers little-endian):
//   8 bytes  magic "LMTOKENS"
//   u32      version (1)
//   u32      token width in bytes: 2 when vocab <= 65536, else 4
//   u64      vocab size (every token is < vocab)
//   u64      token count
//   u32 + n  tokenizer fingerprint (length, then that many bytes)
//   u32      (version 2) CRC-32 (zlib's) of every byte above and of the tokens below
//   count x width bytes of tokens
// Version 1 files (no CRC) are still read, with checksummed() false.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lm {

class Tokenizer;

inline constexpr char kTokenFileMagic[9] = "LMTOKENS";  // 8 bytes in the file, no terminator
inline constexpr uint32_t kTokenFileVersion = 2;        // written; 1 and 2 are read

int token_width_for_vocab(int64_t vocab);  // 2 or 4 bytes

// Writes path + ".tmp", then renames it to path, so a crash never leaves half a file under the
// real name. Throws lm::Error if a token is outside [0, vocab).
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab,
                      const std::string& fingerprint);

class TokenFile {
 public:
  // Reads and checks the whole file; throws lm::Error naming the file and the problem (missing,
  // wrong magic, unsupported version, bad width or vocab, truncated or over-long, a CRC-32 that
  // does not match the bytes, bad token).
  explicit TokenFile(const std::string& path);
  // Tokens held in memory (synthetic data, tests), checked the same way; path() is "<memory>".
  static TokenFile from_tokens(std::vector<int32_t> tokens, int64_t vocab, std::string fingerprint = "");

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t vocab() const { return vocab_; }
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& path() const { return path_; }
  bool checksummed() const { return checksummed_; }  // read from a version-2 file (CRC verified)
  const int32_t* data() const { return tokens_.data(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t operator[](int64_t i) const { return tokens_[static_cast<size_t>(i)]; }

  // Throws, showing both fingerprints, unless this file was made by a tokenizer with `expected`.
  void check_fingerprint(const std::string& expected) const;

 private:
  TokenFile() = default;
  std::string path_;
  int64_t vocab_ = 0;
  std::string fingerprint_;
  std::vector<int32_t> tokens_;
  bool checksummed_ = false;
};

struct PrepareStats {
  int64_t files = 0, bytes = 0, tokens = 0;
};

// Text files -> tok.encode (files one after another, nothing inserted between them) -> one token
// file at out_path, stamped with tok's vocab_size() and fingerprint(). Text is encoded in pieces
// of about 1 MB cut where the pre-tokeniser always splits (an ASCII letter followed by a
// space), so the result equals encoding each file whole. progress(bytes_done, bytes_total).
PrepareStats prepare_tokens(const std::vector<std::string>& text_paths, const Tokenizer& tok,
                            const std::string& out_path,
                            const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace lm
