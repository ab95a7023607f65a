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
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"

namespace lm {
namespace cpu {

// ---------------------------------------------------------------- naive reference
// Per batch entry: C (M, N) = alpha op(A) (M, K) op(B) (K, N) + beta C, by the triple loop.
template <class Scalar>
void gemm_naive(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C) {
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
constexpr int kRowsPerTile = 6;  // 6 x 2 accumulators + 3 <= 16 ymm
#else
constexpr int kVecBytes = 16;
constexpr int kRowsPerTile = 6;
#endif

template <class Scalar>
struct Tile {
  typedef Scalar vec __attribute__((vector_size(kVecBytes)));
  static constexpr int VL = kVecBytes / static_cast<int>(sizeof(Scalar));  // lanes per vector
  static constexpr int MR = kRowsPerTile;
  static constexpr int NR = 2 * VL;
};

// The cache blocks, from the cache sizes read at run time (tensor/cpu/cache_info.h), or set by
// set_gemm_blocks. Atomics, because the first GEMMs may derive them on several threads at once;
// KC is stored last (release) and read first (acquire), so a nonzero KC means MC and NC are set.
template <class Scalar>
struct Blocks {
  static std::atomic<int64_t> kc, mc, nc;
};
template <class Scalar>
std::atomic<int64_t> Blocks<Scalar>::kc{0};
template <class Scalar>
std::atomic<int64_t> Blocks<Scalar>::mc{0};
template <class Scalar>
std::atomic<int64_t> Blocks<Scalar>::nc{0};

template <class Scalar>
GemmTiling current_blocks() {
  if (Blocks<Scalar>::kc.load(std::memory_order_acquire) == 0) {
    const GemmTiling t = gemm_tiling_for<Scalar>(cache_sizes());
    Blocks<Scalar>::mc.store(t.mc, std::memory_order_relaxed);
    Blocks<Scalar>::nc.store(t.nc, std::memory_order_relaxed);
    Blocks<Scalar>::kc.store(t.kc, std::memory_order_release);
  }
  return GemmTiling{Tile<Scalar>::MR, Tile<Scalar>::NR,
                    static_cast<int>(Blocks<Scalar>::kc.load(std::memory_order_relaxed)),
                    static_cast<int>(Blocks<Scalar>::mc.load(std::memory_order_relaxed)),
                    static_cast<int>(Blocks<Scalar>::nc.load(std::memory_order_relaxed))};
}

// 64-byte aligned scratch that grows and is reused (one per thread for A, one shared for B).
template <class Scalar>
struct AlignedBuffer {
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

// Packing reorders a block so that the micro-kernel reads it front to back. Where the source and
// the packed order disagree (a row-major A, a transposed B) the copy goes in steps of kPackSteps
// values of k: the few kilobytes being written stay in L1 while the source rows are read in
// order. (Writing one source row at a time across a whole panel strides over the panel once per
// row, and a panel of KC = 1024 does not fit in L1.)
constexpr int64_t kPackSteps = 64;

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: a small transposed copy. f32 on
// x86 goes in 4 x 4 blocks through SSE registers (four loads, eight shuffles, four stores per 16
// values); edges and other types go one value at a time.
template <class Scalar>
inline void copy_transposed(const Scalar* src, int64_t lds, Scalar* dst, int64_t ldd, int64_t rows, int64_t cols) {
  int64_t r0 = 0;
#if defined(__SSE__)
  if constexpr (std::is_same<Scalar, float>::value) {
    for (; r0 + 4 <= rows; r0 += 4) {
      int64_t c0 = 0;
      for (; c0 + 4 <= cols; c0 += 4) {
        __m128 a = _mm_loadu_ps(src + r0 * lds + c0), b = _mm_loadu_ps(src + (r0 + 1) * lds + c0);
        __m128 c = _mm_loadu_ps(src + (r0 + 2) * lds + c0), d = _mm_loadu_ps(src + (r0 + 3) * lds + c0);
        _MM_TRANSPOSE4_PS(a, b, c, d);
        _mm_storeu_ps(dst + c0 * ldd + r0, a);
        _mm_storeu_ps(dst + (c0 + 1) * ldd + r0, b);
        _mm_storeu_ps(dst + (c0 + 2) * ldd + r0, c);
        _mm_storeu_ps(dst + (c0 + 3) * ldd + r0, d);
      }
      for (; c0 < cols; ++c0)
        for (int64_t r = r0; r < r0 + 4; ++r) dst[c0 * ldd + r] = src[r * lds + c0];
    }
  }
#endif
  for (int64_t r = r0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// Asks for the next step's source lines early: `rows` rows `lds` apart, `count` values each
// (callers pass only pointers inside the source). Rows far apart are separate streams that the
// hardware prefetchers follow poorly; without this, packing a row-major A spent most of its time
// waiting for L3.
template <class Scalar>
inline void prefetch_rows(const Scalar* src, int64_t lds, int64_t rows, int64_t count) {
  constexpr int64_t per_line = 64 / sizeof(Scalar);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < count; c += per_line) __builtin_prefetch(src + r * lds + c);
}

// One packed panel from `rows` source rows `ld` apart that run along k (a row-major A, or B^T):
// dst[k * width + r] = src[r * ld + k] for k < kc, zero for rows..width-1. Transposed copies of
// kPackSteps values of k at a time, the next step's lines asked for early.
template <class Scalar>
void pack_panel_transposed(const Scalar* src, int64_t ld, int64_t rows, int64_t width, int64_t kc, Scalar* dst) {
  for (int64_t kb = 0; kb < kc; kb += kPackSteps) {
    if (kb + kPackSteps < kc)
      prefetch_rows(src + kb + kPackSteps, ld, rows, std::min(kPackSteps, kc - kb - kPackSteps));
    copy_transposed(src + kb, ld, dst + kb * width, width, rows, std::min(kPackSteps, kc - kb));
  }
  if (rows < width)
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t r = rows; r < width; ++r) dst[k * width + r] = Scalar(0);
}

// Pack rows [i0, i0+mc) x depth [k0, k0+kc) of op(A) into MR-row panels: panel p holds
// Ap[p*MR*kc + k*MR + r] = op(A)(i0 + p*MR + r, k0 + k), zero beyond mc.
template <class Scalar>
void pack_a(const GemmArgs& g, const Scalar* A, int64_t i0, int64_t mc, int64_t k0, int64_t kc, Scalar* Ap) {
  constexpr int MR = Tile<Scalar>::MR;
  if (!g.trans_a) {
    // A is row-major along k: transposed copies, kPackSteps values of k at a time.
    for (int64_t p = 0; p < mc; p += MR)
      pack_panel_transposed(A + (i0 + p) * g.lda + k0, g.lda, std::min<int64_t>(MR, mc - p), MR, kc, Ap + p * kc);
  } else {
    // op(A) = A^T: row k of A holds op(A)'s column k, so each source row feeds every panel.
    constexpr int64_t ahead = 8;  // rows of A asked for early (they are lda apart: separate streams)
    for (int64_t k = 0; k < kc; ++k) {
      const Scalar* src = A + (k0 + k) * g.lda + i0;
      if (k + ahead < kc) prefetch_rows(src + ahead * g.lda, g.lda, 1, mc);
      for (int64_t p = 0; p < mc; p += MR) {
        Scalar* dst = Ap + p * kc + k * MR;
        const int64_t rows = std::min<int64_t>(MR, mc - p);
        for (int64_t r = 0; r < rows; ++r) dst[r] = src[p + r];
        for (int64_t r = rows; r < MR; ++r) dst[r] = Scalar(0);
      }
    }
  }
}

// Pack NR-column panels [p0, p1) of op(B)'s columns [j0, j0+nc) x depth [k0, k0+kc): panel p holds
// Bp[p*NR*kc + k*NR + c] = op(B)(k0 + k, j0 + p*NR + c), zero beyond nc.
template <class Scalar>
void pack_b(const GemmArgs& g, const Scalar* B, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t p0, int64_t p1,
            Scalar* Bp) {
  constexpr int NR = Tile<Scalar>::NR;
  if (!g.trans_b) {
    // B is row-major along the columns: each source row is read once, front to back, and
    // dealt to every panel.
    for (int64_t k = 0; k < kc; ++k) {
      const Scalar* src = B + (k0 + k) * g.ldb + j0;
      for (int64_t p = p0; p < p1; ++p) {
        Scalar* dst = Bp + p * NR * kc + k * NR;
        const int64_t nr = std::min<int64_t>(NR, nc - p * NR);
        for (int64_t c = 0; c < nr; ++c) dst[c] = src[p * NR + c];
        for (int64_t c = nr; c < NR; ++c) dst[c] = Scalar(0);
      }
    }
  } else {
    // op(B) = B^T: B's rows run along k, so transposed copies as for a row-major A.
    for (int64_t p = p0; p < p1; ++p)
      pack_panel_transposed(B + (j0 + p * NR) * g.ldb + k0, g.ldb, std::min<int64_t>(NR, nc - p * NR), NR, kc,
                            Bp + p * NR * kc);
  }
}

// How a micro-kernel call treats its tile of C. A product deeper than one KC slice keeps its
// running sum in C between slices: the first slice starts from zero, later ones continue from
// what C holds, and only the last applies alpha (and beta, which only a one-slice product sees:
// gemm_one routes the rest through a scratch sum). So every element is one chain of fused
// multiply-adds in k order, whatever KC is: results do not depend on the cache sizes.
struct TileStep {
  bool continue_sum;  // start from C's running sum instead of zero
  bool last;          // the last slice: C = alpha * sum (+ beta * C)
};

// The last step is C = fma(beta, C, alpha * sum) everywhere: alpha * sum rounded on its own, then
// one fused multiply-add. `rounded` hides a value from the compiler, so that -ffp-contract cannot
// fuse the product that made it into the next addition (it could fuse either product, and chose
// differently in the vector and the scalar code).
template <class T>
inline void rounded(T& v) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ volatile("" : "+v"(v));
#else
  __asm__ volatile("" : "+m"(v));
#endif
}

// The micro-kernel: acc (MR x NR) = [C's running sum +] sum_k Ap[k, :]^T Bp[k, :] on the valid
// mr x nr corner of C, stored as the running sum or, on the last slice, as alpha * acc + beta * C
// (C is not read when beta == 0 and this is the first slice).
template <class Scalar>
void micro_kernel(int64_t kc, const Scalar* __restrict Ap, const Scalar* __restrict Bp, Scalar* C, int64_t ldc,
                  Scalar alpha, Scalar beta, int64_t mr, int64_t nr, TileStep step) {
  using vec = typename Tile<Scalar>::vec;
  constexpr int MR = Tile<Scalar>::MR, NR = Tile<Scalar>::NR, VL = Tile<Scalar>::VL;
  const bool full = mr == MR && nr == NR;
  alignas(64) Scalar tmp[MR * NR];  // the tile through memory at the edges of C
  vec acc0[MR], acc1[MR];
  if (!step.continue_sum) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      acc0[r] = vec{};
      acc1[r] = vec{};
    }
  } else if (full) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      std::memcpy(&acc0[r], C + r * ldc, sizeof(vec));
      std::memcpy(&acc1[r], C + r * ldc + VL, sizeof(vec));
    }
  } else {
    for (int64_t r = 0; r < MR; ++r)
      for (int64_t c = 0; c < NR; ++c) tmp[r * NR + c] = r < mr && c < nr ? C[r * ldc + c] : Scalar(0);
    for (int r = 0; r < MR; ++r) {
      std::memcpy(&acc0[r], tmp + r * NR, sizeof(vec));
      std::memcpy(&acc1[r], tmp + r * NR + VL, sizeof(vec));
    }
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
  const bool scale = step.last && alpha != Scalar(1);
  const bool add_c = step.last && beta != Scalar(0);
  if (full) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      Scalar* c = C + r * ldc;
      vec c0 = acc0[r], c1 = acc1[r];
      if (scale) {
        c0 *= alpha;
        c1 *= alpha;
        rounded(c0);
        rounded(c1);
      }
      if (add_c) {
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
    for (int r = 0; r < MR; ++r) {
      std::memcpy(tmp + r * NR, &acc0[r], sizeof(vec));
      std::memcpy(tmp + r * NR + VL, &acc1[r], sizeof(vec));
    }
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t c = 0; c < nr; ++c) {
        Scalar& out = C[r * ldc + c];
        Scalar v = scale ? alpha * tmp[r * NR + c] : tmp[r * NR + c];
        rounded(v);
        out = add_c ? std::fma(beta, out, v) : v;
      }
  }
}

