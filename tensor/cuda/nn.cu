// cuda/nn.cu: fused layer norm (forward + backward) and cross-entropy (forward + backward) on
// CUDA. Row work gets one block per row (block reductions in a fixed order); the parameter
// gradients of layer norm are column sums in two passes of fixed order (row chunks, then the
// chunks' sums, in f64): no atomics, same bits every run. The closed forms are derived in
// tensor/cpu/nn.cpp (the twin); the composed references they are tested against live in tests/.
#include <cmath>

#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

// x (rows, C) -> out (rows, C), mean (rows), rstd (rows). Two passes in f64 like the CPU:
// stable even when |mean| >> std.
template <class Scalar>
__global__ void layernorm_kernel(const Scalar* x, const Scalar* w, const Scalar* b, double eps, Scalar* out,
                                 Scalar* mean, Scalar* rstd, int64_t rows, int64_t C) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Scalar* xr = x + r * C;
    double s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += static_cast<double>(xr[c]);
    const double m = block_allreduce(s, SumOp{}) / static_cast<double>(C);
    double v = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double d = static_cast<double>(xr[c]) - m;
      v += d * d;
    }
    v = block_allreduce(v, SumOp{}) / static_cast<double>(C);
    const Scalar mu = static_cast<Scalar>(m), rs = static_cast<Scalar>(1.0 / std::sqrt(v + eps));
    Scalar* yr = out + r * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = (xr[c] - mu) * rs * w[c] + b[c];
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// With xhat = (x - mean) * rstd and gx = gout * w (per row):
//   dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)).   One block per row.
template <class Scalar>
__global__ void layernorm_dx_kernel(const Scalar* g, const Scalar* x, const Scalar* w, const Scalar* mean,
                                    const Scalar* rstd, Scalar* dx, int64_t rows, int64_t C) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Scalar* xr = x + r * C;
    const Scalar* gr = g + r * C;
    const Scalar mu = mean[r], rs = rstd[r];
    Scalar sum_g = 0, sum_gx = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const Scalar gx = gr[c] * w[c];
      sum_g += gx;
      sum_gx += gx * (xr[c] - mu) * rs;
    }
    sum_g = block_allreduce(sum_g, SumOp{});
    sum_gx = block_allreduce(sum_gx, SumOp{});
    const Scalar mg = sum_g / static_cast<Scalar>(C), mgx = sum_gx / static_cast<Scalar>(C);
    Scalar* dr = dx + r * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dr[c] = rs * (gr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
  }
}

// dw (C) = sum_rows gout * xhat, db (C) = sum_rows gout, in two passes with a fixed order (no
// atomics, the same bits every run). One thread per column over all rows had only C threads
// working: 29 ms of a 124M-shaped training step's 138 on an H200 (rows 4096, C 768). Now:
//   1. chunk j's thread for column c sums rows [j R, (j + 1) R) in order, in f64, into
//      partial[j][c] (threads of a warp read adjacent columns of one row: coalesced);
//   2. thread c adds partial[0][c], partial[1][c], ... in order, in f64, and rounds once.
// The CPU sums each column in row order in the input dtype; this sum is closer to exact, so the
// two differ by the CPU's own rounding error (test_cuda_layers.cpp states the tolerance).
template <class Scalar>
__global__ void layernorm_dwdb_partial_kernel(const Scalar* g, const Scalar* x, const Scalar* mean, const Scalar* rstd,
                                              double* pw, double* pb, int64_t rows, int64_t C, int64_t R) {
  const int64_t j = blockIdx.y, r0 = j * R, r1 = r0 + R < rows ? r0 + R : rows;
  LM_CUDA_FOR(c, C) {  // blockIdx.x and gridDim.x: the columns; blockIdx.y: the chunk
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const double gv = static_cast<double>(g[r * C + c]);
      sw += gv * (static_cast<double>(x[r * C + c]) - static_cast<double>(mean[r])) * static_cast<double>(rstd[r]);
      sb += gv;
    }
    pw[j * C + c] = sw;
    pb[j * C + c] = sb;
  }
}

