// sparse/cuda/attention.cu: top-k landmark attention on CUDA, the plain version: one thread per
// (head, query row) runs the row functions of sparse/rows.h (the CPU kernel,
// sparse/cpu/attention.cpp, runs the same ones), with its scores and P' in a slice of a global
// scratch buffer. Rows go a tile at a time so the scratch stays small: a row needs the landmark
// scores of its earlier blocks and the scores of its own and chosen blocks, never T of anything.
// The backward adds into dk and dv with atomicAdd, so its sums are not in a fixed order (the
// last bits may differ between runs on a GPU; the CPU kernel's do not). No GEMMs and no shared
// memory: it is written to be read against the CPU kernel, not to be fast, and the GPU tests
// (tests/gpu/test_cuda_sparse.cpp) compare the two when a device is present.
#include <algorithm>
#include <vector>

#include "sparse/kernels.h"
#include "sparse/rows.h"
#include "tensor/cuda/common.cuh"
#include "tensor/dispatch.h"

namespace lm {
namespace cuda {

namespace {

constexpr int64_t kTileRows = 1 << 14;  // rows per launch (bounds the scratch)
constexpr int kThreadsPerBlock = 128;

struct SparseDeviceArgs {
  const int32_t *kind, *block_of, *block_start;
  int64_t T, NH, HS, top_k, stride;  // stride: scratch values per row
  bool all_gates;
  __device__ RowLayout of_head(int64_t h) const {
    const int64_t b = h / NH;
    return RowLayout{kind + b * T, block_of + b * T, block_start + b * (T + 1), -1, 0.0};
  }
};

// The scratch one row needs: the landmark scores of its earlier blocks (and their dS), its own
// block's scores and its chosen blocks' (and their G), and k values for the selection.
int64_t row_stride(const Tensor& block_start, int64_t T, int64_t top_k) {
  const std::vector<int32_t> bs = block_start.to(Device::CPU).to_vector<int32_t>();
  int64_t longest = 1, most_blocks = 0;
  for (size_t r = 0; r < bs.size() / static_cast<size_t>(T + 1); ++r) {
    const int32_t* s = bs.data() + r * (T + 1);
    for (int64_t g = 0; g < T && s[g] < T; ++g) {
      longest = std::max<int64_t>(longest, s[g + 1] - s[g]);
      most_blocks = g + 1;
    }
  }
  return 2 * most_blocks + 2 * (top_k + 1) * longest + top_k;
}

template <class Scalar>
__device__ void scores(const Scalar* x, const Scalar* keys, int64_t HS, int j0, int j1, Scalar scale, Scalar* y) {
  for (int j = j0; j < j1; ++j) {
    Scalar d = 0;
    for (int64_t e = 0; e < HS; ++e) d += x[e] * keys[j * HS + e];
    y[j - j0] = d * scale;
  }
}

// The landmark scores of row i's b earlier blocks into lm[0..b).
template <class Scalar>
__device__ void landmark_scores(const SparseDeviceArgs& a, const RowLayout& L, int b, const Scalar* qi, const Scalar* k,
                                Scalar scale, Scalar* lm) {
  for (int g = 0; g < b; ++g)
    scores(qi, k, a.HS, sparse::block_landmark(L, g), sparse::block_landmark(L, g) + 1, scale, lm + g);
}

// Row i's own and chosen scores and its P' (lm holds the landmark scores already). Returns M_i.
template <class Scalar>
__device__ Scalar row_probabilities(const SparseDeviceArgs& a, const RowLayout& L, const sparse::SparseRow& r,
                                    const Scalar* qi, const Scalar* k, Scalar scale, Scalar* lm, Scalar* own,
                                    Scalar* tok) {
  scores(qi, k, a.HS, r.own_begin, r.own_end, scale, own);
  int off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
    scores(qi, k, a.HS, j0, j1, scale, tok + off);
    off += j1 - j0;
  }
  return sparse::row_forward<Scalar>(L, r, a.all_gates, own, lm, tok, own, lm, tok);
}

template <class Scalar>
__global__ void forward_kernel(SparseDeviceArgs a, const Scalar* q, const Scalar* k, const Scalar* v, Scalar scale,
                               int32_t* chosen, Scalar* left_out, Scalar* out, Scalar* scratch, int64_t row0,
                               int64_t n) {
  LM_CUDA_FOR(t, n) {
    const int64_t row = row0 + t, h = row / a.T;
    const int i = static_cast<int>(row % a.T);
    const RowLayout L = a.of_head(h);
    const Scalar *qh = q + h * a.T * a.HS, *kh = k + h * a.T * a.HS, *vh = v + h * a.T * a.HS;
    Scalar* lm = scratch + t * a.stride;     // the b landmark scores, then own, then chosen tokens
    Scalar* best = lm + a.stride - a.top_k;  // the selection's k values, at the slice's end
    const int b = L.block_of[i];
    Scalar* own = lm + b;
    int32_t* ch = chosen + row * a.top_k;
    landmark_scores(a, L, b, qh + i * a.HS, kh, scale, lm);
    const int nc = sparse::select_top_k<Scalar>(lm, b, static_cast<int>(a.top_k), ch, best);
    for (int64_t c = nc; c < a.top_k; ++c) ch[c] = -1;
    const sparse::SparseRow r = sparse::sparse_row(L, i, ch, nc);
    Scalar* tok = own + (r.own_end - r.own_begin);
    const Scalar m = row_probabilities(a, L, r, qh + i * a.HS, kh, scale, lm, own, tok);
    if (left_out) left_out[row] = m;
    Scalar* oi = out + row * a.HS;
    for (int64_t e = 0; e < a.HS; ++e) {
      Scalar acc = 0;
      for (int j = r.own_begin; j < r.own_end; ++j) acc += own[j - r.own_begin] * vh[j * a.HS + e];
      int off = 0;
      for (int c = 0; c < nc; ++c) {
        const int g = ch[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
        for (int j = j0; j < j1; ++j) acc += lm[g] * tok[off + j - j0] * vh[j * a.HS + e];
        off += j1 - j0;
      }
      oi[e] = acc;
    }
  }
}

template <class Scalar>
__device__ void add_scaled(Scalar* dst, const Scalar* x, Scalar c, int64_t HS) {
  for (int64_t e = 0; e < HS; ++e) atomicAdd(dst + e, c * x[e]);
}

template <class Scalar>
__global__ void backward_kernel(SparseDeviceArgs a, const Scalar* q, const Scalar* k, const Scalar* v,
                                const int32_t* chosen, const Scalar* dout, Scalar scale, Scalar* dq, Scalar* dk,
                                Scalar* dv, Scalar* scratch, int64_t row0, int64_t n) {
  LM_CUDA_FOR(t, n) {
    const int64_t row = row0 + t, h = row / a.T, base = h * a.T * a.HS;
    const int i = static_cast<int>(row % a.T);
    const RowLayout L = a.of_head(h);
    const Scalar *qi = q + row * a.HS, *kh = k + base, *vh = v + base, *doi = dout + row * a.HS;
    const int32_t* ch = chosen + row * a.top_k;
    int nc = 0;
    while (nc < a.top_k && ch[nc] >= 0) ++nc;
    const sparse::SparseRow r = sparse::sparse_row(L, i, ch, nc);
    const int n_own = r.own_end - r.own_begin;
    int n_tok = 0;
    for (int c = 0; c < nc; ++c) n_tok += sparse::block_landmark(L, ch[c]) - sparse::block_first(L, ch[c]);
    Scalar* lm = scratch + t * a.stride;
    Scalar* ds_lm = lm + r.b;
    Scalar* own = ds_lm + r.b;
    Scalar* tok = own + n_own;
    Scalar* g_own = tok + n_tok;
    Scalar* g_tok = g_own + n_own;
    landmark_scores(a, L, r.b, qi, kh, scale, lm);
    row_probabilities(a, L, r, qi, kh, scale, lm, own, tok);
    scores(doi, vh, a.HS, r.own_begin, r.own_end, Scalar(1), g_own);
    int off = 0;
    for (int c = 0; c < nc; ++c) {
      const int g = ch[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
      scores(doi, vh, a.HS, j0, j1, Scalar(1), g_tok + off);
      for (int j = j0; j < j1; ++j) add_scaled(dv + base + j * a.HS, doi, lm[g] * tok[off + j - j0], a.HS);
      off += j1 - j0;
    }
    for (int j = r.own_begin; j < r.own_end; ++j) add_scaled(dv + base + j * a.HS, doi, own[j - r.own_begin], a.HS);
    sparse::row_backward<Scalar>(L, r, a.all_gates, own, lm, tok, g_own, g_tok, g_own, ds_lm, g_tok);
    Scalar* dqi = dq + row * a.HS;
    for (int64_t e = 0; e < a.HS; ++e) dqi[e] = 0;
    auto take = [&](int j, Scalar ds) {  // dq_i += scale ds k_j, dk_j += scale ds q_i
      for (int64_t e = 0; e < a.HS; ++e) dqi[e] += scale * ds * kh[j * a.HS + e];
      add_scaled(dk + base + j * a.HS, qi, scale * ds, a.HS);
    };
    for (int j = r.own_begin; j < r.own_end; ++j) take(j, g_own[j - r.own_begin]);
    off = 0;
    for (int c = 0; c < nc; ++c) {
      const int g = ch[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
      for (int j = j0; j < j1; ++j) take(j, g_tok[off + j - j0]);
      off += j1 - j0;
    }
    for (int g = 0; g < r.b; ++g)
      if (ds_lm[g] != Scalar(0)) take(sparse::block_landmark(L, g), ds_lm[g]);
  }
}

SparseDeviceArgs device_args(const Tensor& q, const Tensor& kind, const Tensor& block_of, const Tensor& block_start,
                             int64_t top_k, bool all_gates) {
  const int64_t BH = q.size(0), T = q.size(1), B = kind.size(0);
  LM_CHECK(kind.device() == Device::CUDA && block_of.device() == Device::CUDA && block_start.device() == Device::CUDA,
           "sparse_landmark_attention on cuda: the layout tensors must live on cuda (make_layout(kinds, "
           "Device::CUDA)); kind "
               << describe(kind));
  LM_CHECK(B > 0 && BH % B == 0 && kind.size(1) == T,
           "sparse_landmark_attention on cuda: " << BH << " heads of length " << T << " do not match the layout "
                                                 << describe(kind));
  return SparseDeviceArgs{kind.data<int32_t>(),
                          block_of.data<int32_t>(),
                          block_start.data<int32_t>(),
                          T,
                          BH / B,
                          q.size(2),
                          top_k,
                          row_stride(block_start, T, top_k),
                          all_gates};
}

}  // namespace

void sparse_landmark_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                             const Tensor& block_of, const Tensor& block_start, int64_t top_k, bool all_gates,
                             double scale, const Tensor& chosen, const Tensor& left_out, const Tensor& out) {
  const SparseDeviceArgs a = device_args(q, kind, block_of, block_start, top_k, all_gates);
  const int64_t rows = q.size(0) * q.size(1), tile = std::min(rows, kTileRows);
  Tensor scratch({tile * a.stride}, q.dtype(), Device::CUDA);
  LM_DISPATCH_FLOAT(q.dtype(), "sparse_landmark_attention (cuda)", {
    for (int64_t r0 = 0; r0 < rows; r0 += tile) {
      const int64_t n = std::min(tile, rows - r0);
      forward_kernel<scalar_t><<<blocks_for(n, kThreadsPerBlock), kThreadsPerBlock>>>(
          a, q.data<scalar_t>(), k.data<scalar_t>(), v.data<scalar_t>(), static_cast<scalar_t>(scale),
          chosen.data<int32_t>(), left_out.defined() ? left_out.data<scalar_t>() : nullptr, out.data<scalar_t>(),
          scratch.data<scalar_t>(), r0, n);
      LM_CUDA_CHECK_LAUNCH("sparse forward_kernel");
    }
  });
}

void sparse_landmark_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                              const Tensor& block_of, const Tensor& block_start, int64_t top_k, bool all_gates,
                              const Tensor& chosen, const Tensor& dout, double scale, const Tensor& dq,
                              const Tensor& dk, const Tensor& dv) {
  const SparseDeviceArgs a = device_args(q, kind, block_of, block_start, top_k, all_gates);
  const int64_t rows = q.size(0) * q.size(1), tile = std::min(rows, kTileRows);
  Tensor scratch({tile * a.stride}, q.dtype(), Device::CUDA);
  LM_CUDA_CHECK(cudaMemset(dk.raw_data(), 0, dk.numel() * dtype_size(dk.dtype())));
  LM_CUDA_CHECK(cudaMemset(dv.raw_data(), 0, dv.numel() * dtype_size(dv.dtype())));
  LM_DISPATCH_FLOAT(q.dtype(), "sparse_landmark_attention_backward (cuda)", {
    for (int64_t r0 = 0; r0 < rows; r0 += tile) {
      const int64_t n = std::min(tile, rows - r0);
      backward_kernel<scalar_t><<<blocks_for(n, kThreadsPerBlock), kThreadsPerBlock>>>(
          a, q.data<scalar_t>(), k.data<scalar_t>(), v.data<scalar_t>(), chosen.data<int32_t>(), dout.data<scalar_t>(),
          static_cast<scalar_t>(scale), dq.data<scalar_t>(), dk.data<scalar_t>(), dv.data<scalar_t>(),
          scratch.data<scalar_t>(), r0, n);
      LM_CUDA_CHECK_LAUNCH("sparse backward_kernel");
    }
  });
}

}  // namespace cuda
}  // namespace lm