// C = beta * C: the whole product when K == 0 (there is no sum to add).
template <class Scalar>
inline void scale_c(const GemmArgs& g, Scalar beta, Scalar* C) {
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) C[i * g.ldc + j] = beta == Scalar(0) ? Scalar(0) : beta * C[i * g.ldc + j];
}

template <class Scalar>
void gemm_one(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C, int threads);

// beta != 0 and more than one KC slice: C is needed for beta * C at the end, so the running sum
// cannot live in it: sum into scratch, then combine (the same chain per element as any other product).
template <class Scalar>
void gemm_through_scratch(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C, int threads) {
  const int64_t M = g.M, N = g.N;
  const Scalar alpha = static_cast<Scalar>(g.alpha), beta = static_cast<Scalar>(g.beta);
  static thread_local AlignedBuffer<Scalar> sum_buf;
  Scalar* S = sum_buf.get(static_cast<size_t>(M * N));
  GemmArgs gs = g;
  gs.alpha = 1.0;
  gs.beta = 0.0;
  gs.ldc = N;
  gemm_one<Scalar>(gs, A, B, S, threads);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      Scalar& out = C[i * g.ldc + j];
      Scalar v = alpha != Scalar(1) ? alpha * S[i * N + j] : S[i * N + j];
      rounded(v);
      out = std::fma(beta, out, v);
    }
}

