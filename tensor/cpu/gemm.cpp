// cpu/gemm.cpp: the CPU GEMM. The fast path follows the classic Goto/BLIS structure:
//   for each NC-wide column block of B and KC-deep slice of K:  pack B's slice (shared by threads)
//     for each MC-tall row block of A (one per thread at a time): pack A's block
//       for each NR-wide, MR-tall tile of C: the micro-kernel keeps the MR x NR tile in registers
//       and does one rank-1 update per k (an outer product of an A column and a B row).
// Packing makes every micro-kernel read contiguous, aligned memory and absorbs the transposes.
// Each C element is accumulated by one thread in k order: results do not depend on the thread
// count. Twin: tensor/cuda/gemm.cu (cuBLAS). Reference: gemm_naive below.
#include "tensor/cpu/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"

namespace lm {
namespace cpu {

// ---------------------------------------------------------------- naive reference
// Per batch entry: C (M, N) = alpha op(A) (M, K) op(B) (K, N) + beta C, by the triple loop.
template <class Scalar> void gemm_naive(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C) {
  for (int64_t b = 0; b < g.batch; ++b) {
    const Scalar* a = A + b * g.stride_a;
    const Scalar* bm = B + b * g.stride_b;
    Scalar* c = C + b * g.stride_c;
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        double acc = 0;  // f64 accumulation: the reference should be the most accurate party
        for (int64_t k = 0; k < g.K; ++k) {
          Scalar av = g.trans_a ? a[k * g.lda + i] : a[i * g.lda + k];
          Scalar bv = g.trans_b ? bm[j * g.ldb + k] : bm[k * g.ldb + j];
          acc += static_cast<double>(av) * static_cast<double>(bv);
        }
        Scalar& out = c[i * g.ldc + j];
        out = static_cast<Scalar>(g.alpha * acc + (g.beta == 0.0 ? 0.0 : g.beta * static_cast<double>(out)));
      }
  }
}

// ---------------------------------------------------------------- blocked fast path
namespace {

#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
constexpr int kRowsPerTile = 12;  // 12 x 2 accumulators + 2 B vectors + 1 broadcast <= 32 zmm
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
constexpr int kRowsPerTile = 6;   // 6 x 2 accumulators + 3 <= 16 ymm
#else
constexpr int kVecBytes = 16;
constexpr int kRowsPerTile = 6;
#endif

template <class Scalar> struct Tile {
  typedef Scalar vec __attribute__((vector_size(kVecBytes)));
  static constexpr int VL = kVecBytes / static_cast<int>(sizeof(Scalar));  // lanes per vector
  static constexpr int MR = kRowsPerTile;
  static constexpr int NR = 2 * VL;
  static constexpr int KC = 384;                            // B micro-panel KC x NR stays in L1/L2
  static constexpr int MC = MR * (sizeof(Scalar) == 4 ? 16 : 8); // packed A block fits in L2
  static constexpr int NC = 3072;                           // packed B slice fits in L3
};

// 64-byte aligned scratch that grows and is reused (one per thread for A, one shared for B).
template <class Scalar> struct AlignedBuffer {
  Scalar* ptr = nullptr;
  size_t cap = 0;
  Scalar* get(size_t n) {
    if (n > cap) {
      std::free(ptr);
      cap = (n + 63) / 64 * 64;
      ptr = static_cast<Scalar*>(std::aligned_alloc(64, cap * sizeof(Scalar)));
      LM_CHECK(ptr != nullptr, "gemm: out of memory for a packing buffer of " << cap << " elements");
    }
    return ptr;
  }
  ~AlignedBuffer() { std::free(ptr); }
};

// Pack rows [i0, i0+mc) x depth [k0, k0+kc) of op(A) into MR-row panels: panel p holds
// Ap[p*MR*kc + k*MR + r] = op(A)(i0 + p*MR + r, k0 + k), zero beyond mc.
template <class Scalar>
void pack_a(const GemmArgs& g, const Scalar* A, int64_t i0, int64_t mc, int64_t k0, int64_t kc, Scalar* Ap) {
  constexpr int MR = Tile<Scalar>::MR;
  for (int64_t p = 0; p < mc; p += MR) {
    Scalar* dst = Ap + p * kc;
    int64_t rows = std::min<int64_t>(MR, mc - p);
    if (!g.trans_a) {
      for (int64_t r = 0; r < MR; ++r) {
        if (r < rows) {
          const Scalar* src = A + (i0 + p + r) * g.lda + k0;
          for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = src[k];
        } else {
          for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = Scalar(0);
        }
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const Scalar* src = A + (k0 + k) * g.lda + i0 + p;
        for (int64_t r = 0; r < rows; ++r) dst[k * MR + r] = src[r];
        for (int64_t r = rows; r < MR; ++r) dst[k * MR + r] = Scalar(0);
      }
    }
  }
}

// Pack one NR-column panel of op(B): Bp[k*NR + c] = op(B)(k0 + k, j0 + c), zero beyond nr.
template <class Scalar>
void pack_b_panel(const GemmArgs& g, const Scalar* B, int64_t k0, int64_t kc, int64_t j0, int64_t nr, Scalar* Bp) {
  constexpr int NR = Tile<Scalar>::NR;
  if (!g.trans_b) {
    for (int64_t k = 0; k < kc; ++k) {
      const Scalar* src = B + (k0 + k) * g.ldb + j0;
      Scalar* dst = Bp + k * NR;
      for (int64_t c = 0; c < nr; ++c) dst[c] = src[c];
      for (int64_t c = nr; c < NR; ++c) dst[c] = Scalar(0);
    }
  } else {
    for (int64_t c = 0; c < NR; ++c) {
      if (c < nr) {
        const Scalar* src = B + (j0 + c) * g.ldb + k0;
        for (int64_t k = 0; k < kc; ++k) Bp[k * NR + c] = src[k];
      } else {
        for (int64_t k = 0; k < kc; ++k) Bp[k * NR + c] = Scalar(0);
      }
    }
  }
}

// The micro-kernel: acc (MR x NR) = sum_k Ap[k, :]^T Bp[k, :], then
// C = alpha * acc + beta * C on the valid mr x nr corner (C is not read when beta == 0).
template <class Scalar>
void micro_kernel(int64_t kc, const Scalar* __restrict Ap, const Scalar* __restrict Bp, Scalar* C, int64_t ldc,
                  Scalar alpha, Scalar beta, int64_t mr, int64_t nr) {
  using vec = typename Tile<Scalar>::vec;
  constexpr int MR = Tile<Scalar>::MR, NR = Tile<Scalar>::NR, VL = Tile<Scalar>::VL;
  vec acc0[MR], acc1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    acc0[r] = vec{};
    acc1[r] = vec{};
  }
  for (int64_t k = 0; k < kc; ++k) {
    vec b0, b1;
    std::memcpy(&b0, Bp + k * NR, sizeof(vec));
    std::memcpy(&b1, Bp + k * NR + VL, sizeof(vec));
    const Scalar* a = Ap + k * MR;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      acc0[r] += a[r] * b0;
      acc1[r] += a[r] * b1;
    }
  }
  if (mr == MR && nr == NR) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      Scalar* c = C + r * ldc;
      vec c0 = acc0[r] * alpha, c1 = acc1[r] * alpha;
      if (beta != Scalar(0)) {
        vec o0, o1;
        std::memcpy(&o0, c, sizeof(vec));
        std::memcpy(&o1, c + VL, sizeof(vec));
        c0 += beta * o0;
        c1 += beta * o1;
      }
      std::memcpy(c, &c0, sizeof(vec));
      std::memcpy(c + VL, &c1, sizeof(vec));
    }
  } else {
    alignas(64) Scalar tmp[MR * NR];
    for (int r = 0; r < MR; ++r) {
      std::memcpy(tmp + r * NR, &acc0[r], sizeof(vec));
      std::memcpy(tmp + r * NR + VL, &acc1[r], sizeof(vec));
    }
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t c = 0; c < nr; ++c) {
        Scalar& out = C[r * ldc + c];
        out = alpha * tmp[r * NR + c] + (beta != Scalar(0) ? beta * out : Scalar(0));
      }
  }
}

