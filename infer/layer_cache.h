// layer_cache.h: what one layer keeps between the chunks of cached inference (Section 3.2): the
// K/V of finished blocks in slow memory (a BlockStore, on the host unless the session keeps them
// on its GPU: InferConfig::blocks_on_device), their landmark keys
// and the unfinished tail in fast memory (on the model's device), and, for a model trained with
// a context-miss token, that token's key. Not here: choosing blocks (retrieval_plan.h) and
// attending to them (chunk_attention.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "infer/block_store.h"
#include "infer/config.h"
#include "infer/rotary_cache.h"
#include "landmark/key_index.h"
#include "tensor/tensor.h"

namespace lm {

// One layer's cache: block K/V (un-rotated; K as (NH, HS, F+1), transposed per head, V as
// (NH, F+1, HS)) in slow memory (host, or the device with blocks_on_device), landmark keys (un-rotated) and the unfinished tail in fast
// memory, i.e. on `device`, the model's device.
struct LayerCache {
  // kv_f16: the store keeps block K/V in f16 (block_store.h); everything here stays in `dtype`.
  // indexed: keep the landmark keys in one LandmarkKeyIndex per head (CPU only) for the bounded
  // search, instead of the two tensors below (which then stay empty).
  // blocks_on_device: the store keeps block K/V on `device` too (no offload; a CUDA session).
  LayerCache(int64_t NH, int64_t F, int64_t HS, DType dtype, int64_t capacity, const std::string& block_dir,
             Device device = Device::CPU, bool kv_f16 = false, bool indexed = false, bool blocks_on_device = false);
  std::unique_ptr<BlockStore> store;
  // With `indexed`: per head, the landmark keys rotated at their scoring place and as they were
  // (landmark/key_index.h); the dtype's vector only (F32 or F64).
  bool indexed = false;
  std::vector<LandmarkKeyIndex<float>> index_f32;
  std::vector<LandmarkKeyIndex<double>> index_f64;
  template <class Scalar> const std::vector<LandmarkKeyIndex<Scalar>>& index() const;
  int64_t blocks() const { return store->size(); }
  // Without an index: the landmark keys of the cached blocks, oldest first, in two forms on
  // `device`: as they were (un-rotated), (NH, nb, HS), and rotated once, when they were cached,
  // at the position retrieval scores most of them at (their true position in exact mode, slot 0
  // in stingy mode; only the k newest are rotated again at use), transposed, (NH, HS, nb), so
  // that scoring a chunk is one product per head. Both are views into buffers with room for more
  // blocks (`key_capacity`), which double when full: adding a block costs O(1) on average instead
  // of a copy of every key held (at a million tokens, 20,000 blocks, that copy was per chunk).
  // Column b of a head is at buffer column key_begin + b.
  Tensor landmark_keys() const;        // (NH, nb, HS) view, not contiguous across heads
  Tensor landmark_keys_rot_t() const;  // (NH, HS, nb) view
  int64_t key_count = 0, key_begin = 0, key_capacity = 0;
  Tensor keys_buf, keys_rot_t_buf;  // (NH, key_capacity, HS), (NH, HS, key_capacity)
  Tensor tail_k, tail_v;  // (NH, tail_len, HS)
  int64_t tail_len = 0;
  // The context-miss token's key in this layer, rotated at position -1 (where training puts the
  // CMT), (NH, HS) on `device`; undefined for a model without a CMT. The CMT attends to nothing,
  // so its key does not depend on the input: the session computes it once (Appendix D).
  Tensor cmt_key_rot;
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

template <> inline const std::vector<LandmarkKeyIndex<float>>& LayerCache::index<float>() const { return index_f32; }
template <> inline const std::vector<LandmarkKeyIndex<double>>& LayerCache::index<double>() const { return index_f64; }

}  // namespace lm
