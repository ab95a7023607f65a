// checkpoint.h: named tensors + JSON metadata saved as a safetensors file, a format other tools
// (Python's `safetensors`, numpy readers) can open. Layout, offsets and every rejected input are
// described in checkpoint.cpp. This is only the file format: which tensors a model, optimizer or
// training run puts in a checkpoint (and how it resumes from one) is decided by their owners.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace lm {

// The string every checkpoint carries in __metadata__["format"]. Bump it when the meaning of
// the stored tensors or metadata changes incompatibly.
inline constexpr const char* kCheckpointFormat = "landmark-v1";

struct Checkpoint {
  // (name, tensor) in a stable order: the order they were added; after loading, file order.
  std::vector<std::pair<std::string, Tensor>> tensors;
  // Anything JSON (model config, step, RNG state, ...). Stored as one string in the file,
  // because safetensors metadata values must be strings.
  nlohmann::json metadata;
  // After load_safetensors: whether the file carried a CRC-32 per tensor (all verified), and one
  // over its header (verified): the metadata, tensor names, shapes and offsets. Files written
  // before either existed load with false; unverified_note says so for callers to print.
  bool checksummed = false;
  bool header_checksummed = false;

  void add(const std::string& name, const Tensor& t);  // throws if `name` is already present
  bool has(const std::string& name) const;
  // Throws lm::Error naming the missing tensor and a few of the names that do exist.
  const Tensor& get(const std::string& name) const;
  // Same, and also checks the shape and dtype (the message names the tensor, the expected and
  // the found shape and dtype). Use it when loading into a model whose shapes are known.
  Tensor get(const std::string& name, const Shape& expected_shape, DType expected_dtype) const;
};

// Copies each tensor to the host (contiguous, little-endian), writes `path + ".tmp"`, fsyncs it
// and renames it over `path`: a crash mid-save leaves the previous file intact. Records a CRC-32
// of every tensor's bytes in __metadata__["crc32"] (a JSON object as a string), and one of the
// header itself in __metadata__["header_crc32"] (checkpoint_header_crc32).
void save_safetensors(const std::string& path, const Checkpoint& ckpt);

// The header's checksum: the CRC-32 of the header as compact JSON, keys in file order, without
// __metadata__["header_crc32"] (which holds the result), as 8 hex digits. A flipped bit in the
// metadata leaves valid JSON that only this can catch (attention -> cttention).
std::string checkpoint_header_crc32(const nlohmann::ordered_json& header);

// "" when every byte of a loaded file was verified; else a one-line note naming `path` and what
// was read unverified (a file from before the checksums), for the caller to print.
std::string unverified_note(const Checkpoint& ckpt, const std::string& path);

// Reads a checkpoint written by save_safetensors (or any safetensors file with F32/F64/I32
// tensors and __metadata__["format"] == kCheckpointFormat). Tensors come back on the CPU.
// Every malformed input is an lm::Error that names the file and the problem; so is a header or a
// tensor whose bytes do not match its recorded CRC-32, and a __metadata__ entry this reader does
// not know (a damaged "header_crc32" must not pass for a file from before the header's checksum).
Checkpoint load_safetensors(const std::string& path);

}  // namespace lm
