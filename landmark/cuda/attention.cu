// landmark/cuda/attention.cu: fused landmark attention on CUDA. The products (the scores, W v and
// the four of the backward) are strided-batched cuBLAS GEMMs over all heads at once, through
// lm::cuda::gemm; between them a warp per query row runs the grouped softmax of
// grouped_softmax.h (the CPU twin, landmark/cpu/attention.cpp, runs gsm::row_forward and
// gsm::row_backward on the same layouts; the GPU tests compare the two).
//
// The queries are taken a tile of rows at a time (tensor/cuda/attention_tiles.h): the tile
// [i0, i1) needs the keys [0, i1) only, and its scores, weights and gradients live in scratch
// matrices of (BH, tile, T), never (BH, T, T). Nothing T x T is kept between the forward and the
// backward either: the backward computes each tile's scores and weights again from q and k. P'
// is written out only when the caller asks for it (attention maps, the CMT drop count). Not
// flash attention: a tile's rows still go through global memory between the GEMMs.
#include <algorithm>

#include "landmark/grouped_softmax.h"
#include "landmark/kernels.h"
#include "tensor/cuda/attention_tiles.h"
#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"

namespace lm {
namespace cuda {

namespace {

// The layout tensors (landmark/layout.h) on the device, passed to kernels by value. Head h
// belongs to batch row h / NH, whose RowLayout the row kernels read.
struct DeviceLayout {
  const int32_t* kind;         // (B, T)
  const int32_t* block_of;     // (B, T)
  const int32_t* block_start;  // (B, T + 1)
  const int32_t* cmt;          // (B)
  int64_t T, NH;
  double cmt_cutoff = 0;  // evaluation-time CMT cutoff (forward only)

