// print.cpp: readable printing of tensors, PyTorch-like: nested brackets, a shared number
// format, and "..." summaries past 6 entries per dim so huge tensors print in a few lines.
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>

#include "tensor/tensor.h"

namespace lm {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream os;
  os << dtype_name(t.dtype()) << " " << device_name(t.device()) << " " << shape_str(t.shape());
  return os.str();
}

namespace {

constexpr int64_t kEdge = 3;  // entries kept at each end of a long dim

std::string format_value(double v, DType dt, bool scientific) {
  char buf[64];
  if (dt == DType::I32)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else if (scientific)
    std::snprintf(buf, sizeof buf, "%.4e", v);
  else
    std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

void print_rec(std::ostream& os, const std::vector<double>& v, const Shape& shape, const Shape& strides, size_t d,
               int64_t base, DType dt, bool sci, int indent) {
  if (d == shape.size()) {
    os << format_value(v[base], dt, sci);
    return;
  }
  os << "[";
  int64_t n = shape[d];
  bool cut = n > 2 * kEdge;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdge) {
      os << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdge;
    }
    print_rec(os, v, shape, strides, d + 1, base + i * strides[d], dt, sci, indent + 1);
    if (i + 1 < n) os << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(" << describe(t) << ")\n";
  std::vector<double> v = t.to_double_vector();
  bool sci = false;
  for (double x : v) {
    double a = std::fabs(x);
    if (std::isfinite(x) && a != 0.0 && (a >= 1e5 || a < 1e-4)) sci = true;
  }
  if (v.empty()) return os << "[]";
  print_rec(os, v, t.shape(), contiguous_strides(t.shape()), 0, 0, t.dtype(), sci, 0);
  return os;
}

}  // namespace lm
