// file_io.cpp: write_file_atomic (file_io.h).
#include "train/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tensor/check.h"

namespace lm {

void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& where) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LM_CHECK(out, where << ": cannot open " << tmp << " for writing: " << std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      LM_FAIL(where << ": writing " << tmp << " failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());  // the old `path`, if any, is untouched
    LM_FAIL(where << ": cannot rename " << tmp << " to " << path << ": " << std::strerror(err));
  }
}

}  // namespace lm