// One matrix (batch entry): C (M, N) = alpha op(A) (M, K) op(B) (K, N) + beta C. `threads` > 1
// splits the work inside this matrix.
template <class Scalar> void gemm_one(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C, int threads) {
  using TL = Tile<Scalar>;
  constexpr int MR = TL::MR, NR = TL::NR;
  const int64_t M = g.M, N = g.N, K = g.K;
  const Scalar alpha = static_cast<Scalar>(g.alpha), beta = static_cast<Scalar>(g.beta);
  if (K == 0) {  // C = beta * C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * g.ldc + j] = beta == Scalar(0) ? Scalar(0) : beta * C[i * g.ldc + j];
    return;
  }
  static thread_local AlignedBuffer<Scalar> a_buf;
  static thread_local AlignedBuffer<Scalar> b_buf;
  Scalar* Bp = b_buf.get(static_cast<size_t>(TL::KC) * ((std::min<int64_t>(N, TL::NC) + NR - 1) / NR * NR));

  for (int64_t jc = 0; jc < N; jc += TL::NC) {
    const int64_t nc = std::min<int64_t>(TL::NC, N - jc);
    const int64_t n_panels = (nc + NR - 1) / NR;
    for (int64_t pc = 0; pc < K; pc += TL::KC) {
      const int64_t kc = std::min<int64_t>(TL::KC, K - pc);
      const Scalar beta_eff = pc == 0 ? beta : Scalar(1);
      // Work items: (row block, column split). Split columns too when there are too few row
      // blocks to keep every thread busy.
      const int64_t m_blocks = (M + TL::MC - 1) / TL::MC;
      int64_t n_splits = 1;
      if (threads > 1 && m_blocks < 2 * threads) n_splits = std::min<int64_t>(n_panels, (2 * threads + m_blocks - 1) / m_blocks);
      const int64_t panels_per_split = (n_panels + n_splits - 1) / n_splits;
      const int64_t items = m_blocks * n_splits;
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
#pragma omp for schedule(static)
        for (int64_t p = 0; p < n_panels; ++p)
          pack_b_panel(g, B, pc, kc, jc + p * NR, std::min<int64_t>(NR, nc - p * NR), Bp + p * NR * kc);
        Scalar* Ap = a_buf.get(static_cast<size_t>(TL::MC) * kc);
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; ++it) {
          const int64_t ib = it / n_splits, js = it % n_splits;
          const int64_t ic = ib * TL::MC, mc = std::min<int64_t>(TL::MC, M - ic);
          const int64_t p0 = js * panels_per_split, p1 = std::min<int64_t>(n_panels, p0 + panels_per_split);
          if (p0 >= p1) continue;
          pack_a(g, A, ic, mc, pc, kc, Ap);
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t jr = p * NR, nr = std::min<int64_t>(NR, nc - jr);
            for (int64_t ir = 0; ir < mc; ir += MR) {
              micro_kernel<Scalar>(kc, Ap + ir * kc, Bp + p * NR * kc, C + (ic + ir) * g.ldc + jc + jr, g.ldc, alpha,
                                   beta_eff, std::min<int64_t>(MR, mc - ir), nr);
            }
          }
        }
      }
    }
  }
}

