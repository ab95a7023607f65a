// vec_dot.h: a dot product in an explicit summation order that still vectorises without
// -ffast-math: two vector accumulators of full SIMD width (GCC vector extensions: 16 f32 lanes
// under AVX-512), one horizontal sum at the end, a scalar tail. Deterministic for a given build.
// Used by the few-row GEMM path (cpu/gemm.cpp). Also two vector-times-matrix helpers for
// inference's per-query attention (infer/chunk_attention.cpp) that keep their running sums in
// registers and add in a fixed order per output element, whatever the vector width.
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

// a, b (K) -> a . b, summed in vector lanes.
template <class Scalar> inline Scalar dot_vectors(const Scalar* a, const Scalar* b, int64_t K) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
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
  Scalar s = 0;
  for (int u = 0; u < VL; ++u) s += acc0[u];
  for (; k < K; ++k) s += a[k] * b[k];
  return s;
}

// out[t] = sum over d = 0..K-1, in that order, of x[d] * M[d * ld + t], for t in [0, n): a vector
// times a row-major (K, ld) matrix, walking M row by row with the running sums of 2 * VL outputs
// held in registers (summing into memory instead makes every row wait on the previous row's
// store). Each out[t] is the plain sequential sum, so the result does not depend on VL.
template <class Scalar> inline void vec_times_rows(const Scalar* x, const Scalar* M, int64_t K, int64_t ld, int64_t n,
                                                   Scalar* out) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
  int64_t t = 0;
  for (; t + 2 * VL <= n; t += 2 * VL) {
    vec a0{}, a1{};
    for (int64_t d = 0; d < K; ++d) {
      vec m0, m1;
      std::memcpy(&m0, M + d * ld + t, sizeof(vec));
      std::memcpy(&m1, M + d * ld + t + VL, sizeof(vec));
      a0 += x[d] * m0;
      a1 += x[d] * m1;
    }
    std::memcpy(out + t, &a0, sizeof(vec));
    std::memcpy(out + t + VL, &a1, sizeof(vec));
  }
  for (; t + VL <= n; t += VL) {
    vec a0{};
    for (int64_t d = 0; d < K; ++d) {
      vec m0;
      std::memcpy(&m0, M + d * ld + t, sizeof(vec));
      a0 += x[d] * m0;
    }
    std::memcpy(out + t, &a0, sizeof(vec));
  }
  for (; t < n; ++t) {
    Scalar a = 0;
    for (int64_t d = 0; d < K; ++d) a += x[d] * M[d * ld + t];
    out[t] = a;
  }
}

// y[d] = sum over j = 0..n-1, in that order, of w[j] * rows[j][d], for d in [0, D): a weighted sum
// of n rows given by pointers, rows with weight exactly 0 skipped (they add nothing and may be
// rows nobody filled). Running sums in registers, as in vec_times_rows; y is overwritten.
template <class Scalar> inline void weighted_row_sum(const Scalar* w, const Scalar* const* rows, int64_t n, int64_t D,
                                                     Scalar* y) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
  int64_t d = 0;
  for (; d + 2 * VL <= D; d += 2 * VL) {
    vec a0{}, a1{};
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == Scalar(0)) continue;
      vec r0, r1;
      std::memcpy(&r0, rows[j] + d, sizeof(vec));
      std::memcpy(&r1, rows[j] + d + VL, sizeof(vec));
      a0 += w[j] * r0;
      a1 += w[j] * r1;
    }
    std::memcpy(y + d, &a0, sizeof(vec));
    std::memcpy(y + d + VL, &a1, sizeof(vec));
  }
  for (; d + VL <= D; d += VL) {
    vec a0{};
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == Scalar(0)) continue;
      vec r0;
      std::memcpy(&r0, rows[j] + d, sizeof(vec));
      a0 += w[j] * r0;
    }
    std::memcpy(y + d, &a0, sizeof(vec));
  }
  for (; d < D; ++d) {
    Scalar a = 0;
    for (int64_t j = 0; j < n; ++j)
      if (w[j] != Scalar(0)) a += w[j] * rows[j][d];
    y[d] = a;
  }
}

// Scores of a query against keys that are stored transposed and not rotated yet: out[t] = sum over
// d = 0..HS-1, in that order, of x[d] * R(K)[d][t], for t in [0, n). K is (HS, ld) (feature d of
// key t at K[d * ld + t]); R rotates each pair (K[2i][t], K[2i+1][t]) by the angle whose cosine
// and sine are C[i * cs + t] and S[i * cs + t], exactly as nnmath::rotate_pair does
// (y0 = x0 c - x1 s, y1 = x0 s + x1 c). The rotated keys are never stored: the rotation and the
// product happen in registers, 2 * VL keys at a time.
template <class Scalar>
inline void rotated_vec_times_rows(const Scalar* x, const Scalar* K, int64_t HS, int64_t ld, int64_t n,
                                   const Scalar* C, const Scalar* S, int64_t cs, Scalar* out) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
  auto load = [](const Scalar* p) {
    vec v;
    std::memcpy(&v, p, sizeof(vec));
    return v;
  };
  const int64_t half = HS / 2;
  int64_t t = 0;
  for (; t + 2 * VL <= n; t += 2 * VL) {
    vec a0{}, a1{};
    for (int64_t i = 0; i < half; ++i) {
      const Scalar* k0 = K + (2 * i) * ld + t;
      const Scalar* k1 = K + (2 * i + 1) * ld + t;
      const vec c0 = load(C + i * cs + t), c1 = load(C + i * cs + t + VL);
      const vec s0 = load(S + i * cs + t), s1 = load(S + i * cs + t + VL);
      const vec x00 = load(k0), x01 = load(k0 + VL), x10 = load(k1), x11 = load(k1 + VL);
      a0 += x[2 * i] * (x00 * c0 - x10 * s0);
      a1 += x[2 * i] * (x01 * c1 - x11 * s1);
      a0 += x[2 * i + 1] * (x00 * s0 + x10 * c0);
      a1 += x[2 * i + 1] * (x01 * s1 + x11 * c1);
    }
    std::memcpy(out + t, &a0, sizeof(vec));
    std::memcpy(out + t + VL, &a1, sizeof(vec));
  }
  for (; t + VL <= n; t += VL) {
    vec a0{};
    for (int64_t i = 0; i < half; ++i) {
      const vec c0 = load(C + i * cs + t), s0 = load(S + i * cs + t);
      const vec x00 = load(K + (2 * i) * ld + t), x10 = load(K + (2 * i + 1) * ld + t);
      a0 += x[2 * i] * (x00 * c0 - x10 * s0);
      a0 += x[2 * i + 1] * (x00 * s0 + x10 * c0);
    }
    std::memcpy(out + t, &a0, sizeof(vec));
  }
  for (; t < n; ++t) {
    Scalar a = 0;
    for (int64_t i = 0; i < half; ++i) {
      const Scalar c = C[i * cs + t], s = S[i * cs + t], x0 = K[(2 * i) * ld + t], x1 = K[(2 * i + 1) * ld + t];
      a += x[2 * i] * (x0 * c - x1 * s);
      a += x[2 * i + 1] * (x0 * s + x1 * c);
    }
    out[t] = a;
  }
}

}  // namespace cpu
}  // namespace lm
