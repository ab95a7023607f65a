// fuzz_util.h: what the libFuzzer harnesses of this folder share. The readers under test take a
// path, as users call them, so each input is written to a file of this process's own first.
//
// The rule every harness applies: an input may be rejected only with lm::Error (the project's
// "clean error naming the problem"). Anything else that escapes (another exception type, a
// sanitizer report, a crash, a hang past -timeout, memory past -rss_limit_mb) is a finding.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

#include "tensor/files.h"

namespace lm {
namespace fuzz {

// $TMPDIR (or /tmp) / lm_fuzz_<pid>_<name>: the same file for every input of one run.
inline std::string scratch_path(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/lm_fuzz_" + std::to_string(getpid()) + "_" + name;
}

// Replaces the file's contents with [data, data + size), through the project's checked writer
// (tensor/files.h). Aborts (a finding about the harness, not the library) when the file cannot be
// written.
inline void write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  try {
    write_file_atomic(path, std::string(reinterpret_cast<const char*>(data), size), "fuzz scratch");
  } catch (const std::exception&) {
    std::abort();
  }
}

// Splits an input in two at its first two bytes (a little-endian length of the first part, taken
// modulo what is left), for readers that need two files.
inline void split_two(const uint8_t* data, size_t size, std::string& first, std::string& second) {
  first.clear();
  second.clear();
  if (size < 2) return;
  const size_t rest = size - 2, n = (size_t{data[0]} | size_t{data[1]} << 8) % (rest + 1);
  first.assign(reinterpret_cast<const char*>(data) + 2, n);
  second.assign(reinterpret_cast<const char*>(data) + 2 + n, rest - n);
}

}  // namespace fuzz
}  // namespace lm