  __device__ RowLayout of_head(int64_t h) const {
    const int64_t b = h / NH;
    return RowLayout{kind + b * T, block_of + b * T, block_start + b * (T + 1), cmt[b], cmt_cutoff};
  }
};

DeviceLayout device_layout(const Tensor& kind, const Tensor& block_of, const Tensor& block_start, const Tensor& cmt,
                           int64_t BH, int64_t T) {
  const int64_t B = kind.size(0);
  LM_CHECK(kind.device() == Device::CUDA && block_of.device() == Device::CUDA && block_start.device() == Device::CUDA &&
               cmt.device() == Device::CUDA,
           "landmark_attention on cuda: the layout tensors must live on cuda (make_layout(kinds, Device::CUDA)); kind "
               << describe(kind) << ", block_of " << describe(block_of) << ", block_start " << describe(block_start)
               << ", cmt " << describe(cmt));
  LM_CHECK(B > 0 && BH % B == 0 && kind.size(1) == T,
           "landmark_attention on cuda: " << BH << " heads of length " << T << " do not match the layout "
                                          << describe(kind) << " (B, T): the heads must split evenly over B");
  return DeviceLayout{
      kind.data<int32_t>(), block_of.data<int32_t>(), block_start.data<int32_t>(), cmt.data<int32_t>(), T, BH / B, 0.0};
}

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

// Butterfly reductions: every lane ends with the same bits (a + b == b + a exactly), and the
// order is fixed, so a run repeats itself.
template <class Scalar>
__device__ Scalar warp_max(Scalar v) {
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const Scalar u = __shfl_xor_sync(kFullMask, v, o);
    v = u > v ? u : v;
  }
  return v;
}
template <class Scalar>
__device__ Scalar warp_sum(Scalar v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// The top group's statistics, shared by both row kernels: the maxima of the top group (own
// tokens, free landmarks, CMT) and of the controlled group (landmarks under the CMT), the
// exponentials of the own block [own_begin, own_end) and of every earlier block's landmark,
// written over their scores in s by the lane that reads them, and the two normalisers as
// reciprocals. e_cmt, the CMT's exponential, is held by lane 0 (0 in other lanes). Every lane
// ends with the same m, z and zc (warp reductions), so with the same inv_top and inv_ctrl.
template <class Scalar>
struct TopGroup {
  Scalar e_cmt, inv_top, inv_ctrl;
};
template <class Scalar>
__device__ TopGroup<Scalar> top_group(const RowLayout& L, int b, int own_begin, int own_end, Scalar* s, int lane) {
  Scalar m = gsm::neg_inf<Scalar>(), mc = gsm::neg_inf<Scalar>();
  for (int j = own_begin + lane; j < own_end; j += kWarp) m = s[j] > m ? s[j] : m;
  for (int g = lane; g < b; g += kWarp) {
    const int lmk = L.block_start[g + 1] - 1;
    if (L.kind[lmk] == kLandmark)
      m = s[lmk] > m ? s[lmk] : m;
    else
      mc = s[lmk] > mc ? s[lmk] : mc;
  }
  if (L.cmt >= 0 && lane == 0) m = s[L.cmt] > m ? s[L.cmt] : m;
  m = warp_max(m);
  mc = warp_max(mc);
  Scalar z = 0, zc = 0, e_cmt = 0;
  for (int j = own_begin + lane; j < own_end; j += kWarp) {
    s[j] = math::exp_softmax(s[j] - m);
    z += s[j];
  }
  for (int g = lane; g < b; g += kWarp) {
    const int lmk = L.block_start[g + 1] - 1;
    if (L.kind[lmk] == kLandmark) {
      s[lmk] = math::exp_softmax(s[lmk] - m);
      z += s[lmk];
    } else {
      s[lmk] = math::exp_softmax(s[lmk] - mc);
      zc += s[lmk];
    }
  }
  if (L.cmt >= 0 && lane == 0) {
    e_cmt = math::exp_softmax(s[L.cmt] - m);
    z += e_cmt;
  }
  z = warp_sum(z);
  zc = warp_sum(zc);
  return TopGroup<Scalar>{e_cmt, Scalar(1) / z, zc > Scalar(0) ? Scalar(1) / zc : Scalar(0)};
}

// gsm::row_forward (grouped_softmax.h) spelled for a warp: the 32 lanes share each pass over a
// group, so every load and store of a row is coalesced, and the group maxima and sums are warp
// reductions (a tree, where the CPU sums in order: the results differ in the last bits). Same
// groups, same exp (math::exp_softmax), same P' and weights. s is the row of scores (in); w gets
// the weights, zero in (i, ncols) (the GEMM after this reads a tile's full width). With kKeepP, s
// gets P' in place, zero in (i, ncols), for the attention maps; without it, s is scratch (its
// regular entries are left as exponentials: the forward needs only W, and one write of the row
// less). Each element is read and then written by one lane, except the landmark and CMT entries,
// which one lane rewrites after a __syncwarp.
template <class Scalar, bool kKeepP>
__device__ void warp_row_forward(const RowLayout& L, int i, Scalar* s, Scalar* w, int ncols, int lane) {
  if (L.kind[i] == kContextMiss) {
    for (int j = lane; j < ncols; j += kWarp) {
      w[j] = Scalar(0);
      if (kKeepP) s[j] = Scalar(0);
    }
    return;
  }
  const int b = L.block_of[i];
  const int own_begin = L.block_start[b];
  const int own_end = L.kind[i] == kRegular ? i + 1 : i;  // i's own landmark is excluded
  // The top group's maxima, exponentials and normalisers (top_group).
  const TopGroup<Scalar> top = top_group(L, b, own_begin, own_end, s, lane);
  const Scalar e_cmt = top.e_cmt, inv_top = top.inv_top, inv_ctrl = top.inv_ctrl;
  for (int j = own_begin + lane; j < own_end; j += kWarp) {
    const Scalar p = s[j] * inv_top;
    w[j] = p;
    if (kKeepP) s[j] = p;
  }
  if (own_end == i && lane == 0) s[i] = w[i] = Scalar(0);
  Scalar p_cmt = 0;
  if (L.cmt >= 0) {
    p_cmt = __shfl_sync(kFullMask, e_cmt, 0) * inv_top;  // every lane, the same value
    if (lane == 0) {
      s[L.cmt] = p_cmt;
      w[L.cmt] = Scalar(0);
    }
    if (gsm::cmt_dropped(p_cmt, L.cmt_cutoff)) p_cmt = Scalar(0);  // the cutoff: P' keeps the true value
  }
  __syncwarp();  // the landmarks' exponentials, written by their lanes, are read by all below
  // Each earlier block: its own softmax over its regular tokens, gated by its landmark.
  for (int g = 0; g < b; ++g) {
    const int begin = L.block_start[g], lmk = L.block_start[g + 1] - 1;
    const bool free_lmk = L.kind[lmk] == kLandmark;
    const Scalar p_lmk = s[lmk] * (free_lmk ? inv_top : inv_ctrl);
    const Scalar gate = free_lmk ? p_lmk : p_cmt * p_lmk;
    __syncwarp();  // every lane has read s[lmk] before lane 0 rewrites it
    if (lane == 0) {
      s[lmk] = p_lmk;
      w[lmk] = Scalar(0);
    }
    Scalar mg = gsm::neg_inf<Scalar>(), zg = 0;
    if (lmk - begin <= 2 * kWarp) {
      // A group of at most 64 tokens (F = 50 in training) stays in two registers per lane: one
      // read of its scores instead of three. The same operations in the same order as the loop
      // below, so the same bits.
      const int j0 = begin + lane, j1 = begin + kWarp + lane;
      const bool has0 = j0 < lmk, has1 = j1 < lmk;
      Scalar x0 = has0 ? s[j0] : Scalar(0), x1 = has1 ? s[j1] : Scalar(0);
      if (has0) mg = x0 > mg ? x0 : mg;
      if (has1) mg = x1 > mg ? x1 : mg;
      mg = warp_max(mg);
      if (has0) {
        x0 = math::exp_softmax(x0 - mg);
        zg += x0;
      }
      if (has1) {
        x1 = math::exp_softmax(x1 - mg);
        zg += x1;
      }
      zg = warp_sum(zg);
      const Scalar inv = Scalar(1) / zg, gate_inv = gate * inv;
      if (has0) {
        w[j0] = x0 * gate_inv;
        if (kKeepP) s[j0] = x0 * inv;
      }
      if (has1) {
        w[j1] = x1 * gate_inv;
        if (kKeepP) s[j1] = x1 * inv;
      }
      continue;
    }
    for (int j = begin + lane; j < lmk; j += kWarp) mg = s[j] > mg ? s[j] : mg;
    mg = warp_max(mg);
    for (int j = begin + lane; j < lmk; j += kWarp) {
      s[j] = math::exp_softmax(s[j] - mg);
      zg += s[j];
    }
    zg = warp_sum(zg);
    const Scalar inv = Scalar(1) / zg, gate_inv = gate * inv;
    for (int j = begin + lane; j < lmk; j += kWarp) {
      w[j] = s[j] * gate_inv;
      if (kKeepP) s[j] *= inv;
    }
  }
  for (int j = i + 1 + lane; j < ncols; j += kWarp) {
    w[j] = Scalar(0);
    if (kKeepP) s[j] = Scalar(0);
  }
}

// The backward's row step: gsm::row_forward and gsm::row_backward of row i in one pass over
// the row. On entry s holds the scores and d holds G = dL/dW; on exit w holds the weights (for
// dv = W^T dout) and d holds dS, both zero in (i, ncols); s is scratch. The forward's maxima and
// normalisers of the top group come first (a read of the own block and the landmarks only).
// Then each earlier block is done whole while its scores are in registers: its softmax p, its
// weights w = gate p, a = sum p G, and dS = w (G - a) there; delta = sum_j w_j G_j gathers along
// the way. What needs delta (the landmarks' and the CMT's dS, the own block's) is finished after
// the last block, from a and P'(landmark) parked in d[lmk] and s[lmk]. Reads of a row: s and G
// once each (plus the own block and landmarks again); writes: w and d once each. Run separately,
// the forward and backward read and wrote the row about nine times. Same formulas as the two
// gsm functions; the sums are warp trees, in a fixed order (delta gathers per lane, then the
// tree), so a run repeats itself; against the CPU's in-order sums they differ in the last bits.
template <class Scalar>
__device__ void warp_row_forward_backward(const RowLayout& L, int i, Scalar* s, Scalar* w, Scalar* d, int ncols,
                                          int lane) {
  if (L.kind[i] == kContextMiss) {
    for (int j = lane; j < ncols; j += kWarp) w[j] = d[j] = Scalar(0);
    return;
  }
  const int b = L.block_of[i];
  const int own_begin = L.block_start[b];
  const int own_end = L.kind[i] == kRegular ? i + 1 : i;  // i's own landmark is excluded
  // --- the forward's top-group statistics (top_group, as in warp_row_forward) ---
  const TopGroup<Scalar> top = top_group(L, b, own_begin, own_end, s, lane);
  const Scalar e_cmt = top.e_cmt, inv_top = top.inv_top, inv_ctrl = top.inv_ctrl;
  // The own block: P' = w = e / z; G is read here for delta (dS needs delta: last step).
  Scalar delta = 0;
  for (int j = own_begin + lane; j < own_end; j += kWarp) {
    const Scalar p = s[j] * inv_top;
    s[j] = w[j] = p;
    delta += p * d[j];
  }
  if (own_end == i && lane == 0) s[i] = w[i] = Scalar(0);
  Scalar p_cmt = 0, gate_cmt = 0;  // P'(CMT), and the same after the evaluation cutoff
  if (L.cmt >= 0) {
    p_cmt = gate_cmt = __shfl_sync(kFullMask, e_cmt, 0) * inv_top;
    if (lane == 0) w[L.cmt] = Scalar(0);
    if (gsm::cmt_dropped(p_cmt, L.cmt_cutoff)) gate_cmt = Scalar(0);
  }
  __syncwarp();  // the landmarks' exponentials, written by their lanes, are read by all below
  // --- each earlier block, forward and backward at once ---
  Scalar a_cmt = 0;
  for (int g = 0; g < b; ++g) {
    const int begin = L.block_start[g], lmk = L.block_start[g + 1] - 1;
    const bool free_lmk = L.kind[lmk] == kLandmark;
    const Scalar p_lmk = s[lmk] * (free_lmk ? inv_top : inv_ctrl);
    const Scalar gate = free_lmk ? p_lmk : gate_cmt * p_lmk;
    Scalar a = 0;
    if (lmk - begin <= 2 * kWarp) {  // F = 50 in training: the block stays in two registers per lane
      const int j0 = begin + lane, j1 = begin + kWarp + lane;
      const bool has0 = j0 < lmk, has1 = j1 < lmk;
      Scalar x0 = has0 ? s[j0] : Scalar(0), x1 = has1 ? s[j1] : Scalar(0);
      const Scalar g0 = has0 ? d[j0] : Scalar(0), g1 = has1 ? d[j1] : Scalar(0);
      Scalar mg = gsm::neg_inf<Scalar>(), zg = 0;
      if (has0) mg = x0 > mg ? x0 : mg;
      if (has1) mg = x1 > mg ? x1 : mg;
      mg = warp_max(mg);
      if (has0) {
        x0 = math::exp_softmax(x0 - mg);
        zg += x0;
      }
      if (has1) {
        x1 = math::exp_softmax(x1 - mg);
        zg += x1;
      }
      zg = warp_sum(zg);
      const Scalar inv = Scalar(1) / zg, gate_inv = gate * inv;
      const Scalar w0 = x0 * gate_inv, w1 = x1 * gate_inv;
      if (has0) {
        a += x0 * inv * g0;
        delta += w0 * g0;
      }
      if (has1) {
        a += x1 * inv * g1;
        delta += w1 * g1;
      }
      a = warp_sum(a);
      if (has0) {
        w[j0] = w0;
        d[j0] = w0 * (g0 - a);
      }
      if (has1) {
        w[j1] = w1;
        d[j1] = w1 * (g1 - a);
      }
    } else {  // a longer block: the same steps in passes over memory
      Scalar mg = gsm::neg_inf<Scalar>(), zg = 0;
      for (int j = begin + lane; j < lmk; j += kWarp) mg = s[j] > mg ? s[j] : mg;
      mg = warp_max(mg);
      for (int j = begin + lane; j < lmk; j += kWarp) {
        s[j] = math::exp_softmax(s[j] - mg);
        zg += s[j];
      }
      zg = warp_sum(zg);
      const Scalar inv = Scalar(1) / zg, gate_inv = gate * inv;
      for (int j = begin + lane; j < lmk; j += kWarp) {
        const Scalar gj = d[j], wj = s[j] * gate_inv;
        a += s[j] * inv * gj;
        delta += wj * gj;
        w[j] = wj;
      }
      a = warp_sum(a);
      for (int j = begin + lane; j < lmk; j += kWarp) d[j] = w[j] * (d[j] - a);
    }
    if (!free_lmk) a_cmt += p_lmk * a;  // every lane: the same values in the same order
    __syncwarp();                       // every lane has read s[lmk] before lane 0 rewrites it
    if (lane == 0) {
      s[lmk] = p_lmk;  // parked for the last step, with a
      d[lmk] = a;
      w[lmk] = Scalar(0);
    }
  }
  delta = warp_sum(delta);
  __syncwarp();  // the parked a and P'(landmark) are read by other lanes below
  // --- what needs delta: the landmarks, the CMT, the own block ---
  for (int g = lane; g < b; g += kWarp) {
    const int lmk = L.block_start[g + 1] - 1;
    const Scalar a = d[lmk], p_lmk = s[lmk];
    d[lmk] = L.kind[lmk] == kLandmark ? p_lmk * (a - delta) : p_cmt * p_lmk * (a - a_cmt);
  }
  if (L.cmt >= 0 && lane == 0) d[L.cmt] = p_cmt * (a_cmt - delta);
  __syncwarp();  // the CMT's entry, written by lane 0, may lie in the own block (rewritten below)
  for (int j = own_begin + lane; j <= i; j += kWarp) d[j] = L.kind[j] == kRegular ? s[j] * (d[j] - delta) : Scalar(0);
  for (int j = i + 1 + lane; j < ncols; j += kWarp) w[j] = d[j] = Scalar(0);
}

constexpr int kRowsPerBlock = kRowThreads / kWarp;  // one warp per row

// A grid-stride loop over `rows` rows, a warp per row: every lane of a warp gets the same r, so
// the warp-wide reductions inside see all 32 lanes.
#define LM_WARP_ROWS(r, rows)                                                                          \
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp; r < (rows); \
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock)

// Rows (h, i) for i in [i0, i0 + n) of every head h: row (h, i) of the tile scratch starts at
// (h n + i - i0) T. On entry S holds the scores of keys [0, i0 + n); on exit W holds the
// weights, zero from i + 1 to the tile's width i0 + n, and S is scratch. probs, when not null,
// receives the whole row of P' (BH, T, T), zero above the diagonal (then S holds P' first).
template <class Scalar>
__global__ void tile_forward_kernel(DeviceLayout lay, Scalar* S, Scalar* W, Scalar* probs, int64_t i0, int64_t n,
                                    int64_t BH) {
  const int lane = threadIdx.x % kWarp;
  const int64_t T = lay.T, rows = BH * n;
  LM_WARP_ROWS(r, rows) {
    const int64_t h = r / n, i = i0 + r % n;
    Scalar* s = S + r * T;
    if (probs != nullptr) {
      warp_row_forward<Scalar, true>(lay.of_head(h), static_cast<int>(i), s, W + r * T, static_cast<int>(i0 + n), lane);
      __syncwarp();
      Scalar* p = probs + (h * T + i) * T;
      for (int64_t j = lane; j < T; j += kWarp) p[j] = j <= i ? s[j] : Scalar(0);
    } else {
      warp_row_forward<Scalar, false>(lay.of_head(h), static_cast<int>(i), s, W + r * T, static_cast<int>(i0 + n),
                                      lane);
    }
  }
}

// The backward's row step for the same tile rows (warp_row_forward_backward): S (scores) in,
// the weights into W and G -> dS in place, both zero from i + 1 to the tile's width; S is
// scratch.
template <class Scalar>
__global__ void tile_backward_kernel(DeviceLayout lay, Scalar* S, Scalar* W, Scalar* G, int64_t i0, int64_t n,
                                     int64_t BH) {
  const int lane = threadIdx.x % kWarp;
  const int64_t T = lay.T, rows = BH * n;
  LM_WARP_ROWS(r, rows) {
    const int64_t h = r / n, i = i0 + r % n;
    warp_row_forward_backward<Scalar>(lay.of_head(h), static_cast<int>(i), S + r * T, W + r * T, G + r * T,
                                      static_cast<int>(i0 + n), lane);
  }
}

unsigned warp_row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, kMaxBlocks));
}

