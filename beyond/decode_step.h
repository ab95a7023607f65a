// Beyond the paper: a faster path for one generated token, bit for bit the paper's chunk path.
// decode_step.h: one generated token through every layer of a landmark model, on the CPU, in one
// parallel region and without the tensor machinery.
//
// InferenceSession::feed_chunk runs a chunk as a sequence of tensor ops per layer (layer norm,
// qkv product, rotary, retrieval plan, rows, projections, MLP): clear, and for a chunk of 250
// tokens each op has enough work. A decoded token is a chunk of one, where the ops have almost no
// work and their fixed costs (allocations, shape checks, a fork and join of the threads per op)
// were most of the step: 0.25 ms at 2k tokens of context, as at 32k. decode_step does the same
// arithmetic for that one token with the per-row pieces the chunk path uses (infer/cpu_rows.h,
// tensor/cpu/layernorm_row.h, and cpu::gemv_rows, the GEMM's own one-row products): the threads
// split the columns of each product and the heads of each layer, and meet at a barrier between
// the steps. The result is the chunk path's, bit for bit
// (tests/test_decode_step.cpp), so generation does not depend on which path ran.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/hooks.h"
#include "infer/layer_cache.h"
#include "infer/retrieval_plan.h"
#include "infer/session.h"
#include "nn/gpt.h"

namespace lm {

// Whether decode_step can take a one-token chunk in this situation: a CPU model in f32 or f64 that
// is not training with dropout, token-head granularity, the landmark keys scanned (no index and no
// other block scoring), block K/V readable in place (in RAM, in the model's dtype), nothing captured
// or traced.
bool decode_step_fits(const GPT& model, const std::vector<LayerCache>& layers, const ChunkContext& ctx);

// Feeds one regular token (`token`) whose local positions are `positions` (the tail's, then its
// own: layers[l].tail_len + 1 entries) through every layer: retrieval and attention as
// chunk_attention does them, the token's key and value appended to every layer's tail. ctx is the
// chunk's context (its local_kinds: tail_len + 1 regular kinds). Returns the logits (1, vocab)
// and appends one RetrievalRecord per layer to `log`. Call only when decode_step_fits.
Tensor decode_step(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx, int32_t token,
                   const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log);

// The decode step as the session's one-token path (infer/hooks.h; BeyondSession sets it unless
// BeyondConfig::decode_step is off), counting the tokens it took.
class DecodeStep : public OneTokenPath {
 public:
  bool fits(const GPT& model, const std::vector<LayerCache>& layers, const ChunkContext& ctx) const override {
    return decode_step_fits(model, layers, ctx);
  }
  Tensor step(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx, int32_t token,
              const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log) override {
    ++steps;
    return decode_step(model, layers, ctx, token, positions, log);
  }
  int64_t steps = 0;  // tokens that went through it so far
};

}  // namespace lm
