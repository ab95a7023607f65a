// helpers.h: small utilities shared by the tests: element access by multi-index on the host,
// max-abs-difference between tensors, and random inputs from the project RNG.
#pragma once

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {
namespace test {

// Host copy as doubles, row-major over the tensor's logical shape.
inline std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }

// max |a - b| over all elements; shapes must match exactly. A NaN or an infinity on either side
// gives +inf, so it fails every `< tol` and `== 0` check: a comparison never passes by accident
// on a non-finite value (use values() and std::isnan when a NaN is the expected answer).
inline double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y) {
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) return INFINITY;
    m = std::max(m, std::fabs(x[i] - y[i]));
  }
  return m;
}
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return max_abs_diff(values(a), values(b));
}
inline double max_abs_diff(const Tensor& a, const std::vector<double>& y) { return max_abs_diff(values(a), y); }

// A fresh, empty directory for one test's files: <tmp>/lm_test_<name>_<pid>.
inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("lm_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
inline void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// While alive, this process may not write files past `bytes` (RLIMIT_FSIZE): a write that would
// go past fails with EFBIG, as one on a full disk fails with ENOSPC (SIGXFSZ, which would kill the
// process instead, is ignored meanwhile). How the tests make a writer fail midway without filling
// a disk or writing through a device.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = SIG_DFL;
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lower = old;
    lower.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lower) == 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

// Things at an output path that are not regular files, made in a test's own folder: a FIFO, a
// socket and (only where this process may, as root) a character device like /dev/null (1, 3).
// Each returns false when it could not be made.
inline bool make_fifo(const std::filesystem::path& p) { return ::mkfifo(p.c_str(), 0600) == 0; }
inline bool make_socket(const std::filesystem::path& p) {
  sockaddr_un addr{};
  if (p.string().size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, p.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  if (fd >= 0) ::close(fd);  // the socket file stays until removed
  return ok;
}
inline bool make_char_device(const std::filesystem::path& p) {
  return ::mknod(p.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
}
// Whether a test may point a writer at the system's /dev/null to see it refused: only when the
// writer has already refused a device of the test's own (`own_device_refused`: made with
// make_char_device, which needs root) or when this process cannot write to /dev at all. A writer
// that replaced what it was given (a bug, or a mutation tried on purpose) then cannot replace the
// machine's /dev/null.
inline bool may_aim_at_dev_null(bool own_device_refused) {
  return own_device_refused || ::access("/dev", W_OK) != 0;
}

// Linear row-major index of a multi-index, and the strided element offset of a view.
inline int64_t linear(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t l = 0;
  for (size_t d = 0; d < shape.size(); ++d) l = l * shape[d] + idx[d];
  return l;
}
// Visit every multi-index of `shape` in row-major order.
template <class Fn> void for_each_index(const Shape& shape, Fn&& f) {
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t n = numel(shape);
  for (int64_t i = 0; i < n; ++i) {
    f(idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}
// Broadcast-aware read: the element of `v` (shape `s`) that broadcasting maps to `idx` of `out`.
inline double bget(const std::vector<double>& v, const Shape& s, const Shape& out, const std::vector<int64_t>& idx) {
  int64_t l = 0;
  size_t lead = out.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) l = l * s[d] + (s[d] == 1 ? 0 : idx[d + lead]);
  return v[l];
}

}  // namespace test
}  // namespace lm