// Row blocks of at most MC rows, made of whole MR-row tiles spread as evenly as they go (a block
// count that the threads share evenly, when there are enough rows). Block b holds tiles
// [b * tiles / count, (b + 1) * tiles / count); max_rows bounds its rows (the packed A's size).
struct RowBlocks {
  int64_t tiles, count, max_rows;
};
inline RowBlocks row_blocks(int64_t M, int64_t MR, int64_t MC, int threads) {
  const int64_t tiles = (M + MR - 1) / MR;
  int64_t count = (M + MC - 1) / MC;
  if (threads > 1 && count % threads != 0 && tiles >= 4 * threads) count = (count + threads - 1) / threads * threads;
  count = std::min(count, tiles);
  return RowBlocks{tiles, count, (tiles + count - 1) / count * MR};
}

// Inside the parallel region: the threads pack panels [0, n_panels) of B's slice together, a run
// of panels each.
template <class Scalar>
inline void pack_b_shared(const GemmArgs& g, const Scalar* B, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                          int64_t n_panels, Scalar* Bp) {
#ifdef _OPENMP
  const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
#else
  const int64_t t = 0, T = 1;
#endif
  pack_b(g, B, pc, kc, jc, nc, t * n_panels / T, (t + 1) * n_panels / T, Bp);
}

