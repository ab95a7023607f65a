// parallel.h: the two loop shapes every CPU kernel uses. parallel_for splits [0, n) into one
// contiguous range per OpenMP thread (static schedule: a fixed thread count gives a fixed split,
// so results are bit-reproducible). strided_apply walks N operands that share an iteration shape
// but have their own strides, handing the callback runs along the innermost dim.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/shape.h"

namespace lm {
namespace cpu {

// Below parallel_grain() elements of work a loop runs on one thread, because starting a parallel
// region costs what OpenMP's idle threads make it cost. Sleeping ones (OMP_WAIT_POLICY=PASSIVE)
// take ~40 microseconds to wake on the 2-vCPU machine: then the grain is 1 << 18 (with 1 << 15,
// decoding a token spent a quarter of its time in the scheduler). Spinning ones (libgomp's
// default, or PASSIVE with a GOMP_SPINCOUNT, or the `landmark` program's short spin) answer in
// ~0.5 microseconds: then 1 << 14, and decoding uses both cores for its heads and GEMVs.
// LANDMARK_PARALLEL_GRAIN overrides both; set_parallel_grain() too (tests use it to check that
// the split does not change results). Read once, at first use, like libgomp reads its settings.
constexpr int64_t kGrainSleepingThreads = 1 << 18;
constexpr int64_t kGrainSpinningThreads = 1 << 14;

int64_t default_parallel_grain();  // from the environment, as above (tensor/cpu/parallel.cpp)
int64_t& parallel_grain_setting();
inline int64_t parallel_grain() { return parallel_grain_setting(); }
void set_parallel_grain(int64_t grain);  // >= 1

inline int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// f(begin, end) over disjoint ranges covering [0, n); `cost` is the work per index, used only
// to decide whether threads are worth it.
template <class Fn>
void parallel_for(int64_t n, int64_t cost, Fn&& f) {
  if (n <= 0) return;
  int nt = num_threads();
  if (nt <= 1 || n * cost < parallel_grain() || n == 1) {
    f(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
#ifdef _OPENMP
    int t = omp_get_thread_num(), T = omp_get_num_threads();
#else
    int t = 0, T = 1;
#endif
    int64_t chunk = (n + T - 1) / T;
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) f(b, e);
  }
}

// Iterate `shape` in row-major order for N operands with the given element strides.
// f(const int64_t* offsets, int64_t len, const int64_t* inner_strides) is called for runs of
// `len` consecutive innermost indices; offsets[k] is operand k's element offset of the run start.
template <int N, class Fn>
void strided_apply(const Shape& shape, const std::array<const Shape*, N>& strides, Fn&& f) {
  // Collapse dims that are contiguous with their inner neighbour for every operand, and drop
  // size-1 dims, so most calls become one long run.
  std::vector<int64_t> size;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !size.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      size.back() *= shape[d];
      for (int k = 0; k < N; ++k) st[k].back() = (*strides[k])[d];
    } else {
      size.push_back(shape[d]);
      for (int k = 0; k < N; ++k) st[k].push_back((*strides[k])[d]);
    }
  }
  if (size.empty()) {  // a single element
    size.push_back(1);
    for (int k = 0; k < N; ++k) st[k].push_back(0);
  }
  const int nd = static_cast<int>(size.size());
  int64_t total = 1;
  for (int64_t s : size) total *= s;
  std::array<int64_t, N> inner;
  for (int k = 0; k < N; ++k) inner[k] = st[k][nd - 1];

  parallel_for(total, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(nd);
    std::array<int64_t, N> off{};
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; --d) {  // decode the start index
      idx[d] = rem % size[d];
      rem /= size[d];
      for (int k = 0; k < N; ++k) off[k] += idx[d] * st[k][d];
    }
    int64_t i = begin;
    while (i < end) {
      int64_t len = std::min(size[nd - 1] - idx[nd - 1], end - i);
      f(off.data(), len, inner.data());
      i += len;
      idx[nd - 1] += len;
      for (int k = 0; k < N; ++k) off[k] += len * inner[k];
      for (int d = nd - 1; d > 0 && idx[d] == size[d]; --d) {  // carry into outer dims
        for (int k = 0; k < N; ++k) off[k] += st[k][d - 1] - size[d] * st[k][d];
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  });
}

}  // namespace cpu
}  // namespace lm
