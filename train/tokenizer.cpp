// tokenizer.cpp: the Tokenizer base (specials, decode, JSON, fingerprint, save/load), the byte
// tokenizer and the GPT-2-style pre-tokeniser. BPE itself lives in bpe.cpp.
// Not here: any file of tokens (token_file.cpp).
#include "train/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tensor/check.h"
#include "tensor/files.h"
#include "train/file_io.h"

namespace lm {

// ---- specials and decode ----

int32_t Tokenizer::add_special(const std::string& name) {
  LM_CHECK(!name.empty(), "add_special: a special token needs a non-empty name");
  int32_t existing = special_id(name);
  if (existing >= 0) return existing;
  specials_.push_back(name);
  return static_cast<int32_t>(vocab_size() - 1);
}

int32_t Tokenizer::special_id(const std::string& name) const {
  for (size_t i = 0; i < specials_.size(); ++i)
    if (specials_[i] == name) return static_cast<int32_t>(base_vocab_size() + static_cast<int64_t>(i));
  return -1;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  const int64_t base = base_vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    LM_CHECK(id >= 0 && id < vocab_size(), "decode: token id " << id << " at position " << i
                                                               << " is outside the vocabulary [0, " << vocab_size()
                                                               << ") of this " << kind() << " tokenizer (" << base
                                                               << " base ids + " << specials_.size() << " specials)");
    if (id < base)
      append_base_token(id, out);
    else
      out += specials_[static_cast<size_t>(id - base)];
  }
  return out;
}

// ---- JSON, fingerprint, files ----

nlohmann::json Tokenizer::to_json() const {
  nlohmann::json j;
  j["kind"] = kind();
  j["version"] = 1;
  base_to_json(j);
  j["specials"] = specials_;
  return j;
}

namespace {
// A token id from JSON: an integer in [0, 2^30), checked before conversion (a float such as
// 1.67e45, or 2^32 + 300, would otherwise be undefined behaviour or wrap to a valid-looking id).
int32_t json_token_id(const nlohmann::json& v, const char* what) {
  LM_CHECK((v.is_number_integer() || v.is_number_unsigned()) && !v.is_number_float(),
           "tokenizer JSON: " << what << " must be an integer id, got " << v.dump().substr(0, 60));
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < (uint64_t(1) << 30)
                                               : (v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t(1) << 30));
  LM_CHECK(in_range, "tokenizer JSON: " << what << " " << v.dump() << " is outside [0, 2^30)");
  return static_cast<int32_t>(v.get<int64_t>());
}
}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json(const nlohmann::json& j) {
  std::unique_ptr<Tokenizer> tok;
  try {
    LM_CHECK(j.is_object() && j.contains("kind"),
             "tokenizer JSON: expected an object with a \"kind\" "
             "field, got: "
                 << j.dump().substr(0, 200));
    const std::string kind = j.at("kind").get<std::string>();
    // The version is checked as JSON before any conversion: value<int> of a float such as 2e31 is
    // undefined behaviour (found by the tokenizer_json fuzz harness).
    if (j.contains("version")) {
      const nlohmann::json& v = j.at("version");
      LM_CHECK((v.is_number_integer() || v.is_number_unsigned()) && v.get<int64_t>() == 1,
               "tokenizer JSON: unsupported version " << v.dump().substr(0, 60) << " (this build reads 1)");
    }
    if (kind == "bytes") {
      tok = std::make_unique<ByteTokenizer>();
    } else if (kind == "bpe") {
      const nlohmann::json& ids = j.at("byte_ids");
      LM_CHECK(ids.is_array(), "tokenizer JSON: byte_ids must be an array of 256 ids");
      std::vector<int32_t> byte_ids;
      for (const auto& v : ids) byte_ids.push_back(json_token_id(v, "a byte id"));
      const nlohmann::json& ms = j.at("merges");
      LM_CHECK(ms.is_array(), "tokenizer JSON: merges must be an array of [left, right, result]");
      std::vector<BpeTokenizer::Merge> merges;
      for (const auto& m : ms) {
        LM_CHECK(m.is_array() && m.size() == 3,
                 "tokenizer JSON: each merge must be [left, right, "
                 "result], got "
                     << m.dump().substr(0, 80));
        merges.push_back({json_token_id(m[0], "a merge's left id"), json_token_id(m[1], "a merge's right id"),
                          json_token_id(m[2], "a merge's result id")});
      }
      tok = std::make_unique<BpeTokenizer>(std::move(byte_ids), std::move(merges));
    } else {
      LM_FAIL("tokenizer JSON: unknown kind \"" << kind << "\" (expected \"bytes\" or \"bpe\")");
    }
    for (const auto& s : j.at("specials")) {
      const std::string name = s.get<std::string>();
      LM_CHECK(tok->special_id(name) < 0, "tokenizer JSON: special \"" << name << "\" listed twice");
      tok->add_special(name);
    }
  } catch (const nlohmann::json::exception& e) {
    LM_FAIL("tokenizer JSON: missing or mistyped field (" << e.what() << ")");
  }
  return tok;
}

std::string Tokenizer::fingerprint() const {
  // FNV-1a over the canonical dump: nlohmann's objects keep keys sorted, so the text (and the
  // hash) depends only on the content.
  const std::string text = to_json().dump();
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + hex;
}

void save_tokenizer(const Tokenizer& tok, const std::string& path) {
  write_file_atomic(path, tok.to_json().dump() + "\n", "save_tokenizer");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  require_regular_file(path, "load_tokenizer:");
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in, "load_tokenizer: cannot open " << path << " (missing file?)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    LM_FAIL("load_tokenizer: " << path << " is not valid JSON (" << e.what() << ")");
  }
  return Tokenizer::from_json(j);
}

// ---- bytes ----

std::vector<int32_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

void ByteTokenizer::base_to_json(nlohmann::json&) const {}  // nothing beyond the kind

void ByteTokenizer::append_base_token(int32_t id, std::string& out) const {
  out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
}

// ---- pre-tokenisation (see the pattern in tokenizer.h) ----

namespace {
enum class CharClass { Letter, Digit, Space, Other };

CharClass char_class(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::Letter;
  if (c >= '0' && c <= '9') return CharClass::Digit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return CharClass::Space;
  return CharClass::Other;
}

// Length of the contraction ('s 't 'm 'd 're 've 'll) starting at i, or 0.
size_t contraction_length(const std::string& text, size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  char a = text[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= text.size()) return 0;
  char b = text[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}
}  // namespace

std::vector<std::pair<size_t, size_t>> pretokenize(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> chunks;
  const size_t n = text.size();
  auto cls = [&](size_t k) { return char_class(static_cast<unsigned char>(text[k])); };
  size_t i = 0;
  while (i < n) {
    size_t end;
    if (size_t c = contraction_length(text, i)) {
      end = i + c;
    } else {
      // " ?L+", " ?N+", " ?[^sLN]+": one optional leading space, then a run of one class.
      size_t j = (text[i] == ' ' && i + 1 < n) ? i + 1 : i;
      CharClass k = cls(j);
      if (k != CharClass::Space) {
        end = j + 1;
        while (end < n && cls(end) == k) ++end;
      } else {
        // Whitespace run [i, r). "s+(?!S)" takes all of it at the end of the text, else all but
        // its last character (which then leads the next word); a lone one is taken by "s+".
        size_t r = i;
        while (r < n && cls(r) == CharClass::Space) ++r;
        end = (r == n) ? n : (r - i >= 2 ? r - 1 : i + 1);
      }
    }
    chunks.emplace_back(i, end);
    i = end;
  }
  return chunks;
}

}  // namespace lm
