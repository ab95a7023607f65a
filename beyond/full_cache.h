// Beyond the paper: the full-KV-cache baseline that the decode benchmark compares against.
// full_cache.h: the plain baseline of decoding: a full KV cache (every past token's rotated key
// and value) and causal softmax attention over all of it, one token at a time. It is what a
// standard transformer does at inference, and what bench/bench_decode.cpp compares landmark
// retrieval against: its cost and memory grow with the whole context.
#pragma once

#include <vector>

#include "nn/gpt.h"

namespace lm {

class FullKVCache {
 public:
  // Reserves room for `capacity` tokens per layer up front (so timing excludes reallocation), on
  // the model's device. An f32 model on the CPU takes the hand-written CPU step below; a model on
  // CUDA (or any model with `tensor_ops`) takes the device-generic step, built from tensor ops
  // (matmul, softmax) over keys and values kept as tensors on the model's device. The CPU tests
  // run the generic step too, against the one-shot forward.
  FullKVCache(const GPT& model, int64_t capacity, bool tensor_ops = false);
  // One token at the next position: returns its logits (V), on the model's device.
  Tensor step(int32_t token);
  // Fills the cache with `n` positions of random keys and values without running the model:
  // the decode step's cost depends only on how many there are (benchmarks use this to reach
  // long contexts without an O(n^2) prefill).
  void fill_random(int64_t n, uint64_t seed);
  int64_t size() const { return len_; }
  int64_t bytes() const;  // memory held by the cache
  bool tensor_ops() const { return tensor_ops_; }

 private:
  Tensor step_tensor_ops(int32_t token);

  const GPT& model_;
  int64_t capacity_, len_ = 0, NH_, HS_;
  bool tensor_ops_;
  std::vector<std::vector<float>> k_, v_;  // CPU step: per layer (NH, capacity, HS), rotated keys
  std::vector<Tensor> kt_, vt_;            // generic step: per layer (NH, capacity, HS) on the device
};

}  // namespace lm