// The tiles of C in rows [0, mc) and NR-column panels [p0, p1) of one packed block of A and one
// packed slice of B; C points at the block's top-left element, its NC block nc columns wide.
template <class Scalar>
inline void multiply_packed(int64_t kc, const Scalar* Ap, const Scalar* Bp, Scalar* C, int64_t ldc, Scalar alpha,
                            Scalar beta, int64_t mc, int64_t nc, int64_t p0, int64_t p1, TileStep step) {
  constexpr int MR = Tile<Scalar>::MR, NR = Tile<Scalar>::NR;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t jr = p * NR, nr = std::min<int64_t>(NR, nc - jr);
    for (int64_t ir = 0; ir < mc; ir += MR) {
      micro_kernel<Scalar>(kc, Ap + ir * kc, Bp + p * NR * kc, C + ir * ldc + jr, ldc, alpha, beta,
                           std::min<int64_t>(MR, mc - ir), nr, step);
    }
  }
}

// One matrix (batch entry): C (M, N) = alpha op(A) (M, K) op(B) (K, N) + beta C. `threads` > 1
// splits the work inside this matrix; one parallel region covers the whole product.
template <class Scalar>
void gemm_one(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C, int threads) {
  using TL = Tile<Scalar>;
  constexpr int MR = TL::MR, NR = TL::NR;
  const GemmTiling bl = current_blocks<Scalar>();
  const int64_t M = g.M, N = g.N, K = g.K, KC = bl.kc, NC = bl.nc;
  const Scalar alpha = static_cast<Scalar>(g.alpha), beta = static_cast<Scalar>(g.beta);
  if (K == 0) return scale_c(g, beta, C);
  if (beta != Scalar(0) && K > KC) return gemm_through_scratch(g, A, B, C, threads);
  // When the row blocks are still too few to share evenly, each block's columns are split too.
  // Work item = (row block, column split), dealt to the threads in equal contiguous runs.
  const RowBlocks rb = row_blocks(M, MR, bl.mc, threads);
  const int64_t tiles = rb.tiles, m_blocks = rb.count;
  static thread_local AlignedBuffer<Scalar> b_buf;
  Scalar* Bp = b_buf.get(static_cast<size_t>(std::min(K, KC)) * ((std::min(N, NC) + NR - 1) / NR * NR));

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    static thread_local AlignedBuffer<Scalar> a_buf;
    Scalar* Ap = a_buf.get(static_cast<size_t>(rb.max_rows) * std::min(K, KC));
    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc);
      const int64_t n_panels = (nc + NR - 1) / NR;
      int64_t n_splits = 1;
      if (threads > 1 && m_blocks % threads != 0)
        n_splits = std::min<int64_t>(n_panels, std::max<int64_t>(1, (2 * threads + m_blocks - 1) / m_blocks));
      const int64_t panels_per_split = (n_panels + n_splits - 1) / n_splits;
      const int64_t items = m_blocks * n_splits;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const TileStep step{pc > 0, pc + kc == K};
        // The barrier makes B's packed slice whole before use, and the work loop's barrier keeps
        // it until every thread is done with it.
        pack_b_shared(g, B, pc, kc, jc, nc, n_panels, Bp);
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; ++it) {
          const int64_t ib = it / n_splits, js = it % n_splits;
          const int64_t ic = ib * tiles / m_blocks * MR, mc = std::min(M, (ib + 1) * tiles / m_blocks * MR) - ic;
          const int64_t p0 = js * panels_per_split, p1 = std::min<int64_t>(n_panels, p0 + panels_per_split);
          if (p0 >= p1 || mc <= 0) continue;
          pack_a(g, A, ic, mc, pc, kc, Ap);
          multiply_packed(kc, Ap, Bp, C + ic * g.ldc + jc, g.ldc, alpha, beta, mc, nc, p0, p1, step);
        }
      }
    }
  }
}

}  // namespace

