// cpu/gemm.h: row-major GEMM on the CPU, twice. gemm_naive is the executable specification (a
// triple loop anyone can check by eye); gemm_blocked is the fast one (packing + register-tiled
// micro-kernel + OpenMP), tested against the naive one and benchmarked in bench/bench_gemm.cpp.
// Both compute, for each batch b: C = alpha * op(A) op(B) + beta * C (see GemmArgs in kernels.h).
#pragma once

#include "tensor/kernels.h"

namespace lm {
namespace cpu {

// Per batch entry b: C_b (M, N) = alpha op(A_b) (M, K) op(B_b) (K, N) + beta C_b, laid out as
// GemmArgs says (tensor/kernels.h).
template <class Scalar> void gemm_naive(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C);
template <class Scalar> void gemm_blocked(const GemmArgs& g, const Scalar* A, const Scalar* B, Scalar* C);

// One matrix, row-major, in BLAS argument order: C (m x n, ldc) = alpha op(A) op(B) + beta C.
// A convenience over gemm_blocked for kernels that multiply sub-blocks (e.g. attention).
template <class Scalar>
void gemm_single(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Scalar* A,
                 int64_t lda, const Scalar* B, int64_t ldb, double beta, Scalar* C, int64_t ldc);

// The register tile and cache blocks gemm_blocked uses for Scalar on this build (for docs and bench).
struct GemmTiling { int mr, nr, kc, mc, nc; };
template <class Scalar> GemmTiling gemm_tiling();

}  // namespace cpu
}  // namespace lm
