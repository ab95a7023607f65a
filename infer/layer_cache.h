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
#include "infer/hooks.h"
#include "infer/rotary_cache.h"
#include "landmark/key_index.h"
#include "nn/nn_math.h"
#include "tensor/tensor.h"

namespace lm {

// One layer's cache: the K/V of each finished block's F regular tokens (un-rotated; K as
// (NH, HS, F), transposed per head, V as (NH, F, HS)) in slow memory (host, or the device with
// blocks_on_device), and in fast memory, i.e. on `device`, the model's device: one landmark key
// per block and the unfinished tail. A block's landmark token is kept as its key only: its value
// is never read (its weight in the grouped softmax is 0, landmark/grouped_softmax.h), and its key
// is held once, rotated where retrieval scores it; a reader that needs it at another position
// (the block's gate at its place, a stingy rescoring) rotates it on from there (rotate_key_on).
// So the cache holds the text's K/V plus one key per block: a full KV cache of the text plus
// 1/(2F) of it, and nothing twice (docs/infer.md, "The full-cache baseline, and why memory cannot
// be lower"; measured in docs/results/inference.md#memory-vs-full).
struct LayerCache {
  // kv_f16: the store keeps block K/V in f16 (block_store.h); everything here stays in `dtype`.
  // indexed: keep the landmark keys in one LandmarkKeyIndex per head (CPU only) for the bounded
  // search, instead of the tensor below (which then stays empty).
  // blocks_on_device: the store keeps block K/V on `device` too (no offload; a CUDA session).
  LayerCache(int64_t NH, int64_t F, int64_t HS, DType dtype, int64_t capacity, const std::string& block_dir,
             Device device = Device::CPU, bool kv_f16 = false, bool indexed = false, bool blocks_on_device = false);
  std::unique_ptr<BlockStore> store;
  // With `indexed`: per head, the landmark keys rotated at their scoring position
  // (landmark/key_index.h); the dtype's vector only (F32 or F64).
  bool indexed = false;
  std::vector<LandmarkKeyIndex<float>> index_f32;
  std::vector<LandmarkKeyIndex<double>> index_f64;
  template <class Scalar>
  const std::vector<LandmarkKeyIndex<Scalar>>& index() const;
  int64_t blocks() const { return store->size(); }
  // Without an index: the landmark keys of the cached blocks, oldest first, on `device`, rotated
  // once, when they were cached, at the position retrieval scores most of them at (slot 0's
  // landmark, position F, in stingy mode; their true position in exact mode), transposed,
  // (NH, HS, nb), so that scoring a chunk is one product per head. A view into a buffer with room
  // for more blocks (`key_capacity`), which grows by a quarter when full: adding a block costs
  // O(1) on average instead of a copy of every key held (at a million tokens, 20,000 blocks, that
  // copy was per chunk). Column b of a head is at buffer column key_begin + b.
  Tensor landmark_keys_rot_t() const;  // (NH, HS, nb) view
  int64_t key_count = 0, key_begin = 0, key_capacity = 0;
  Tensor keys_rot_t_buf;  // (NH, HS, key_capacity)
  // Block b's landmark key (b = 0 the oldest held) for head h as kept (rotated at its scoring
  // position), read in place on the host: feature d at key[d * *stride]. CPU caches, either form.
  template <class Scalar>
  const Scalar* scored_key(int64_t h, int64_t b, int64_t* stride) const;
  // The gates of retrieved blocks as tensors on `device` (what the tensor-op and CUDA rows use):
  // for set p, block blocks[p]'s landmark key rotated on by turns[p] positions (gate_turn), as
  // (P, NH, 1, HS). Scan caches only (not `indexed`).
  Tensor gate_keys(const std::vector<int32_t>& blocks, const std::vector<int32_t>& turns, RotaryCache& rope) const;
  Tensor tail_k, tail_v;  // (NH, tail_len, HS)
  int64_t tail_len = 0;
  // The context-miss token's key in this layer, rotated at position -1 (where training puts the
  // CMT), (NH, HS) on `device`; undefined for a model without a CMT. The CMT attends to nothing,
  // so its key does not depend on the input: the session computes it once (Appendix D).
  Tensor cmt_key_rot;
  // Null: retrieval scores the landmark keys (the paper). Otherwise another way to score the cached
  // blocks (hooks.h), kept in step with the store by absorb; tail_q (un-rotated) holds the tail's
  // queries when it needs them.
  std::unique_ptr<BlockScoring> scoring;
  Tensor tail_q;
  int64_t NH, F, HS;
  DType dtype;
  Device device;
  // Takes the local sequence [tail | chunk] (NH, L, HS) of a processed chunk, on `device`: every
  // completed block (ending in a landmark) goes to the cache (its regular tokens' K/V copied to
  // the store, its landmark key rotated into fast memory), the rest becomes the new tail.
  // Returns the number of completed blocks.
  // `first_gid`: global index the first completed block will get (for exact positions).
  // q_loc: the un-rotated queries of [tail | chunk], needed only when scoring->needs_queries().
  int64_t absorb(const Tensor& k_loc, const Tensor& v_loc, const std::vector<int32_t>& local_kinds, RotaryCache& rope,
                 PositionMode positions, int64_t first_gid, const Tensor* q_loc = nullptr);
};

template <>
inline const std::vector<LandmarkKeyIndex<float>>& LayerCache::index<float>() const {
  return index_f32;
}
template <>
inline const std::vector<LandmarkKeyIndex<double>>& LayerCache::index<double>() const {
  return index_f64;
}

template <class Scalar>
const Scalar* LayerCache::scored_key(int64_t h, int64_t b, int64_t* stride) const {
  if (indexed) return index<Scalar>()[static_cast<size_t>(h)].rotated_key(b, stride);
  *stride = key_capacity;
  return keys_rot_t_buf.data<Scalar>() + h * HS * key_capacity + key_begin + b;
}

// How many positions further a landmark key, kept rotated at its scoring position, is rotated to be
// the gate of its block placed at `place` (the gate sits at place + F): in stingy mode the keys
// are kept at position F, so the turn is the place itself; in exact mode they are kept at their
// true position, which is where the block is placed, so the turn is 0.
inline int64_t gate_turn(PositionMode m, int64_t place) { return m == PositionMode::Stingy ? place : 0; }

// key (HS values, feature d at key[d * stride]) rotated on by the angles of one position (pair
// i's cosine and sine at cs[i * cstep] and sn[i * cstep]), as nnmath::rotate_pair rotates, into
// out (feature d at out[d * out_stride]). Two rotations compose to the rotation by the sum of
// their angles, so this is the key rotated at its scoring position plus the turn, up to rounding (a
// few ulps).
template <class Scalar>
inline void rotate_key_on(const Scalar* key, int64_t stride, const Scalar* cs, const Scalar* sn, int64_t cstep,
                          int64_t HS, Scalar* out, int64_t out_stride = 1) {
  for (int64_t i = 0; i < HS / 2; ++i)
    nnmath::rotate_pair(key[(2 * i) * stride], key[(2 * i + 1) * stride], cs[i * cstep], sn[i * cstep],
                        out[(2 * i) * out_stride], out[(2 * i + 1) * out_stride]);
}

}  // namespace lm
