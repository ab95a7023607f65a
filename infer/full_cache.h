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
  // Reserves room for `capacity` tokens per layer up front (so timing excludes reallocation).
  FullKVCache(const GPT& model, int64_t capacity);
  // One token at the next position: returns its logits (V).
  Tensor step(int32_t token);
  // Fills the cache with `n` positions of random keys and values without running the model:
  // the decode step's cost depends only on how many there are (benchmarks use this to reach
  // long contexts without an O(n^2) prefill).
  void fill_random(int64_t n, uint64_t seed);
  int64_t size() const { return len_; }
  int64_t bytes() const;  // memory held by the cache

 private:
  const GPT& model_;
  int64_t capacity_, len_ = 0, NH_, HS_;
  std::vector<std::vector<float>> k_, v_;  // per layer: (NH, capacity, HS), rotated keys
};

}  // namespace lm
