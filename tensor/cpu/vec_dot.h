// vec_dot.h: a dot product in an explicit summation order that still vectorises without
// -ffast-math: two vector accumulators of full SIMD width (GCC vector extensions: 16 f32 lanes
// under AVX-512), one horizontal sum at the end, a scalar tail. Deterministic for a given build.
// Used by the few-row GEMM path (cpu/gemm.cpp) and by inference's per-query attention.
#pragma once

#include <cstdint>
#include <cstring>

namespace lm {
namespace cpu {

#if defined(__AVX512F__)
constexpr int kDotVecBytes = 64;
#elif defined(__AVX__)
constexpr int kDotVecBytes = 32;
#else
constexpr int kDotVecBytes = 16;
#endif

template <class T> inline T dot_vectors(const T* a, const T* b, int64_t K) {
  typedef T vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(T));
  vec acc0{}, acc1{};
  int64_t k = 0;
  for (; k + 2 * VL <= K; k += 2 * VL) {
    vec a0, b0, a1, b1;
    std::memcpy(&a0, a + k, sizeof(vec));
    std::memcpy(&b0, b + k, sizeof(vec));
    std::memcpy(&a1, a + k + VL, sizeof(vec));
    std::memcpy(&b1, b + k + VL, sizeof(vec));
    acc0 += a0 * b0;
    acc1 += a1 * b1;
  }
  for (; k + VL <= K; k += VL) {
    vec a0, b0;
    std::memcpy(&a0, a + k, sizeof(vec));
    std::memcpy(&b0, b + k, sizeof(vec));
    acc0 += a0 * b0;
  }
  acc0 += acc1;
  T s = 0;
  for (int u = 0; u < VL; ++u) s += acc0[u];
  for (; k < K; ++k) s += a[k] * b[k];
  return s;
}

}  // namespace cpu
}  // namespace lm
