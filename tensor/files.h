// files.h: checks every reader makes before it opens a path it was given, and the checksum
// the file formats record. Opening a FIFO for
// reading blocks until some other process writes to it, and a directory or a device "opens" and
// then fails in confusing ways; a reader that calls require_regular_file first gets a clear
// error naming the path and what it is instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lm {

// CRC-32 (zlib's, the same as Python's zlib.crc32) of n bytes, continuing from `crc` (0 starts
// a new one), so a file can be checked in pieces. Checkpoints, token files and the record of a
// fine-tune's parent use it.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);
std::string crc32_hex(uint32_t crc);  // 8 lowercase hex digits

// Throws lm::Error ("<what> <path>: ...") unless `path` exists and is a regular file (symbolic
// links are followed). Never opens the file, so it cannot block.
void require_regular_file(const std::string& path, const std::string& what);

}  // namespace lm
