// cpu/gemm.h: row-major GEMM on the CPU, twice. gemm_naive is the executable specification (a
// triple loop anyone can check by eye); gemm_blocked is the fast one (packing + register-tiled
// micro-kernel + OpenMP), tested against the naive one and benchmarked in bench/bench_gemm.cpp.
// Both compute, for each batch b: C = alpha * op(A) op(B) + beta * C (see GemmArgs in kernels.h).
#pragma once

#include "tensor/cpu/cache_info.h"
#include "tensor/kernels.h"

namespace lm {
namespace cpu {

// Per batch entry b: C_b (M, N) = alpha op(A_b) (M, K) op(B_b) (K, N) + beta C_b, laid out as
// GemmArgs says (tensor/kernels.h).
template <class Scalar>
void gemm_naive(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C);
template <class Scalar>
void gemm_blocked(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C);

// One matrix, row-major, in BLAS argument order: C (m x n, ldc) = alpha op(A) op(B) + beta C.
// A convenience over gemm_blocked for kernels that multiply sub-blocks (e.g. attention).
template <class Scalar>
void gemm_single(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Scalar* A,
                 int64_t lda, const Scalar* B, int64_t ldb, double beta, Scalar* C, int64_t ldc);

// y[j] = x . W[j] for the rows j in [j0, j1) of a row-major W (row stride ldw, K columns): the
// products gemm_blocked computes for a one-row A times a transposed B (its few-row path calls
// this), with the same sums; compiled with gemm.cpp's FMA contraction, which is why it is not
// inline. For callers that split such a product's columns among threads of their own (the
// one-token decode step, beyond/decode_step.cpp).
template <class Scalar>
void gemv_rows(const Scalar* x, const Scalar* W, int64_t ldw, int64_t K, int64_t j0, int64_t j1, Scalar* y);

// The register tile (MR x NR, fixed by the build's vector width) and the cache blocks (KC, MC, NC)
// gemm_blocked uses for Scalar. The blocks come from the cache sizes read at run time
// (gemm_tiling_for(cache_sizes()), tensor/cpu/cache_info.h) unless set_gemm_blocks chose others.
// Results do not depend on the blocks: each element of C is one chain of multiply-adds in k order.
struct GemmTiling {
  int mr, nr, kc, mc, nc;
};
template <class Scalar>
GemmTiling gemm_tiling();
template <class Scalar>
GemmTiling gemm_tiling_for(const CacheSizes& caches);
// Tests and tuning experiments: fixed blocks (kc >= 1, mc a multiple of MR, nc a multiple of NR);
// all three 0 go back to the cache-derived ones. Not to be called while a GEMM runs.
template <class Scalar>
void set_gemm_blocks(int kc, int mc, int nc);

}  // namespace cpu
}  // namespace lm
