// files.cpp: require_regular_file, require_replaceable_output, write_file_atomic, AppendFile and
// the CRC-32 helpers (files.h).
#include "tensor/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "tensor/check.h"

namespace lm {

namespace {

namespace fs = std::filesystem;

// What a path that is not a regular file is, in words.
const char* kind_of(const fs::file_status& st) {
  return fs::is_symlink(st)                                   ? "a symbolic link"
         : fs::is_directory(st)                               ? "a directory"
         : fs::is_fifo(st)                                    ? "a FIFO (named pipe)"
         : fs::is_socket(st)                                  ? "a socket"
         : fs::is_block_file(st) || fs::is_character_file(st) ? "a device"
                                                              : "not a regular file";
}

// The status of `path` itself (a symbolic link is not followed); not_found when there is nothing.
fs::file_status own_status(const std::string& path, const std::string& where) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  LM_CHECK(!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory,
           where << ": cannot look at " << path << ": " << ec.message());
  return st;
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  LM_CHECK(!ec && fs::exists(st),
           what << " " << path << ": cannot open it: "
                << (ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "No such file or directory"));
  LM_CHECK(fs::is_regular_file(st), what << " " << path << ": this is " << kind_of(st) << ", not a regular file");
}

void require_replaceable_output(const std::string& path, const std::string& where) {
  const fs::file_status st = own_status(path, where);
  if (!fs::exists(st) && !fs::is_symlink(st)) return;  // nothing there yet (exists() is false for a dangling link)
  if (fs::is_symlink(st)) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(path, ec);
    LM_FAIL(where << ": " << path << " is a symbolic link" << (ec ? std::string() : " to " + target.string())
                  << ", not a regular file: refusing to write through it (write to the file it names, if that "
                     "is what you mean, or remove the link)");
  }
  LM_CHECK(fs::is_regular_file(st), where << ": " << path << " is " << kind_of(st)
                                          << ", not a regular file: refusing to replace it (choose another path)");
}

int open_output_temp(const std::string& path, const std::string& where) {
  require_replaceable_output(path, where);
  const std::string tmp = path + ".tmp";
  // A regular PATH.tmp is what an interrupted earlier write left: ours to remove. Anything else
  // under that name (a link, a FIFO, a device) is not, and opening it would write through it.
  const fs::file_status tmp_st = own_status(tmp, where);
  if (fs::is_regular_file(tmp_st)) {
    std::remove(tmp.c_str());
  } else if (fs::exists(tmp_st) || fs::is_symlink(tmp_st)) {
    LM_FAIL(where << ": " << tmp << " (the temporary name for " << path << ") is " << kind_of(tmp_st)
                  << ": refusing to write through it; remove it first");
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  LM_CHECK(fd >= 0, where << ": cannot create " << tmp << " for writing: " << std::strerror(errno));
  return fd;
}

void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& where) {
  const std::string tmp = path + ".tmp";
  const int fd = open_output_temp(path, where);
  // Every write and the close are checked: a full disk shows at either (written data may sit in
  // the kernel until the close reports it, e.g. on NFS).
  const auto give_up = [&](const char* what, int err) {
    std::remove(tmp.c_str());  // the old `path`, if any, is untouched
    LM_FAIL(where << ": " << what << " " << tmp << " failed: " << std::strerror(err) << " (" << path
                  << " is left as it was)");
  };
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      give_up("writing", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) give_up("closing", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    LM_FAIL(where << ": cannot rename " << tmp << " to " << path << ": " << std::strerror(err));
  }
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

AppendFile::AppendFile(const std::string& path, bool truncate, const std::string& where) : path_(path), where_(where) {
  require_replaceable_output(path, where);
  // O_NOFOLLOW: a link put there since the check is refused (ELOOP), not written through;
  // O_NONBLOCK: a FIFO put there since returns at once (ENXIO without a reader) instead of waiting.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  fd_ = ::open(path.c_str(), flags, 0666);
  LM_CHECK(fd_ >= 0, where << ": cannot open " << path << " for writing: " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    LM_FAIL(where << ": " << path << " is not a regular file: refusing to write to it");
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);  // a regular file: writes as usual
}

AppendFile::~AppendFile() {
  if (fd_ < 0) return;
  try {
    write_lines(true);
  } catch (const Error&) {  // a destructor must not throw; the last, unfinished line is lost
  }
  ::close(fd_);
}

void AppendFile::write_lines(bool all) {
  const size_t end = all ? pending_.size() : pending_.rfind('\n') == std::string::npos ? 0 : pending_.rfind('\n') + 1;
  for (size_t done = 0; done < end;) {
    const ssize_t n = ::write(fd_, pending_.data() + done, end - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      pending_.clear();  // what is left of the failed lines is dropped, not written again at the close
      LM_FAIL(where_ << ": writing " << path_ << " failed: " << std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  pending_.erase(0, end);
}

AppendFile::int_type AppendFile::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  pending_.push_back(traits_type::to_char_type(c));
  if (pending_.back() == '\n') write_lines(false);
  return c;
}

std::streamsize AppendFile::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  if (std::char_traits<char>::find(s, static_cast<size_t>(n), '\n')) write_lines(false);
  return n;
}

int AppendFile::sync() {
  write_lines(false);
  return 0;
}

}  // namespace lm
