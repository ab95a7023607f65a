// gpu_compare.h: the one check the GPU suite makes, in the ggml style: run an op on the CPU (the
// oracle) and on CUDA with the same inputs, then compare element by element with a tolerance
// whose reason is written at the call site. Not a reference implementation of anything; the
// CPU kernels it trusts are tested against naive loops and finite differences in tests/*.cpp.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// With LM_GPU_REPORT set in the environment, require_close also prints one line per comparison:
// the test case, what was compared, the largest |cpu - gpu|, the largest |cpu - gpu| / |cpu| over
// elements with |cpu| > atol, and `use`, the largest |cpu - gpu| / (atol + rtol |cpu|): the share of
// the tolerance the worst element used (inf where the tolerance is 0 and a value differs). This
// is how the tolerances below were set from a real GPU (docs/cuda.md section 10).
inline void report_comparison(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol,
                              const char* dtype, const std::string& what, int64_t bad_count) {
  double max_abs = 0, max_rel = 0, use = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i]) || std::isinf(a[i]) || std::isinf(b[i])) continue;
    const double d = std::fabs(a[i] - b[i]), allowed = atol + rtol * std::fabs(a[i]);
    max_abs = std::max(max_abs, d);
    if (std::fabs(a[i]) > atol && std::fabs(a[i]) > 0) max_rel = std::max(max_rel, d / std::fabs(a[i]));
    use = std::max(use, d == 0 ? 0.0 : allowed == 0 ? HUGE_VAL : d / allowed);
  }
  // gpu_bits: FNV-1a over the bytes of the GPU's values (as doubles: exact for f32 too), so two
  // builds or two runs can be shown to give the same bits, not only the same rounded errors.
  uint64_t bits = 14695981039346656037ull;
  for (double v : b) {
    unsigned char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    for (unsigned char c : bytes) bits = (bits ^ c) * 1099511628211ull;
  }
  std::printf("compare\t%s\t%s %s\tn=%zu\trtol=%g\tatol=%g\tmax_abs=%.3e\tmax_rel=%.3e\tuse=%.3g\t%s\tgpu_bits=%016llx\n",
              Catch::getResultCapture().getCurrentTestName().c_str(), dtype, what.c_str(), a.size(), rtol, atol, max_abs,
              max_rel, use, bad_count == 0 ? "ok" : "FAIL", static_cast<unsigned long long>(bits));
  std::fflush(stdout);
}

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
  if (std::getenv("LM_GPU_REPORT")) report_comparison(a, b, rtol, atol, dtype_name(cpu.dtype()), what, bad_count);
  CHECK(bad == -1);  // CHECK, not REQUIRE: the test case goes on, so one run shows every comparison
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