template <class Scalar>
__global__ void layernorm_dwdb_total_kernel(const double* pw, const double* pb, Scalar* dw, Scalar* db, int64_t chunks,
                                            int64_t C) {
  LM_CUDA_FOR(c, C) {
    double sw = 0, sb = 0;
    for (int64_t j = 0; j < chunks; ++j) {
      sw += pw[j * C + c];
      sb += pb[j * C + c];
    }
    dw[c] = static_cast<Scalar>(sw);
    db[c] = static_cast<Scalar>(sb);
  }
}

// Row max and sum of exp(l - max) of a logits row, shared by the loss and its gradient. The
// max starts at -inf and skips NaN (a NaN still makes the sum, hence the result, NaN, as on the
// CPU). When `e` is given, exp(l - max) is also stored there for the caller to reuse.
template <class Scalar>
__device__ void row_max_sumexp(const Scalar* lr, int64_t V, Scalar* e, Scalar& m, Scalar& s) {
  m = -static_cast<Scalar>(INFINITY);
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) m = MaxOp{}(m, lr[v]);
  m = block_allreduce(m, MaxOp{});
  s = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const Scalar ev = std::exp(lr[v] - m);
    if (e != nullptr) e[v] = ev;
    s += ev;
  }
  s = block_allreduce(s, SumOp{});
}

// logits (N, V), targets (N) -> losses (N) = logsumexp(row) - row[target]; 0 on ignored rows.
// The block's branch on the target is uniform, so skipping a row skips its barriers together.
// stats (N, 2), when not null, receives each row's m and s (0 and 1 on ignored rows).
template <class Scalar>
__global__ void cross_entropy_kernel(const Scalar* logits, const int32_t* t, int64_t ignore_index, Scalar* losses,
                                     Scalar* stats, int64_t N, int64_t V) {
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t target = t[r];
    if (target == ignore_index) {
      if (threadIdx.x == 0) {
        losses[r] = Scalar(0);
        if (stats != nullptr) stats[2 * r] = Scalar(0), stats[2 * r + 1] = Scalar(1);
      }
      continue;
    }
    const Scalar* lr = logits + r * V;
    Scalar m, s;
    row_max_sumexp<Scalar>(lr, V, nullptr, m, s);
    if (threadIdx.x == 0) {
      losses[r] = m + std::log(s) - lr[target];
      if (stats != nullptr) stats[2 * r] = m, stats[2 * r + 1] = s;
    }
  }
}

// dlogits (N, V) = scale * (softmax(row) - onehot(target)); 0 on ignored rows.
// With stats (the forward's m and s per row) the row is one pass: read a logit, write its
// gradient. The same numbers: exp(l - m) rounded, then times scale / s, as below.
template <class Scalar>
__global__ void cross_entropy_backward_kernel(const Scalar* logits, const int32_t* t, int64_t ignore_index,
                                              Scalar scale, const Scalar* stats, Scalar* d, int64_t N, int64_t V) {
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t target = t[r];
    Scalar* dr = d + r * V;
    if (target == ignore_index) {
      for (int64_t v = threadIdx.x; v < V; v += blockDim.x) dr[v] = Scalar(0);
      continue;
    }
    if (stats != nullptr) {
      const Scalar* lr = logits + r * V;
      const Scalar m = stats[2 * r], inv = scale / stats[2 * r + 1];
      for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
        const Scalar p = std::exp(lr[v] - m) * inv;
        dr[v] = v == target ? p - scale : p;
      }
      continue;
    }
    Scalar m, s;
    row_max_sumexp<Scalar>(logits + r * V, V, dr, m, s);
    const Scalar inv = scale / s;
    // Each thread rescales only the entries it stored itself in row_max_sumexp.
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
      const Scalar p = dr[v] * inv;
      dr[v] = v == target ? p - scale : p;
    }
  }
}

}  // namespace

void layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& out, const Tensor& mean,
               const Tensor& rstd) {
  const int64_t C = x.size(-1), rows = C == 0 ? 0 : x.numel() / C;
  if (rows == 0) return;
  LM_DISPATCH_FLOAT(x.dtype(), "layernorm", {
    layernorm_kernel<scalar_t><<<row_blocks(rows), kRowThreads>>>(
        x.data<scalar_t>(), w.data<scalar_t>(), b.data<scalar_t>(), eps, out.data<scalar_t>(), mean.data<scalar_t>(),
        rstd.data<scalar_t>(), rows, C);
    LM_CUDA_CHECK_LAUNCH("layernorm_kernel");
  });
}

void layernorm_backward(const Tensor& gout, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const int64_t C = x.size(-1), rows = C == 0 ? 0 : x.numel() / C;
  if (C == 0) return;
  LM_DISPATCH_FLOAT(x.dtype(), "layernorm_backward", {
    if (rows > 0) {
      layernorm_dx_kernel<scalar_t><<<row_blocks(rows), kRowThreads>>>(
          gout.data<scalar_t>(), x.data<scalar_t>(), w.data<scalar_t>(), mean.data<scalar_t>(), rstd.data<scalar_t>(),
          dx.data<scalar_t>(), rows, C);
      LM_CUDA_CHECK_LAUNCH("layernorm_dx_kernel");
    }
    // Chunks of at least 64 rows, at most 256 chunks: the partial sums stay small (256 C f64s each).
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(256, (rows + 63) / 64));
    const int64_t R = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
    Tensor partial({2, chunks, C}, DType::F64, Device::CUDA);
    double* pw = partial.data<double>();
    double* pb = pw + chunks * C;
    const dim3 grid(blocks_for(C), static_cast<unsigned>(chunks));
    layernorm_dwdb_partial_kernel<scalar_t><<<grid, kThreads>>>(
        gout.data<scalar_t>(), x.data<scalar_t>(), mean.data<scalar_t>(), rstd.data<scalar_t>(), pw, pb, rows, C, R);
    LM_CUDA_CHECK_LAUNCH("layernorm_dwdb_partial_kernel");
    layernorm_dwdb_total_kernel<scalar_t>
        <<<blocks_for(C), kThreads>>>(pw, pb, dw.data<scalar_t>(), db.data<scalar_t>(), chunks, C);
    LM_CUDA_CHECK_LAUNCH("layernorm_dwdb_total_kernel");
  });
}

int64_t cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& losses,
                      const Tensor& stats) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const int32_t* t = targets.data<int32_t>();
  // Validate every target first: a bad one would read outside its logits row.
  const int64_t bad = first_bad_index(t, N, V, true, ignore_index);
  if (bad >= 0 || N == 0) return bad;
  LM_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", {
    cross_entropy_kernel<scalar_t>
        <<<row_blocks(N), kRowThreads>>>(logits.data<scalar_t>(), t, ignore_index, losses.data<scalar_t>(),
                                         stats.defined() ? stats.data<scalar_t>() : nullptr, N, V);
    LM_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
  });
  return -1;
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double scale,
                            const Tensor& stats, const Tensor& dlogits) {
  const int64_t N = logits.size(0), V = logits.size(1);
  if (N == 0 || V == 0) return;
  const int32_t* t = targets.data<int32_t>();
  // The CPU twin trusts targets the forward has checked; a device fault would poison the whole
  // context, so an out-of-range target is reported here instead.
  const int64_t bad = first_bad_index(t, N, V, true, ignore_index);
  LM_CHECK(bad < 0, "cross_entropy_backward on cuda: the target in row "
                        << bad << " is out of range [0, " << V << ") and is not the ignore index " << ignore_index);
  LM_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward", {
    cross_entropy_backward_kernel<scalar_t><<<row_blocks(N), kRowThreads>>>(
        logits.data<scalar_t>(), t, ignore_index, static_cast<scalar_t>(scale),
        stats.defined() ? stats.data<scalar_t>() : nullptr, dlogits.data<scalar_t>(), N, V);
    LM_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

}  // namespace cuda
}  // namespace lm
