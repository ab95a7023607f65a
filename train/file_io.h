// file_io.h: writing a whole file so that an interrupted write loses nothing: the bytes go to
// PATH.tmp, are flushed and checked, and then replace PATH in one rename. Token files, corpora,
// generated text and result tables all go through it.
#pragma once

#include <string>

namespace lm {

// Writes `bytes` to `path` atomically; throws lm::Error naming the file (`where` leads the
// message) when it cannot be written or renamed.
void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& where = "write");

}  // namespace lm
