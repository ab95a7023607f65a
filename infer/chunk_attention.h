// chunk_attention.h: one layer's attention for one chunk at inference: retrieval of the top-k
// cached blocks by landmark scores, the stingy (or exact) positions of what was retrieved, and
// the grouped softmax over [retrieved blocks | tail | chunk] for every (head, query). The
// grouped softmax is the very row function the training kernels use (landmark/grouped_softmax.h),
// applied to each query's own "virtual row". Also the per-layer cache (LayerCache). CPU code in
// chunk_attention.cpp; the CUDA twin (same retrieval, same rows) in infer/cuda/chunk_attention.cu.
#pragma once

#include <memory>
#include <vector>

#include "infer/block_store.h"
#include "infer/config.h"
#include "infer/session.h"
#include "nn/functional.h"
#include "tensor/tensor.h"

namespace lm {

// One layer's cache: block K/V (un-rotated; K as (NH, HS, F+1), transposed per head, V as
// (NH, F+1, HS)) in slow memory (the BlockStore, always on the host), landmark keys (un-rotated)
// and the unfinished tail in fast memory, i.e. on `device`, the model's device.
struct LayerCache {
  LayerCache(int64_t NH, int64_t F, int64_t HS, DType dtype, int64_t capacity, const std::string& path,
             Device device = Device::CPU);
  std::unique_ptr<BlockStore> store;
  Tensor landmark_keys;      // (NH, nb, HS), one column per cached block, oldest first, un-rotated
  // The same keys rotated once, when they were cached, at the position retrieval scores most of
  // them at: their true position (exact mode) or slot 0 (stingy mode). Scoring is then one
  // product; only the k newest blocks (stingy slots 1..k) are rotated again at use. Stored
  // transposed, (NH, HS, nb), so that product streams along the blocks (one query: an axpy per
  // feature instead of a short dot product per block).
  Tensor landmark_keys_rot_t;
  Tensor tail_k, tail_v; // (NH, tail_len, HS)
  int64_t tail_len = 0;
  int64_t NH, F, HS;
  DType dtype;
  Device device;
  // Takes the local sequence [tail | chunk] (NH, L, HS) of a processed chunk, on `device`: every
  // completed block (ending in a landmark) goes to the cache (its K/V copied to the host store),
  // the rest becomes the new tail. Returns the number of completed blocks.
  // `first_gid`: global index the first completed block will get (for exact positions).
  int64_t absorb(const Tensor& k_loc, const Tensor& v_loc, const std::vector<int32_t>& local_kinds, RotaryCache& rope,
                 PositionMode positions, int64_t first_gid);
};

struct ChunkContext {
  int64_t F = 50, k = 4;
  Granularity granularity = Granularity::TokenHead;
  PositionMode positions = PositionMode::Stingy;
  int64_t blocks_done = 0;  // blocks completed before this chunk (global index of the next one)
  double rotary_base = 10000.0;
  const std::vector<int32_t>* local_kinds = nullptr;  // kinds of [tail | chunk]
  int64_t chunk = 0, layer = 0;
  int64_t aug_start = 0;  // global augmented position of the chunk's first token
  AttentionCapture* capture = nullptr;
  RotaryCache* rope = nullptr;  // the session's cos/sin rows (positions are decided here, at use)
};

// Retrieval's scores (NH, n, nb), scaled by 1/sqrt(HS): the chunk's rotated queries against every
// cached landmark key, the k newest at their stingy slots in stingy mode. On the CPU a plain loop
// (cpu_loop) does the stingy rescoring and scaling in place; otherwise tensor ops on q's device.
// Both exist so the tests can hold one against the other.
Tensor retrieval_scores(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, bool cpu_loop = true);

// q_rot (NH, n, HS) rotated queries of the chunk; k_rot (NH, L, HS) rotated keys and v_loc (NH, L,
// HS) values of [tail | chunk], L = tail + n, all on the cache's device. Returns the attention
// output (NH, n, HS) on that device and fills `record` with what retrieval did.
Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                       const Tensor& v_loc, RetrievalRecord* record);

}  // namespace lm
