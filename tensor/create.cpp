// create.cpp: creation functions (create.h). Random draws reserve counters from the global
// generator, then the device kernel evaluates Philox at those counters.
#include "tensor/create.h"

#include <cmath>
#include <cstring>

#include "tensor/dispatch.h"
#include "tensor/rng.h"

namespace lm {

Tensor empty(const Shape& shape, DType dtype, Device device) { return Tensor(shape, dtype, device); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t(shape, dtype, device);
  t.fill_(value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor scalar_tensor(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  LM_CHECK(
      step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
      "arange: need finite start/end and a non-zero step, got start=" << start << " end=" << end << " step=" << step);
  double len = std::ceil((end - start) / step);
  int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  Tensor t({n}, dtype, device);
  if (n > 0) LM_KERNEL(device, arange, t, start, step);
  return t;
}
Tensor arange(int64_t n, DType dtype, Device device) { return arange(0.0, static_cast<double>(n), 1.0, dtype, device); }

namespace {
template <class Scalar>
Tensor from_host(const std::vector<Scalar>& values, const Shape& shape, Device device) {
  LM_CHECK(static_cast<int64_t>(values.size()) == numel(shape),
           "from_vector: " << values.size() << " values do not fill shape " << shape_str(shape) << " (" << numel(shape)
                           << " elements)");
  Tensor t(shape, dtype_of<Scalar>(), Device::CPU);
  if (!values.empty()) std::memcpy(t.data<Scalar>(), values.data(), values.size() * sizeof(Scalar));
  return t.to(device);
}
}  // namespace

Tensor from_vector(const std::vector<float>& v, const Shape& s, Device d) { return from_host(v, s, d); }
Tensor from_vector(const std::vector<double>& v, const Shape& s, Device d) { return from_host(v, s, d); }
Tensor from_vector(const std::vector<int32_t>& v, const Shape& s, Device d) { return from_host(v, s, d); }

Tensor rand(const Shape& shape, DType dtype, Device device, double lo, double hi) {
  LM_CHECK(is_floating(dtype), "rand: dtype must be f32 or f64, got " << dtype_name(dtype));
  LM_CHECK(lo < hi, "rand: need lo < hi, got [" << lo << ", " << hi << ")");
  Tensor t(shape, dtype, device);
  uint64_t offset = rng_reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) LM_KERNEL(device, rand_uniform, t, global_rng().seed, offset, lo, hi);
  return t;
}

Tensor randn(const Shape& shape, DType dtype, Device device, double mean, double std) {
  LM_CHECK(is_floating(dtype), "randn: dtype must be f32 or f64, got " << dtype_name(dtype));
  LM_CHECK(std >= 0.0, "randn: std must be >= 0, got " << std);
  Tensor t(shape, dtype, device);
  uint64_t offset = rng_reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) LM_KERNEL(device, rand_normal, t, global_rng().seed, offset, mean, std);
  return t;
}

}  // namespace lm
