// local_gates.h: beyond the paper. The part of a row's gates that lies in the chunk's own keys,
// from scores alone, before any block is read: what the CMT fetch skip (cmt_skip.h) and adaptive k
// (adaptive_k.h) both need to decide which retrieved blocks a row can do without.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/layer_cache.h"
#include "infer/retrieval_plan.h"
#include "tensor/tensor.h"

namespace lm {

// Per (head, query) row r = h * n + i of a chunk, from its scores against [tail | chunk] and the
// CMT: the grouped softmax's top group without the cached landmarks, i.e. the query's own block's
// regular tokens and the free landmarks of earlier local blocks (and the CMT).
struct LocalGates {
  std::vector<double> log_rest;  // log of sum e^score over those local keys (-inf when none)
  std::vector<double> p_cmt;     // with a CMT: its share of the top group, P'(CMT); empty without
};
// q_rot (NH, n, HS) and k_rot (NH, L, HS) on the CPU, as attend_plan takes them.
LocalGates local_gates(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot);

// Whether row r's context-miss token falls below `cutoff` by a relative margin of 1e-4 (so that the
// row's own grouped softmax, in its own rounding, drops it as well); every row at a cutoff of 1.
bool gated_off(const LocalGates& g, double cutoff, size_t r);

// The gates of one chunk and layer, computed once for the hooks that ask (cmt_skip.h,
// adaptive_k.h): `of` computes them on its first call, and each of those hooks calls `clear` when
// the chunk's layer ends (RetrievalHooks::end_chunk), so the next layer computes its own.
class LocalGatesOnce {
 public:
  const LocalGates& of(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot);
  void clear() { valid_ = false; }

 private:
  bool valid_ = false;
  LocalGates gates_;
};

}  // namespace lm
