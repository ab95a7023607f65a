// token_file.cpp: writing, reading and validating token files (layout in token_file.h), and
// prepare_tokens (text files -> token file). Integers are assembled byte by byte, so the files
// are little-endian on any host. Not here: tokenizers themselves (tokenizer.cpp, bpe.cpp).
#include "train/token_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tensor/check.h"
#include "tensor/files.h"
#include "train/file_io.h"
#include "train/tokenizer.h"

namespace lm {

namespace {
constexpr size_t kFixedHeader = 8 + 4 + 4 + 8 + 8 + 4;  // up to and including the fingerprint length
constexpr uint32_t kMaxFingerprint = 4096;              // a sanity bound against corrupt lengths

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string printable(std::string s) {  // for quoting foreign bytes in a message
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

void check_tokens(const std::vector<int32_t>& tokens, int64_t vocab, const std::string& where) {
  for (size_t i = 0; i < tokens.size(); ++i)
    LM_CHECK(tokens[i] >= 0 && tokens[i] < vocab, where << ": token " << tokens[i] << " at index " << i
                                                        << " is out of range: it must be in [0, vocab) = [0, " << vocab
                                                        << ")");
}
}  // namespace

int token_width_for_vocab(int64_t vocab) { return vocab <= 65536 ? 2 : 4; }

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab,
                      const std::string& fingerprint) {
  const std::string where = "write_token_file " + path;
  LM_CHECK(vocab >= 1 && vocab <= (int64_t{1} << 31), where << ": vocab " << vocab << " must be in [1, 2^31]");
  LM_CHECK(fingerprint.size() <= kMaxFingerprint,
           where << ": fingerprint of " << fingerprint.size() << " bytes is longer than " << kMaxFingerprint);
  check_tokens(tokens, vocab, where);
  const int width = token_width_for_vocab(vocab);

  std::string header(kTokenFileMagic, 8);
  put_le(header, kTokenFileVersion, 4);
  put_le(header, static_cast<uint64_t>(width), 4);
  put_le(header, static_cast<uint64_t>(vocab), 8);
  put_le(header, tokens.size(), 8);
  put_le(header, fingerprint.size(), 4);
  header += fingerprint;
  std::string body;
  body.reserve(tokens.size() * static_cast<size_t>(width));
  for (int32_t t : tokens) put_le(body, static_cast<uint32_t>(t), width);
  uint32_t crc = crc32_update(0, header.data(), header.size());
  crc = crc32_update(crc, body.data(), body.size());
  put_le(header, crc, 4);

  write_file_atomic(path, header + body, where);
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  const std::string where = "token file " + path;
  require_regular_file(path, "token file");
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in, where << ": cannot open it (missing file? run `prepare` first)");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();

  LM_CHECK(n >= kFixedHeader,
           where << ": truncated header: " << n << " bytes, a header needs at least " << kFixedHeader);
  LM_CHECK(std::memcmp(p, kTokenFileMagic, 8) == 0, where << ": wrong magic: expected \"LMTOKENS\", got \""
                                                          << printable(bytes.substr(0, 8)) << "\" (not a token file)");
  const uint64_t version = get_le(p + 8, 4);
  LM_CHECK(version == 1 || version == 2, where << ": unsupported version " << version << " (this build reads 1 and 2)");
  const uint64_t width = get_le(p + 12, 4);
  const uint64_t vocab = get_le(p + 16, 8);
  const uint64_t count = get_le(p + 24, 8);
  const uint64_t fp_len = get_le(p + 32, 4);
  LM_CHECK(vocab >= 1 && vocab <= (uint64_t{1} << 31), where << ": bad vocab size " << vocab);
  LM_CHECK(width == static_cast<uint64_t>(token_width_for_vocab(static_cast<int64_t>(vocab))),
           where << ": bad token width " << width << " for vocab " << vocab << " (expected "
                 << token_width_for_vocab(static_cast<int64_t>(vocab)) << ")");
  LM_CHECK(fp_len <= kMaxFingerprint && kFixedHeader + fp_len <= n, where << ": truncated header: the "
                                                                             "fingerprint needs "
                                                                          << fp_len << " bytes but the file has "
                                                                          << n - kFixedHeader << " left");
  const size_t crc_bytes = version >= 2 ? 4 : 0;
  LM_CHECK(kFixedHeader + fp_len + crc_bytes <= n, where << ": truncated header: no room for the CRC-32");
  const size_t data_start = kFixedHeader + fp_len + crc_bytes;
  const uint64_t have = n - data_start;
  LM_CHECK(count <= have / width && have == count * width, where << ": truncated or corrupt: the header "
                                                                    "says "
                                                                 << count << " tokens (" << count << " x " << width
                                                                 << " bytes) but " << have
                                                                 << " bytes of tokens follow the header");