// A few rows (decoding one token, M <= kSkinnyRows): packing B would cost as much as the whole
// product, so multiply directly. Transposed B (rows of B contiguous, e.g. x W^T): one dot product
// per output with eight partial sums; otherwise row updates C[i, :] += a_ik B[k, :]. Threads split
// the columns. Every output is summed in the same order whatever the thread count.
constexpr int64_t kSkinnyRows = 4;

template <class Scalar> void gemm_skinny(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C, int threads) {
  const int64_t M = g.M, N = g.N, K = g.K;
  const Scalar alpha = static_cast<Scalar>(g.alpha), beta = static_cast<Scalar>(g.beta);
  auto body = [&](int64_t j0, int64_t j1) {
    std::vector<Scalar> arow(static_cast<size_t>(K)), acc(static_cast<size_t>(j1 - j0));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t k = 0; k < K; ++k) arow[k] = g.trans_a ? A[k * g.lda + i] : A[i * g.lda + k];
      if (g.trans_b) {
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] = dot_vectors(arow.data(), B + j * g.ldb, K);  // tensor/cpu/vec_dot.h
      } else {
        std::fill(acc.begin(), acc.end(), Scalar(0));
        for (int64_t k = 0; k < K; ++k) {
          const Scalar a = arow[k];
          const Scalar* b = B + k * g.ldb + j0;
          for (int64_t j = 0; j < j1 - j0; ++j) acc[j] += a * b[j];
        }
      }
      Scalar* c = C + i * g.ldc;
      for (int64_t j = j0; j < j1; ++j) c[j] = alpha * acc[j - j0] + (beta != Scalar(0) ? beta * c[j] : Scalar(0));
    }
  };
  // Threads only when the product is well above the parallel grain (tensor/cpu/parallel.h).
  if (threads > 1 && M * N * K >= 4 * parallel_grain()) {
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
      const int64_t t = omp_get_thread_num(), T_ = omp_get_num_threads();
#else
      const int64_t t = 0, T_ = 1;
#endif
      const int64_t chunk = (N + T_ - 1) / T_, j0 = std::min(N, t * chunk), j1 = std::min(N, j0 + chunk);
      if (j0 < j1) body(j0, j1);
    }
  } else {
    body(0, N);
  }
}

}  // namespace

