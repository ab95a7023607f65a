// core.cpp: the small shared pieces: error formatting (check.h), dtype/device names (dtype.h),
// shape rules (shape.h) and the global RNG state (rng.h).
#include <limits>
#include <sstream>

#include "tensor/check.h"
#include "tensor/dtype.h"
#include "tensor/rng.h"
#include "tensor/shape.h"

namespace lm {

namespace detail {
void fail(const char* file, int line, const char* expr, const std::string& msg) {
  std::ostringstream os;
  os << msg;
  if (expr)
    os << "\n  (check failed: " << expr << " at " << file << ":" << line << ")";
  else
    os << "\n  (at " << file << ":" << line << ")";
  throw Error(os.str());
}
}  // namespace detail

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::I32:
      return "i32";
  }
  return "?";
}
const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "float32") return DType::F32;
  if (s == "f64" || s == "float64") return DType::F64;
  if (s == "i32" || s == "int32") return DType::I32;
  LM_FAIL("unknown dtype '" << s << "' (expected f32, f64 or i32)");
}
Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::CPU;
  if (s == "cuda" || s == "gpu") return Device::CUDA;
  LM_FAIL("unknown device '" << s << "' (expected cpu or cuda)");
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    // A product past 2^63 - 1 would wrap (undefined behaviour) into a small or negative count.
    LM_CHECK(d <= 0 || n <= std::numeric_limits<int64_t>::max() / d,
             "shape " << shape_str(s) << " has more than 2^63 - 1 elements");
    n *= d;
  }
  return n;
}
Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    if (i == 0) break;  // the full product is no stride
    LM_CHECK(s[i] <= 0 || acc <= std::numeric_limits<int64_t>::max() / s[i],
             "shape " << shape_str(s) << " has more than 2^63 - 1 elements");
    acc *= s[i];
  }
  return st;
}
std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* opname) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LM_CHECK(da == db || da == 1 || db == 1, opname << ": shapes " << shape_str(a) << " and " << shape_str(b)
                                                    << " cannot be broadcast (dim " << i << ": " << da << " vs " << db
                                                    << ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}
int64_t normalize_dim(int64_t d, int64_t ndim, const char* opname) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  LM_CHECK(d >= lo && d <= hi, opname << ": dim " << d << " is out of range for a " << ndim << "-d tensor (expected "
                                      << lo << ".." << hi << ")");
  return d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
}

RngState& global_rng() {
  static RngState state;
  return state;
}
void manual_seed(uint64_t seed) { global_rng() = RngState{seed, 0}; }
uint64_t rng_reserve(uint64_t n) {
  uint64_t first = global_rng().offset;
  global_rng().offset += n;
  return first;
}

}  // namespace lm