template <class Scalar>
void gemv_rows(const Scalar* x, const Scalar* W, int64_t ldw, int64_t K, int64_t j0, int64_t j1, Scalar* y) {
  for (int64_t j = j0; j < j1; ++j) y[j] = dot_vectors(x, W + j * ldw, K);  // tensor/cpu/vec_dot.h
}
template void gemv_rows<float>(const float*, const float*, int64_t, int64_t, int64_t, int64_t, float*);
template void gemv_rows<double>(const double*, const double*, int64_t, int64_t, int64_t, int64_t, double*);

namespace {

// A few rows (decoding one token, M <= kSkinnyRows): packing B would cost as much as the whole
// product, so multiply directly. Transposed B (rows of B contiguous, e.g. x W^T): one dot product
// per output with eight partial sums; otherwise row updates C[i, :] += a_ik B[k, :]. Threads split
// the columns. Every output is summed in the same order whatever the thread count.
constexpr int64_t kSkinnyRows = 4;

template <class Scalar>
void gemm_skinny(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C, int threads) {
  const int64_t M = g.M, N = g.N, K = g.K;
  const Scalar alpha = static_cast<Scalar>(g.alpha), beta = static_cast<Scalar>(g.beta);
  auto body = [&](int64_t j0, int64_t j1) {
    std::vector<Scalar> arow(static_cast<size_t>(K)), acc(static_cast<size_t>(j1 - j0));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t k = 0; k < K; ++k) arow[k] = g.trans_a ? A[k * g.lda + i] : A[i * g.lda + k];
      if (g.trans_b) {
        gemv_rows(arow.data(), B + j0 * g.ldb, g.ldb, K, 0, j1 - j0, acc.data());
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
template <class Scalar>
void gemm_blocked(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C) {
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  if (g.M <= kSkinnyRows && g.K > 0) {
#ifdef _OPENMP
    const int skinny_threads = omp_in_parallel() ? 1 : num_threads();
#else
    const int skinny_threads = 1;
#endif
    if (g.batch >= 2 && skinny_threads > 1) {  // a few rows per matrix, many matrices: one per thread
      parallel_for(g.batch, g.M * g.N * g.K, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          gemm_skinny<Scalar>(g, A + b * g.stride_a, B + b * g.stride_b, C + b * g.stride_c, 1);
      });
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
    parallel_for(g.batch, parallel_grain(), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        gemm_one<Scalar>(g, A + b * g.stride_a, B + b * g.stride_b, C + b * g.stride_c, 1);
    });
  } else {
    const int inner = flops < 2.0 * 64 * 64 * 64 ? 1 : threads;
    for (int64_t b = 0; b < g.batch; ++b)
      gemm_one<Scalar>(g, A + b * g.stride_a, B + b * g.stride_b, C + b * g.stride_c, inner);
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

template <class Scalar>
GemmTiling gemm_tiling_for(const CacheSizes& caches) {
  constexpr int MR = Tile<Scalar>::MR, NR = Tile<Scalar>::NR;
  constexpr int64_t bytes = sizeof(Scalar);
  // KC: deep slices amortise loading and storing the C tile around each micro-kernel call. One
  // packed B micro-panel (KC x NR) gets an eighth of L2; it is reread for every MR rows of A.
  // (Sizing it to half of L1 instead, as BLIS does for some CPUs, measured 10-15% slower on a
  // Zen 4 with 32 KiB of L1: its L2 feeds the two vector loads per step easily.)
  int64_t kc = caches.l2 / 8 / (NR * bytes) / 8 * 8;
  kc = std::clamp<int64_t>(kc, 128, 1024);
  // MC: the packed A block (MC x KC), reread for every B micro-panel, gets three eighths of L2.
  int64_t mc = caches.l2 * 3 / 8 / (kc * bytes) / MR * MR;
  mc = std::clamp<int64_t>(mc, 4 * MR, 8192 / MR * MR);
  // NC: the packed B slice (KC x NC), shared by the threads, fills half of a core's L3 share.
  int64_t nc = caches.l3_per_core / 2 / (kc * bytes) / NR * NR;
  nc = std::clamp<int64_t>(nc, 4 * NR, 16384 / NR * NR);
  return GemmTiling{MR, NR, static_cast<int>(kc), static_cast<int>(mc), static_cast<int>(nc)};
}

template <class Scalar>
GemmTiling gemm_tiling() {
  return current_blocks<Scalar>();
}

template <class Scalar>
void set_gemm_blocks(int kc, int mc, int nc) {
  if (kc == 0 && mc == 0 && nc == 0) {  // back to the cache-derived blocks
    Blocks<Scalar>::kc.store(0, std::memory_order_relaxed);
    return;
  }
  constexpr int MR = Tile<Scalar>::MR, NR = Tile<Scalar>::NR;
  LM_CHECK(kc >= 1 && mc >= MR && mc % MR == 0 && nc >= NR && nc % NR == 0,
           "set_gemm_blocks: need kc >= 1, mc a positive multiple of "
               << MR << ", nc a positive multiple of " << NR << "; got kc " << kc << ", mc " << mc << ", nc " << nc);
  current_blocks<Scalar>();  // derive first, so that the stores below are not overwritten
  Blocks<Scalar>::mc.store(mc, std::memory_order_relaxed);
  Blocks<Scalar>::nc.store(nc, std::memory_order_relaxed);
  Blocks<Scalar>::kc.store(kc, std::memory_order_release);
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
template GemmTiling gemm_tiling_for<float>(const CacheSizes&);
template GemmTiling gemm_tiling_for<double>(const CacheSizes&);
template void set_gemm_blocks<float>(int, int, int);
template void set_gemm_blocks<double>(int, int, int);

// The kernel-list entry: contiguous batches of f32/f64 matrices.
void gemm(const GemmArgs& g, const Tensor& A, const Tensor& B, const Tensor& C) {
  LM_DISPATCH_FLOAT(C.dtype(), "matmul",
                    { gemm_blocked<scalar_t>(g, A.data<scalar_t>(), B.data<scalar_t>(), C.data<scalar_t>()); });
}

}  // namespace cpu
}  // namespace lm
