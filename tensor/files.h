// files.h: checks every reader makes before it opens a path it was given, the one way a whole
// file is written, and the checksum the file formats record. Opening a FIFO for
// reading blocks until some other process writes to it, and a directory or a device "opens" and
// then fails in confusing ways; a reader that calls require_regular_file first gets a clear
// error naming the path and what it is instead. A writer must not replace what is not its own:
// write_file_atomic refuses an output path that is anything but a regular file or nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <streambuf>
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

// Throws lm::Error ("<where>: <path> is a FIFO (named pipe), not a regular file: ...") unless
// `path` is missing or a regular file. A symbolic link there is refused too, not followed: the
// writer renames a new file over the path, and the link's target may be anyone's file anywhere
// (docs/design.md section 6). Links among the path's folders are followed as usual.
void require_replaceable_output(const std::string& path, const std::string& where);

// The first step of every whole-file writer: checks `path` (require_replaceable_output), clears
// a regular PATH.tmp left by an interrupted earlier write (anything else under that name is
// refused), and creates PATH.tmp afresh (O_EXCL | O_NOFOLLOW: it writes through nothing already
// there). Returns its descriptor; the caller writes, closes and renames it over `path`, and removes
// it on failure. write_file_atomic and save_safetensors (nn/checkpoint.cpp) use it.
int open_output_temp(const std::string& path, const std::string& where);

// Writes `bytes` to `path` whole or not at all: into a temporary file PATH.tmp created afresh
// (O_EXCL, so it writes through nothing already there; a leftover regular PATH.tmp is removed
// first, anything else under that name is refused), every write and the close checked, then one
// rename over `path`. `path` must pass require_replaceable_output. On any failure (a full disk,
// a file-size limit) the temporary file is removed, the old `path` is left as it was, and an
// lm::Error names the file, led by `where`. Token files, tokenizers, tables, pages and PNGs
// (plot/canvas.cpp) are written by it.
void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& where = "write");

// The one checked open for a file that grows a line at a time (train's metrics.jsonl): `path` must
// pass require_replaceable_output (nothing there, or a regular file: no link, FIFO, device,
// socket or directory), is opened O_NOFOLLOW | O_NONBLOCK (what appears there in between cannot
// be written through, and a FIFO cannot block the open) and checked again on the descriptor to be
// a regular file; `truncate` starts it empty, else it is appended to. Lines are written whole, one
// write(2) per line or more, each checked; a failed write throws lm::Error naming the file.
class AppendFile : public std::streambuf {
 public:
  AppendFile(const std::string& path, bool truncate, const std::string& where);
  ~AppendFile() override;  // writes what is left of the last line, closes
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void write_lines(bool all);  // writes pending_ up to its last newline (all: everything)
  int fd_ = -1;
  std::string path_, where_, pending_;
};

}  // namespace lm
