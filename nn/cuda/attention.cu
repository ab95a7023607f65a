// nn/cuda/attention.cu: fused causal attention on CUDA. The products (q k^T, P v and the four of
// the backward) are strided-batched cuBLAS GEMMs over all heads at once, through lm::cuda::gemm
// (tensor/cuda/gemm.cu); the causal softmax and its backward are one block per row, reduced in a
// fixed order with no atomics. Not flash attention: the (T, T) score matrix is stored, but the
// GEMMs are cut into row tiles that skip most of the masked upper triangle (RowTiles below).
// CPU twin: nn/cpu/attention.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "nn/kernels.h"
#include "tensor/elementwise_math.h"
#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

// probs (BH, T, T) holds S = scale q k^T on entry and P on exit. Row r is query i = r % T, which
// sees keys 0..i: P[i, j] = exp(S[i, j] - max) / sum for j <= i, and 0 for j > i. One block per
// row; the branch on the row is uniform, so every thread reaches the same barriers.
template <class Scalar> __global__ void causal_softmax_kernel(Scalar* probs, int64_t T, int64_t rows) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    Scalar* p = probs + r * T;
    const int64_t n = r % T + 1;
    Scalar m = -static_cast<Scalar>(INFINITY);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = MaxOp{}(m, p[j]);
    m = block_allreduce(m, MaxOp{});
    // Each thread rescales only the entries it wrote itself, so no barrier is needed between.
    Scalar s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      p[j] = math::exp_softmax(p[j] - m);  // the CPU twin's exp (tensor/elementwise_math.h)
      s += p[j];
    }
    s = block_allreduce(s, SumOp{});
    const Scalar inv = Scalar(1) / s;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) p[j] *= inv;
    for (int64_t j = n + threadIdx.x; j < T; j += blockDim.x) p[j] = Scalar(0);
  }
}

// d (BH, T, T) holds dP = dout v^T on entry and dS on exit:
//   dS[i, j] = P[i, j] (dP[i, j] - sum_{j' <= i} P[i, j'] dP[i, j'])  for j <= i, 0 above.
// The masked entries of dP are garbage from the full GEMM and are never read. One block per row.
template <class Scalar> __global__ void causal_softmax_backward_kernel(const Scalar* probs, Scalar* d, int64_t T,
    int64_t rows) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Scalar* p = probs + r * T;
    Scalar* dr = d + r * T;
    const int64_t n = r % T + 1;
    Scalar dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += p[j] * dr[j];
    dot = block_allreduce(dot, SumOp{});
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dr[j] = p[j] * (dr[j] - dot);
    for (int64_t j = n + threadIdx.x; j < T; j += blockDim.x) dr[j] = Scalar(0);
  }
}

// Masked blocks are skipped by cutting each head's (T, T) products into row tiles: the tile of
// queries [i0, i1) needs keys [0, i1) only, and key tile [j0, j1) gets gradient from queries
// [j0, T) only. With n tiles the GEMMs do (n + 1) / 2n of the full products' work (n = 4: 62.5%),
// in n times as many (smaller) GEMM calls. Entries of probs and dS right of a tile's last column
// are never written by a GEMM; the row kernels read j <= i only and write the zeros above the
// diagonal themselves. The tile height is LM_CUDA_ATTENTION_TILE rows (0: one tile, the full
// products), by default kDefaultTileRows, chosen from the runs in docs/cuda.md section 12.
constexpr int64_t kDefaultTileRows = 512;

int64_t tile_rows() {
  static const int64_t rows = [] {
    const char* e = std::getenv("LM_CUDA_ATTENTION_TILE");
    if (e == nullptr || *e == '\0') return kDefaultTileRows;
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    LM_CHECK(*end == '\0' && v >= 0 && v <= (int64_t(1) << 24),
             "LM_CUDA_ATTENTION_TILE must be a row count in [0, 2^24] (0: no tiling), got '" << e << "'");
    return static_cast<int64_t>(v);
  }();
  return rows;
}

struct RowTiles {
  int64_t size;  // rows per tile; the last tile may be shorter
  explicit RowTiles(int64_t T) {
    const int64_t r = tile_rows();
    size = r == 0 || r >= T ? T : r;
  }
};

