// infer/cuda/chunk_attention.h: the seam between the two halves of chunk_attention. The host
// decides what every (head, query) retrieves and where it sits (chunk_attention.cpp, one code for
// both devices); the CUDA half (chunk_attention.cu) stages those blocks and runs the virtual rows.
// Internal to infer/: callers use chunk_attention() in infer/chunk_attention.h.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/chunk_attention.h"

namespace lm {

// What retrieval chose for one chunk of one layer. Row r = h * n + i is (head h, query i).
struct RetrievalPlan {
  int64_t nb = 0;         // blocks cached
  int64_t first_gid = 0;  // global index of the oldest cached block
  std::vector<std::vector<int32_t>> sel;   // (NH * n) chosen cached indices per row, ascending
  std::vector<std::vector<int32_t>> base;  // (NH * n) first position of each chosen block
};

namespace cuda {

// The CUDA version of the attention of chunk_attention(): q_rot (NH, n, HS), k_rot and v_loc
// (NH, L, HS) on the device, the plan's blocks read from cache.store (host). Returns (NH, n, HS)
// on the device. When `head_weights` is given, it receives the final weights (n, max_row) of head
// ctx.capture->head on the host, row i holding the kb (F+1) + tail + i + 1 entries of its row.
Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                       const Tensor& q_rot, const Tensor& k_rot, const Tensor& v_loc, Tensor* head_weights);

}  // namespace cuda
}  // namespace lm
