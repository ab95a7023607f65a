// vec_dot.h: a dot product in an explicit summation order that still vectorises without
// -ffast-math: two vector accumulators of full SIMD width (GCC vector extensions: 16 f32 lanes
// under AVX-512), one horizontal sum at the end, a scalar tail. Deterministic for a given build.
// Used by the few-row GEMM path (cpu/gemm.cpp). Also three vector-times-matrix helpers for
// inference's per-query attention (infer/cpu_rows.cpp) and the key index's tile scores
// (landmark/key_index.cpp) that keep up to four vectors of running sums in registers and add in
// a fixed order per output element, whatever the vector width.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

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
template <class Scalar>
inline Scalar dot_vectors(const Scalar* a, const Scalar* b, int64_t K) {
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

// How the vector helpers below cover n >= VL columns: whole vectors at 0, VL, 2 VL, ..., and,
// when VL does not divide n, one more at n - VL that overlaps the one before it (its overlapping
// columns are summed again in the same order, so they are written twice with the same bits).
// No column outside [0, n) is read. The vectors go to `group` up to four at a time, as
// group(std::integral_constant<int, G>, starts): four running sums in flight hide the latency of
// each add (the sums are in registers and every add waits on the one before it in its column).
template <int VL, class Group>
inline void cover_columns(int64_t n, Group&& group) {
  const int64_t full = n / VL, total = full + (n % VL != 0 ? 1 : 0);
  for (int64_t v = 0; v < total;) {
    int64_t st[4];
    const int g = total - v >= 4 ? 4 : static_cast<int>(total - v);
    for (int u = 0; u < g; ++u) st[u] = v + u < full ? (v + u) * VL : n - VL;
    switch (g) {
      case 4:
        group(std::integral_constant<int, 4>{}, st);
        break;
      case 3:
        group(std::integral_constant<int, 3>{}, st);
        break;
      case 2:
        group(std::integral_constant<int, 2>{}, st);
        break;
      default:
        group(std::integral_constant<int, 1>{}, st);
        break;
    }
    v += g;
  }
}

template <class Vec, class Scalar>
inline Vec load_vec(const Scalar* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(Vec));
  return v;
}

// out[t] = sum over d = 0..K-1, in that order, of x[d] * M[d * ld + t], for t in [0, n): a vector
// times a row-major (K, ld) matrix, walking M row by row with the running sums of up to 4 vectors
// of outputs held in registers (summing into memory instead makes every row wait on the previous
// row's store). Each out[t] is the plain sequential sum, so the result depends neither on VL nor
// on how the columns are grouped.
template <class Scalar>
inline void vec_times_rows(const Scalar* x, const Scalar* M, int64_t K, int64_t ld, int64_t n, Scalar* out) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
  if (n < VL) {
    for (int64_t t = 0; t < n; ++t) {
      Scalar a = 0;
      for (int64_t d = 0; d < K; ++d) a += x[d] * M[d * ld + t];
      out[t] = a;
    }
    return;
  }
  cover_columns<VL>(n, [&](auto g, const int64_t* st) {
    constexpr int G = decltype(g)::value;
    vec a[G] = {};
    for (int64_t d = 0; d < K; ++d) {
      const Scalar* row = M + d * ld;
#pragma GCC unroll 4
      for (int u = 0; u < G; ++u) a[u] += x[d] * load_vec<vec>(row + st[u]);
    }
    for (int u = 0; u < G; ++u) std::memcpy(out + st[u], &a[u], sizeof(vec));
  });
}

// y[d] = sum over j = 0..n-1, in that order, of w[j] * rows[j][d], for d in [0, D): a weighted sum
// of n rows given by pointers, rows with weight exactly 0 skipped (they add nothing and may be
// rows nobody filled). Running sums in registers, as in vec_times_rows; y is overwritten.
template <class Scalar>
inline void weighted_row_sum(const Scalar* w, const Scalar* const* rows, int64_t n, int64_t D, Scalar* y) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
  if (D < VL) {
    for (int64_t d = 0; d < D; ++d) {
      Scalar a = 0;
      for (int64_t j = 0; j < n; ++j)
        if (w[j] != Scalar(0)) a += w[j] * rows[j][d];
      y[d] = a;
    }
    return;
  }
  cover_columns<VL>(D, [&](auto g, const int64_t* st) {
    constexpr int G = decltype(g)::value;
    vec a[G] = {};
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == Scalar(0)) continue;
#pragma GCC unroll 4
      for (int u = 0; u < G; ++u) a[u] += w[j] * load_vec<vec>(rows[j] + st[u]);
    }
    for (int u = 0; u < G; ++u) std::memcpy(y + st[u], &a[u], sizeof(vec));
  });
}

// Scores of a query against keys that are stored transposed and not rotated yet: out[t] = sum over
// d = 0..HS-1, in that order, of x[d] * R(K)[d][t], for t in [0, n). K is (HS, ld) (feature d of
// key t at K[d * ld + t]); R rotates each pair (K[2i][t], K[2i+1][t]) by the angle whose cosine
// and sine are C[i * cs + t] and S[i * cs + t], exactly as nnmath::rotate_pair does
// (y0 = x0 c - x1 s, y1 = x0 s + x1 c). The rotated keys are never stored: the rotation and the
// product happen in registers, up to 4 vectors of keys at a time (cover_columns).
template <class Scalar>
inline void rotated_vec_times_rows(const Scalar* x, const Scalar* K, int64_t HS, int64_t ld, int64_t n, const Scalar* C,
                                   const Scalar* S, int64_t cs, Scalar* out) {
  typedef Scalar vec __attribute__((vector_size(kDotVecBytes)));
  constexpr int VL = kDotVecBytes / static_cast<int>(sizeof(Scalar));
  const int64_t half = HS / 2;
  if (n < VL) {
    for (int64_t t = 0; t < n; ++t) {
      Scalar a = 0;
      for (int64_t i = 0; i < half; ++i) {
        const Scalar c = C[i * cs + t], s = S[i * cs + t], x0 = K[(2 * i) * ld + t], x1 = K[(2 * i + 1) * ld + t];
        a += x[2 * i] * (x0 * c - x1 * s);
        a += x[2 * i + 1] * (x0 * s + x1 * c);
      }
      out[t] = a;
    }
    return;
  }
  cover_columns<VL>(n, [&](auto g, const int64_t* st) {
    constexpr int G = decltype(g)::value;
    vec a[G] = {};
    for (int64_t i = 0; i < half; ++i) {
      const Scalar *k0 = K + (2 * i) * ld, *k1 = K + (2 * i + 1) * ld, *c = C + i * cs, *s = S + i * cs;
#pragma GCC unroll 4
      for (int u = 0; u < G; ++u) {
        const vec x0 = load_vec<vec>(k0 + st[u]), x1 = load_vec<vec>(k1 + st[u]);
        const vec cu = load_vec<vec>(c + st[u]), su = load_vec<vec>(s + st[u]);
        a[u] += x[2 * i] * (x0 * cu - x1 * su);
        a[u] += x[2 * i + 1] * (x0 * su + x1 * cu);
      }
    }
    for (int u = 0; u < G; ++u) std::memcpy(out + st[u], &a[u], sizeof(vec));
  });
}

}  // namespace cpu
}  // namespace lm
