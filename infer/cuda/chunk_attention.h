// infer/cuda/chunk_attention.h: the CUDA half of step 3 of chunk attention. The host decides what
// every (head, query) retrieves and where it sits (retrieval_plan.cpp, one code for both
// devices); this half (chunk_attention.cu) stages those blocks and runs the virtual rows.
// Internal to infer/: callers use attend_plan() or chunk_attention() in infer/chunk_attention.h.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/chunk_attention.h"

namespace lm {
namespace cuda {

// The CUDA version of attend_plan(): q_rot (NH, n, HS), k_rot and v_loc (NH, L, HS) on the device,
// the plan's blocks read from cache.store (host), the CMT key (when the cache has one) on the
// device. Returns (NH, n, HS) on the device. When `head_weights` is given, it receives the final
// weights (n, max_row) of head ctx.capture->head on the host, row i holding the
// (CMT) + kb (F+1) + tail + i + 1 entries of its virtual row. `cmt_count` as in attend_plan().
Tensor attend_plan(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, Tensor* head_weights, CmtCount* cmt_count);

// The top k of each row of `scores` (rows, nb), a contiguous cuda tensor, as select_blocks picks
// them at token-head granularity (ties to the smaller index), ascending: (rows, k) i32 on the
// device, k in [1, min(nb, kMaxDeviceTopK)] (infer/cuda/top_k.cu). Larger k: select on the host.
constexpr int kMaxDeviceTopK = 16;
Tensor top_k_rows(const Tensor& scores, int64_t k);

}  // namespace cuda
}  // namespace lm
