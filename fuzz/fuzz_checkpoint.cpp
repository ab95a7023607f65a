// fuzz_checkpoint.cpp: a checkpoint from a stranger. load_trained_model reads the safetensors
// header and tensors (checksums, dtypes, offsets), the tokenizer and model config in its metadata,
// builds the model and copies the weights in: every reader a `--checkpoint` flag reaches.
//
// Byte mutations alone seldom get past the header's CRC-32 to the checks behind it (every key of
// the model config, its kind and range; the tokenizer and its fingerprint; a tensor entry's shape
// and offsets). So half the mutations are structured (LLVMFuzzerCustomMutator): the header is
// parsed, one value of the metadata JSON or of a tensor entry is replaced by an edge value,
// removed, renamed or nudged, and the header's CRC-32 is computed again, seven times in eight (the
// eighth keeps the old one: the checksum's own check). The other half are libFuzzer's own.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_util.h"
#include "infer/model_io.h"
#include "nn/checkpoint.h"
#include "tensor/check.h"

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) { return static_cast<size_t>(rng() % n); }

// A file as its header (parsed, keys in file order) and the bytes after it; false if the input
// is no safetensors file at all (then libFuzzer's byte mutations take over).
bool split_file(const uint8_t* data, size_t size, ordered_json& header, std::string& rest) {
  if (size < 8) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > size - 8) return false;
  header = ordered_json::parse(data + 8, data + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return false;
  rest.assign(reinterpret_cast<const char*>(data) + 8 + n, size - 8 - n);
  return true;
}

std::string join_file(const ordered_json& header, const std::string& rest) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff));
  return out + text + rest;
}

// Values at the edges of the checks: signs, zero, the int32/int64/uint64 limits, fractions,
// the extremes of a double, and every other JSON kind.
template <class J> J edge_value(Rng& rng) {
  switch (pick(rng, 22)) {
    case 0: return J(-1);
    case 1: return J(0);
    case 2: return J(1);
    case 3: return J(2);
    case 4: return J(6);
    case 5: return J(int64_t(1) << 31);
    case 6: return J(INT64_MAX);
    case 7: return J(uint64_t(INT64_MAX) + 1);
    case 8: return J(UINT64_MAX);
    case 9: return J(INT64_MIN);
    case 10: return J(0.5);
    case 11: return J(2.5);
    case 12: return J(1e-308);
    case 13: return J(1e308);
    case 14: return J(-1e308);
    case 15: return J("");
    case 16: return J("landmark");
    case 17: return J(true);
    case 18: return J(false);
    case 19: return J(nullptr);
    case 20: return J::array();
    default: return J::object();
  }
}

// One change somewhere under `node`: from the top, descend into a random child two times in three
// (so the model config, the training state and the tokenizer's deep lists are all reached), then
// replace, remove, rename or nudge what is there.
template <class J> void mutate_json(J& node, Rng& rng) {
  J* at = &node;
  J* parent = nullptr;
  std::string key;
  size_t index = 0;
  while ((at->is_object() || at->is_array()) && !at->empty() && (parent == nullptr || pick(rng, 3) != 0)) {
    parent = at;
    if (at->is_object()) {
      auto it = at->begin();
      std::advance(it, static_cast<long>(pick(rng, at->size())));
      key = it.key();
      at = &(*at)[key];
    } else {
      index = pick(rng, at->size());
      at = &(*at)[index];
    }
  }
  const size_t action = pick(rng, 8);
  if (parent != nullptr && action == 0) {  // remove it
    if (parent->is_object()) parent->erase(key);
    else parent->erase(index);
  } else if (parent != nullptr && parent->is_object() && action == 1 && !key.empty()) {  // rename: one bit of the key
    std::string renamed = key;
    renamed[pick(rng, renamed.size())] ^= static_cast<char>(1 << pick(rng, 7));
    J value = *at;
    parent->erase(key);
    (*parent)[renamed] = value;
  } else if (at->is_number() && action == 2) {  // nudge a number (without overflowing here)
    const bool up = pick(rng, 2) == 0;
    if (at->is_number_float()) {
      *at = at->template get<double>() * (up ? 2.0 : 0.5);
    } else if (at->is_number_unsigned()) {
      *at = at->template get<uint64_t>() + (up ? 1u : UINT64_MAX);  // unsigned arithmetic wraps by definition
    } else {
      const int64_t v = at->template get<int64_t>();
      *at = v == INT64_MAX ? v - 1 : v == INT64_MIN ? v + 1 : v + (up ? 1 : -1);
    }
  } else {
    *at = edge_value<J>(rng);
  }
}

// A structured mutation of the header: the metadata JSON (three times in four) or a tensor entry
// or the tensors' CRC-32 list; then the header's CRC-32 again, seven times in eight.
bool mutate_header(ordered_json& header, Rng& rng) {
  if (!header.contains("__metadata__") || !header["__metadata__"].is_object()) return false;
  ordered_json& meta = header["__metadata__"];
  const bool in_metadata = pick(rng, 4) != 0 && meta.contains("landmark") && meta["landmark"].is_string();
  if (in_metadata || (pick(rng, 3) == 0 && meta.contains("crc32") && meta["crc32"].is_string())) {
    const char* field = in_metadata ? "landmark" : "crc32";
    json inner = json::parse(meta[field].get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (inner.is_discarded()) return false;
    mutate_json(inner, rng);
    meta[field] = inner.dump();
  } else {
    std::vector<std::string> tensors;
    for (const auto& [name, value] : header.items())
      if (name != "__metadata__") tensors.push_back(name);
    if (tensors.empty()) return false;
    mutate_json(header[tensors[pick(rng, tensors.size())]], rng);
  }
  if (meta.contains("header_crc32") && pick(rng, 8) != 0) meta["header_crc32"] = lm::checkpoint_header_crc32(header);
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  if (pick(rng, 2) == 0) {
    try {
      ordered_json header;
      std::string rest;
      if (split_file(data, size, header, rest) && mutate_header(header, rng)) {
        const std::string out = join_file(header, rest);
        if (out.size() <= max_size) {
          std::memcpy(data, out.data(), out.size());
          return out.size();
        }
      }
    } catch (const std::exception&) {  // e.g. a string that is not UTF-8 cannot be dumped: mutate bytes instead
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lm::fuzz::scratch_path("checkpoint.safetensors");
  lm::fuzz::write_scratch(path, data, size);
  try {
    lm::LoadedModel m = lm::load_trained_model(path);
  } catch (const lm::Error&) {
  }
  return 0;
}