// The elements of t from element `at` on, as a flat view (gemm reads only the data pointer).
Tensor from(const Tensor& t, int64_t at) { return t.view({t.numel()}).narrow(0, at, t.numel() - at); }

// One GEMM per head on sub-matrices: each operand's pointer is already at the block's first
// element; ld* is the full row-major matrix's column count; s* one head's matrix size.
GemmArgs blocks_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
                     int64_t sa, int64_t sb, int64_t sc, int64_t BH, double alpha) {
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
  return g;
}

}  // namespace

void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& probs,
                              const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), rows = BH * T, TT = T * T, TH = T * HS;
  if (rows == 0) return;
  // q, k, v, out (BH, T, HS); probs (BH, T, T).
  const RowTiles tiles(T);
  for (int64_t i0 = 0; i0 < T; i0 += tiles.size) {  // S[i0:i1, 0:i1] = scale q[i0:i1] k[0:i1]^T
    const int64_t n = std::min(tiles.size, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, true, n, i1, HS, HS, HS, T, TH, TH, TT, BH, scale), from(q, i0 * HS), k, from(probs, i0 * T));
  }
  LM_DISPATCH_FLOAT(q.dtype(), "causal_attention", {
    causal_softmax_kernel<scalar_t><<<row_blocks(rows), kRowThreads>>>(probs.data<scalar_t>(), T, rows);
    LM_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
  });
  for (int64_t i0 = 0; i0 < T; i0 += tiles.size) {  // out[i0:i1] = P[i0:i1, 0:i1] v[0:i1]
    const int64_t n = std::min(tiles.size, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, false, n, HS, i1, T, HS, HS, TT, TH, TH, BH, 1.0), from(probs, i0 * T), v, from(out, i0 * HS));
  }
}

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                               const Tensor& dout, double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), rows = BH * T, TT = T * T, TH = T * HS;
  if (rows == 0) return;
  // q, k, v, dout, dq, dk, dv (BH, T, HS); probs P (BH, T, T); dS scratch (BH, T, T).
  Tensor dS({BH, T, T}, q.dtype(), Device::CUDA);
  const RowTiles tiles(T);
  for (int64_t j0 = 0; j0 < T; j0 += tiles.size) {  // dv[j0:j1] = P[j0:T, j0:j1]^T dout[j0:T]
    const int64_t n = std::min(tiles.size, T - j0);
    gemm(blocks_gemm(true, false, n, HS, T - j0, T, HS, HS, TT, TH, TH, BH, 1.0), from(probs, j0 * T + j0),
         from(dout, j0 * HS), from(dv, j0 * HS));
  }
  for (int64_t i0 = 0; i0 < T; i0 += tiles.size) {  // dP[i0:i1, 0:i1] = dout[i0:i1] v[0:i1]^T
    const int64_t n = std::min(tiles.size, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, true, n, i1, HS, HS, HS, T, TH, TH, TT, BH, 1.0), from(dout, i0 * HS), v, from(dS, i0 * T));
  }
  LM_DISPATCH_FLOAT(q.dtype(), "causal_attention_backward", {
    causal_softmax_backward_kernel<scalar_t>
        <<<row_blocks(rows), kRowThreads>>>(probs.data<scalar_t>(), dS.data<scalar_t>(), T, rows);
    LM_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
  });
  for (int64_t i0 = 0; i0 < T; i0 += tiles.size) {  // dq[i0:i1] = scale dS[i0:i1, 0:i1] k[0:i1]
    const int64_t n = std::min(tiles.size, T - i0), i1 = i0 + n;
    gemm(blocks_gemm(false, false, n, HS, i1, T, HS, HS, TT, TH, TH, BH, scale), from(dS, i0 * T), k, from(dq, i0 * HS));
  }
  for (int64_t j0 = 0; j0 < T; j0 += tiles.size) {  // dk[j0:j1] = scale dS[j0:T, j0:j1]^T q[j0:T]
    const int64_t n = std::min(tiles.size, T - j0);
    gemm(blocks_gemm(true, false, n, HS, T - j0, T, HS, HS, TT, TH, TH, BH, scale), from(dS, j0 * T + j0),
         from(q, j0 * HS), from(dk, j0 * HS));
  }
}

}  // namespace cuda
}  // namespace lm
