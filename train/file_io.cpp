// file_io.cpp: write_file_atomic (file_io.h).
#include "train/file_io.h"

#include <cstdio>
#include <fstream>

#include "tensor/check.h"

namespace lm {

void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& where) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LM_CHECK(out, where << ": cannot open " << tmp << " for writing");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    LM_CHECK(out, where << ": writing " << tmp << " failed (disk full?)");
  }
  LM_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, where << ": cannot rename " << tmp << " to " << path);
}

}  // namespace lm