  if (version >= 2) {  // the bytes before the CRC field, then the tokens
    const size_t at = kFixedHeader + fp_len;
    uint32_t crc = crc32_update(0, p, at);
    crc = crc32_update(crc, p + data_start, static_cast<size_t>(have));
    const uint32_t recorded = static_cast<uint32_t>(get_le(p + at, 4));
    LM_CHECK(crc == recorded, where << ": corrupt: its bytes have CRC-32 " << crc32_hex(crc) << ", the file recorded "
                                    << crc32_hex(recorded) << " (re-run prepare)");
    checksummed_ = true;
  }
  vocab_ = static_cast<int64_t>(vocab);
  fingerprint_ = bytes.substr(kFixedHeader, fp_len);
  tokens_.resize(count);
  for (size_t i = 0; i < count; ++i)
    tokens_[i] = static_cast<int32_t>(get_le(p + data_start + i * width, static_cast<int>(width)));
  // Values >= 2^31 wrap to negative int32 above and are caught here too.
  check_tokens(tokens_, vocab_, where);
}

TokenFile TokenFile::from_tokens(std::vector<int32_t> tokens, int64_t vocab, std::string fingerprint) {
  LM_CHECK(vocab >= 1 && vocab <= (int64_t{1} << 31), "TokenFile::from_tokens: bad vocab size " << vocab);
  check_tokens(tokens, vocab, "TokenFile::from_tokens");
  TokenFile f;
  f.path_ = "<memory>";
  f.vocab_ = vocab;
  f.fingerprint_ = std::move(fingerprint);
  f.tokens_ = std::move(tokens);
  return f;
}

void TokenFile::check_fingerprint(const std::string& expected) const {
  LM_CHECK(fingerprint_ == expected, "token file " << path_ << " was made by tokenizer " << fingerprint_
                                                   << " but the model uses tokenizer " << expected
                                                   << ": re-run prepare with the model's tokenizer");
}

// ---- prepare ----

namespace {
// The end of the next piece: at least `target` bytes after `from` where possible, at a point k
// with text[k-1] an ASCII letter and text[k] == ' '. The pre-tokeniser ends a word there and
// decides each chunk by looking only forward, so encoding the pieces one by one gives the
// same ids as encoding the whole text.
size_t piece_end(const std::string& text, size_t from, size_t target) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (size_t k = from + target; k < text.size(); ++k)
    if (text[k] == ' ' && letter(text[k - 1])) return k;
  return text.size();
}
}  // namespace

PrepareStats prepare_tokens(const std::vector<std::string>& text_paths, const Tokenizer& tok,
                            const std::string& out_path, const std::function<void(int64_t, int64_t)>& progress) {
  LM_CHECK(!text_paths.empty(), "prepare: no text files given");
  PrepareStats stats;
  std::vector<std::string> texts;
  int64_t total = 0;
  for (const std::string& path : text_paths) {
    require_regular_file(path, "prepare: text file");
    std::ifstream in(path, std::ios::binary);
    LM_CHECK(in, "prepare: cannot open text file " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    texts.push_back(ss.str());
    total += static_cast<int64_t>(texts.back().size());
  }
  std::vector<int32_t> tokens;
  constexpr size_t kPiece = 1 << 20;
  for (const std::string& text : texts) {
    for (size_t begin = 0; begin < text.size();) {
      size_t end = piece_end(text, begin, kPiece);
      std::vector<int32_t> ids = tok.encode(text.substr(begin, end - begin));
      tokens.insert(tokens.end(), ids.begin(), ids.end());
      stats.bytes += static_cast<int64_t>(end - begin);
      begin = end;
      if (progress) progress(stats.bytes, total);
    }
    ++stats.files;
  }
  stats.tokens = static_cast<int64_t>(tokens.size());
  write_token_file(out_path, tokens, tok.vocab_size(), tok.fingerprint());
  return stats;
}

}  // namespace lm