// Every batch entry: C (M, N) = alpha op(A) (M, K) op(B) (K, N) + beta C, packed and register-tiled.
template <class Scalar> void gemm_blocked(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  if (g.M <= kSkinnyRows && g.K > 0) {
#ifdef _OPENMP
    const int skinny_threads = omp_in_parallel() ? 1 : num_threads();
#else
    const int skinny_threads = 1;
#endif
    if (g.batch >= 2 && skinny_threads > 1) {  // a few rows per matrix, many matrices: one per thread
      parallel_for(g.batch, g.M * g.N * g.K, [&](int64_t b0,
                   int64_t b1) { for (int64_t b = b0; b < b1; ++b) gemm_skinny<Scalar>(g, A + b * g.stride_a,
                   B + b * g.stride_b, C + b * g.stride_c, 1); });
      return;
    }
    for (int64_t b = 0; b < g.batch; ++b)
      gemm_skinny<Scalar>(g, A + b * g.stride_a, B + b * g.stride_b, C + b * g.stride_c, skinny_threads);
    return;
  }
  // Inside an outer parallel region (e.g. attention parallel over heads) run single-threaded.
#ifdef _OPENMP
  const int threads = omp_in_parallel() ? 1 : num_threads();
#else
  const int threads = 1;
#endif
  const double flops = 2.0 * static_cast<double>(g.M) * g.N * std::max<int64_t>(g.K, 1);
  // Many small matrices: one whole matrix per thread. Otherwise: all threads on each matrix.
  if (g.batch >= threads && threads > 1 && flops < 64.0 * 1024 * 1024) {
    parallel_for(g.batch, parallel_grain(), [&](int64_t b0,
                 int64_t b1) { for (int64_t b = b0; b < b1; ++b) gemm_one<Scalar>(g, A + b * g.stride_a,
                 B + b * g.stride_b, C + b * g.stride_c, 1); });
  } else {
    const int inner = flops < 2.0 * 64 * 64 * 64 ? 1 : threads;
    for (int64_t b = 0; b < g.batch; ++b) gemm_one<Scalar>(g, A + b * g.stride_a, B + b * g.stride_b,
                                                           C + b * g.stride_c, inner);
  }
}

template <class Scalar>
void gemm_single(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Scalar* A,
                 int64_t lda, const Scalar* B, int64_t ldb, double beta, Scalar* C, int64_t ldc) {
  GemmArgs g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.M = m;
  g.N = n;
  g.K = k;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.alpha = alpha;
  g.beta = beta;
  gemm_blocked<Scalar>(g, A, B, C);
}

template <class Scalar> GemmTiling gemm_tiling() {
  return GemmTiling{Tile<Scalar>::MR, Tile<Scalar>::NR, Tile<Scalar>::KC, Tile<Scalar>::MC, Tile<Scalar>::NC};
}

template void gemm_naive<float>(const GemmArgs&, const float*, const float*, float*);
template void gemm_naive<double>(const GemmArgs&, const double*, const double*, double*);
template void gemm_blocked<float>(const GemmArgs&, const float*, const float*, float*);
template void gemm_blocked<double>(const GemmArgs&, const double*, const double*, double*);
template void gemm_single<float>(bool, bool, int64_t, int64_t, int64_t, double, const float*, int64_t, const float*,
                                 int64_t, double, float*, int64_t);
template void gemm_single<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                                  int64_t, double, double*, int64_t);
template GemmTiling gemm_tiling<float>();
template GemmTiling gemm_tiling<double>();

// The kernel-list entry: contiguous batches of f32/f64 matrices.
void gemm(const GemmArgs& g, const Tensor& A, const Tensor& B, const Tensor& C) {
  LM_DISPATCH_FLOAT(C.dtype(), "matmul", { gemm_blocked<scalar_t>(g, A.data<scalar_t>(), B.data<scalar_t>(), C.data<scalar_t>()); });
}

}  // namespace cpu
}  // namespace lm
