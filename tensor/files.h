// files.h: checks every reader makes before it opens a path it was given. Opening a FIFO for
// reading blocks until some other process writes to it, and a directory or a device "opens" and
// then fails in confusing ways; a reader that calls require_regular_file first gets a clear
// error naming the path and what it is instead.
#pragma once

#include <string>

namespace lm {

// Throws lm::Error ("<what> <path>: ...") unless `path` exists and is a regular file (symbolic
// links are followed). Never opens the file, so it cannot block.
void require_regular_file(const std::string& path, const std::string& what);

}  // namespace lm
