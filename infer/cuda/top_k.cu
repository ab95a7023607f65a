// infer/cuda/top_k.cu: the top k of each row of retrieval scores, on the device (token-head
// granularity), so that only the chosen indices cross to the host, not the (NH, n, nb) scores:
// at a million tokens those were 80 MB per layer and chunk. The choice is select_blocks' (landmark/
// retrieval.h): the k largest scores, ties to the older (smaller) block, returned in ascending
// order. NaN scores rank below every number here (the CPU's TopKStream keeps a NaN that arrives
// while it fills up); scores come from finite keys and queries, so that never differs in practice.
#include <climits>

#include "infer/cuda/chunk_attention.h"
#include "tensor/cuda/common.cuh"

namespace lm {
namespace cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kLanes = 32;

// Does (va, ia) come before (vb, ib) in the ranking? Larger value first, then smaller index; NaN
// after every number; an empty entry (index INT_MAX) after everything.
template <class Scalar>
__device__ bool ranks_before(Scalar va, int ia, Scalar vb, int ib) {
  if (ib == INT_MAX) return ia != INT_MAX;
  if (ia == INT_MAX) return false;
  const bool na = va != va, nb = vb != vb;
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

// A warp per row: each lane keeps the best k of its columns (j = lane, lane + 32, ...) in a small
// sorted array; then k rounds of a warp-wide "best head" pick the row's k, and lane 0 sorts the
// picked indices ascending. Deterministic: the ranking is a total order.
template <class Scalar>
__global__ void top_k_kernel(const Scalar* scores, int64_t rows, int64_t nb, int k, int32_t* out) {
  const int lane = threadIdx.x % kLanes;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kLanes);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kLanes) + threadIdx.x / kLanes; r < rows;
       r += warps) {
    Scalar val[kMaxDeviceTopK];
    int idx[kMaxDeviceTopK];
    for (int c = 0; c < kMaxDeviceTopK; ++c) {
      val[c] = Scalar(0);
      idx[c] = INT_MAX;
    }
    const Scalar* row = scores + r * nb;
    for (int64_t j = lane; j < nb; j += kLanes) {
      const Scalar v = row[j];
      const int ij = static_cast<int>(j);
      if (!ranks_before(v, ij, val[k - 1], idx[k - 1])) continue;
      int c = k - 1;  // insertion from the back
      while (c > 0 && ranks_before(v, ij, val[c - 1], idx[c - 1])) {
        val[c] = val[c - 1];
        idx[c] = idx[c - 1];
        --c;
      }
      val[c] = v;
      idx[c] = ij;
    }
    // k rounds: the best of the 32 heads wins, and its lane moves on to its next.
    int head = 0, mine = INT_MAX;
    for (int round = 0; round < k; ++round) {
      Scalar bv = head < k ? val[head] : Scalar(0);
      int bi = head < k ? idx[head] : INT_MAX;
      for (int o = kLanes / 2; o > 0; o /= 2) {
        const Scalar ov = __shfl_xor_sync(kFull, bv, o);
        const int oi = __shfl_xor_sync(kFull, bi, o);
        if (ranks_before(ov, oi, bv, bi)) {
          bv = ov;
          bi = oi;
        }
      }
      if (head < k && idx[head] == bi && bi != INT_MAX) ++head;  // indices are unique: one lane matches
      if (lane == round) mine = bi;                              // lane `round` keeps the round's winner
    }
    // Ascending order: lane c holds winner c (k <= 32); a rank among the k by comparison.
    int rank = 0;
    for (int c = 0; c < k; ++c) {
      const int other = __shfl_sync(kFull, mine, c);
      if (lane < k && other < mine) ++rank;
    }
    if (lane < k && mine != INT_MAX) out[r * k + rank] = mine;
  }
}

}  // namespace

Tensor top_k_rows(const Tensor& scores, int64_t k) {
  LM_CHECK(scores.device() == Device::CUDA && scores.dim() == 2 && scores.is_contiguous() && k >= 1 &&
               k <= kMaxDeviceTopK && k <= scores.size(1),
           "top_k_rows: scores " << describe(scores) << " must be a contiguous (rows, nb) cuda tensor and k (" << k
                                 << ") in [1, min(nb, " << kMaxDeviceTopK << ")]");
  LM_CHECK(scores.size(1) <= INT_MAX, "top_k_rows: " << scores.size(1) << " blocks do not fit 32-bit indices");
  const int64_t rows = scores.size(0);
  Tensor out({rows, k}, DType::I32, Device::CUDA);
  if (rows == 0) return out;
  constexpr int kThreadsPerBlock = 256, kWarpsPerBlock = kThreadsPerBlock / kLanes;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
  LM_DISPATCH_FLOAT(scores.dtype(), "top_k_rows", {
    top_k_kernel<scalar_t><<<blocks, kThreadsPerBlock>>>(scores.data<scalar_t>(), rows, scores.size(1),
                                                         static_cast<int>(k), out.data<int32_t>());
    LM_CUDA_CHECK_LAUNCH("top_k_kernel");
  });
  return out;
}

}  // namespace cuda
}  // namespace lm
