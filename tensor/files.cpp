// files.cpp: require_regular_file (files.h).
#include "tensor/files.h"

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

}  // namespace lm
