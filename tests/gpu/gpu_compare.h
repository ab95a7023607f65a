// gpu_compare.h: the one check the GPU suite makes, in the ggml style: run an op on the CPU (the
// oracle) and on CUDA with the same inputs, then compare element by element with a tolerance
// whose reason is written at the call site. Not a reference implementation of anything; the
// CPU kernels it trusts are tested against naive loops and finite differences in tests/*.cpp.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {
namespace gputest {

// The device under test. Every CUDA tensor in the suite is made through this name.
constexpr Device kGpu = Device::CUDA;

inline Tensor to_gpu(const Tensor& t) { return t.to(kGpu); }

// Elementwise |cpu - gpu| <= atol + rtol * |cpu|; a NaN must face a NaN and an infinity the
// same infinity. rtol = atol = 0 demands bit-equal values (up to the sign of zero).
inline void require_close(const Tensor& cpu, const Tensor& gpu, double rtol, double atol, const std::string& what) {
  INFO(what << ": cpu " << describe(cpu) << " vs gpu " << describe(gpu) << " (rtol " << rtol << ", atol " << atol
            << ")");
  REQUIRE(cpu.device() == Device::CPU);
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(cpu.dtype() == gpu.dtype());
  REQUIRE(cpu.shape() == gpu.shape());
  const std::vector<double> a = cpu.to_double_vector(), b = gpu.to_double_vector();
  int64_t bad = -1, bad_count = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(a[i])) ok = std::isnan(b[i]);
    else if (std::isinf(a[i])) ok = a[i] == b[i];
    else ok = std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(a[i]);
    if (!ok) {
      if (bad < 0) bad = static_cast<int64_t>(i);
      ++bad_count;
    }
    if (!std::isnan(a[i]) && !std::isnan(b[i]) && !std::isinf(a[i])) worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  std::ostringstream os;
  if (bad >= 0)
    os << bad_count << " of " << a.size() << " elements differ; first at flat index " << bad << ": cpu " << a[bad]
       << " gpu " << b[bad];
  INFO(os.str() << " (max |diff| over finite elements " << worst << ")");
  REQUIRE(bad == -1);
}

inline void require_equal(const Tensor& cpu, const Tensor& gpu, const std::string& what) {
  require_close(cpu, gpu, 0.0, 0.0, what);
}

// Pick the tolerance for a dtype (i32 results are always compared exactly).
struct Tol {
  double rtol, atol;
};
inline Tol tol_for(DType dt, Tol f32, Tol f64) {
  if (dt == DType::F32) return f32;
  if (dt == DType::F64) return f64;
  return {0.0, 0.0};
}

// Integer-valued floats in [-3, 3]: many exact ties, for comparisons, max and argmax.
inline Tensor small_ints(const Shape& shape, DType dt) {
  return mul(randn(shape, DType::F64), 1.5).to(DType::I32).to(dt);
}

}  // namespace gputest
}  // namespace lm