// The scores of the query tile [i0, i0 + n): S = scale q[i0:i1] k[0:i1]^T into the scratch S
// (BH, tile, T), rows T apart.
void tile_scores(const Tensor& q, const Tensor& k, double scale, int64_t i0, int64_t n, const Tensor& S) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), TH = T * HS, i1 = i0 + n;
  gemm(blocks_gemm(false, true, n, i1, HS, HS, HS, T, TH, TH, n * T, BH, scale), from_element(q, i0 * HS), k, S);
}

}  // namespace

void landmark_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                                const Tensor& block_of, const Tensor& block_start, const Tensor& cmt, double scale,
                                double cmt_cutoff, const Tensor& probs, const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), TH = T * HS;
  if (BH * T == 0) return;
  DeviceLayout lay = device_layout(kind, block_of, block_start, cmt, BH, T);
  lay.cmt_cutoff = cmt_cutoff;
  // q, k, v, out (BH, T, HS); probs (BH, T, T) or undefined; scratch S (P') and W (BH, tile, T).
  const int64_t tile = attention_tile(T);
  Tensor S({BH * tile * T}, q.dtype(), Device::CUDA), W({BH * tile * T}, q.dtype(), Device::CUDA);
  for (int64_t i0 = 0; i0 < T; i0 += tile) {
    const int64_t n = std::min(tile, T - i0), i1 = i0 + n;
    tile_scores(q, k, scale, i0, n, S);
    LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention", {
      tile_forward_kernel<scalar_t><<<warp_row_blocks(BH * n), kRowThreads>>>(
          lay, S.data<scalar_t>(), W.data<scalar_t>(), probs.defined() ? probs.data<scalar_t>() : nullptr, i0, n, BH);
      LM_CUDA_CHECK_LAUNCH("tile_forward_kernel");
    });
    // out[i0:i1] = W[i0:i1, 0:i1] v[0:i1]
    gemm(blocks_gemm(false, false, n, HS, i1, T, HS, HS, n * T, TH, TH, BH, 1.0), W, v, from_element(out, i0 * HS));
  }
}

