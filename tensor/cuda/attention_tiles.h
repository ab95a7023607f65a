// attention_tiles.h: how the CUDA attention kernels (nn/cuda/attention.cu, landmark/cuda/
// attention.cu) cut each head's (T, T) products into row tiles, and the GEMM arguments for the
// sub-matrices that tiling needs. Host code only.
//
// The tile of queries [i0, i1) needs the keys [0, i1) only, and the keys [j0, j1) get gradient
// from the queries [j0, T) only, so with n tiles the GEMMs do (n + 1) / 2n of the full products'
// work (n = 4: 62.5%), in n times as many smaller GEMM calls. The tile height is
// LM_CUDA_ATTENTION_TILE rows (0: a single tile), by default kDefaultAttentionTileRows, chosen
// from the runs in docs/cuda.md section 7.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "tensor/kernels.h"

namespace lm {
namespace cuda {

constexpr int64_t kDefaultAttentionTileRows = 512;

// The tile height for this process (read once; a bad value is an error naming the variable).
inline int64_t attention_tile_rows() {
  static const int64_t rows = [] {
    const char* e = std::getenv("LM_CUDA_ATTENTION_TILE");
    if (e == nullptr || *e == '\0') return kDefaultAttentionTileRows;
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    LM_CHECK(*end == '\0' && v >= 0 && v <= (int64_t(1) << 24),
             "LM_CUDA_ATTENTION_TILE must be a row count in [0, 2^24] (0: no tiling), got '" << e << "'");
    return static_cast<int64_t>(v);
  }();
  return rows;
}

// Rows per tile for sequences of length T (the last tile may be shorter).
inline int64_t attention_tile(int64_t T) {
  const int64_t r = attention_tile_rows();
  return r == 0 || r >= T ? T : r;
}

// The elements of t from element `at` on, as a flat view (gemm reads only the data pointer).
inline Tensor from_element(const Tensor& t, int64_t at) { return t.view({t.numel()}).narrow(0, at, t.numel() - at); }

// One GEMM per head on sub-matrices: each operand's pointer is already at the block's first
// element; ld* is the full row-major matrix's column count; s* the distance between heads.
inline GemmArgs blocks_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                            int64_t sa, int64_t sb, int64_t sc, int64_t BH, double alpha, double beta = 0.0) {
  GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.M = M;
  g.N = N;
  g.K = K;
  g.batch = BH;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.stride_a = sa;
  g.stride_b = sb;
  g.stride_c = sc;
  g.alpha = alpha;
  g.beta = beta;
  return g;
}

}  // namespace cuda
}  // namespace lm
