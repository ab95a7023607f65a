// files.cpp: require_regular_file and the CRC-32 helpers (files.h).
#include "tensor/files.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "tensor/check.h"

namespace lm {

void require_regular_file(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  LM_CHECK(!ec && fs::exists(st), what << " " << path << ": cannot open it: "
                                       << (ec && ec != std::errc::no_such_file_or_directory ? ec.message()
                                                                                           : "No such file or directory"));
  const char* kind = fs::is_directory(st)  ? "a directory"
                     : fs::is_fifo(st)     ? "a FIFO (named pipe)"
                     : fs::is_socket(st)   ? "a socket"
                     : fs::is_block_file(st) || fs::is_character_file(st) ? "a device"
                                                                         : nullptr;
  LM_CHECK(fs::is_regular_file(st), what << " " << path << ": this is " << (kind ? kind : "not a regular file")
                                         << ", not a regular file");
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  uLong c = crc;
  const Bytef* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib takes lengths as uInt: long spans go in slices
    const uInt piece = static_cast<uInt>(std::min<size_t>(n, size_t(1) << 30));
    c = crc32(c, p, piece);
    p += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(c);
}

std::string crc32_hex(uint32_t crc) {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  return hex;
}

}  // namespace lm