void landmark_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                                 const Tensor& block_of, const Tensor& block_start, const Tensor& cmt,
                                 const Tensor& probs, const Tensor& dout, double scale, const Tensor& dq,
                                 const Tensor& dk, const Tensor& dv) {
  (void)probs;  // recomputed tile by tile from q and k: the same kernel as the forward's
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), TH = T * HS;
  if (BH * T == 0) return;
  const DeviceLayout lay = device_layout(kind, block_of, block_start, cmt, BH, T);
  // q, k, v, dout, dq, dk, dv (BH, T, HS); scratch P', W and G/dS (BH, tile, T).
  const int64_t tile = attention_tile(T);
  Tensor S({BH * tile * T}, q.dtype(), Device::CUDA), W({BH * tile * T}, q.dtype(), Device::CUDA),
      G({BH * tile * T}, q.dtype(), Device::CUDA);
  // The last tile first: its keys are all T, so it writes every row of dk and dv (beta 0); the
  // earlier tiles add into rows [0, i1) (beta 1). A fixed order, so a run repeats itself.
  const int64_t last = (T - 1) / tile * tile;
  for (int64_t i0 = last; i0 >= 0; i0 -= tile) {
    const int64_t n = std::min(tile, T - i0), i1 = i0 + n;
    const double beta = i0 == last ? 0.0 : 1.0;
    const Tensor dout_t = from_element(dout, i0 * HS), q_t = from_element(q, i0 * HS);
    tile_scores(q, k, scale, i0, n, S);
    // G = dout[i0:i1] v[0:i1]^T, then P', W and dS in one row kernel
    gemm(blocks_gemm(false, true, n, i1, HS, HS, HS, T, TH, TH, n * T, BH, 1.0), dout_t, v, G);
    LM_DISPATCH_FLOAT(q.dtype(), "landmark_attention_backward", {
      tile_backward_kernel<scalar_t><<<warp_row_blocks(BH * n), kRowThreads>>>(
          lay, S.data<scalar_t>(), W.data<scalar_t>(), G.data<scalar_t>(), i0, n, BH);
      LM_CUDA_CHECK_LAUNCH("tile_backward_kernel");
    });
    // dv[0:i1] += W^T dout[i0:i1]
    gemm(blocks_gemm(true, false, i1, HS, n, T, HS, HS, n * T, TH, TH, BH, 1.0, beta), W, dout_t, dv);
    // The forward's S = scale q k^T, differentiated: dq = scale dS k, dk = scale dS^T q.
    gemm(blocks_gemm(false, false, n, HS, i1, T, HS, HS, n * T, TH, TH, BH, scale), G, k, from_element(dq, i0 * HS));
    gemm(blocks_gemm(true, false, i1, HS, n, T, HS, HS, n * T, TH, TH, BH, scale, beta), G, q_t, dk);
  }
}

}  // namespace cuda
}  // namespace lm
