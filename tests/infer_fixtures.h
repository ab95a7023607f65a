// infer_fixtures.h: the small landmark model and inputs that the CPU inference tests
// (tests/test_infer.cpp) and their CUDA twins (tests/gpu/test_cuda_infer.cpp) share, so that
// both suites test the very same model.
#pragma once

#include <memory>
#include <vector>

#include "infer/session.h"
#include "nn/gpt.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

namespace lm {
namespace infer_test {

constexpr int32_t kLandmarkId = 40;  // the last of 41 vocabulary entries

constexpr int32_t kCmtId = 41;  // the context-miss token of make_cmt_model's vocabulary of 42

// A 2-layer landmark GPT (d 16, 2 heads, a landmark every 5) from `seed`, with its matrices scaled
// by 8, so attention is far from uniform and a wrongly gathered or placed block shows; converted
// to `dtype` and moved to `device`. With a context-miss token (Appendix D) the vocabulary has 42
// entries, the CMT id 41. `zero_queries`: the query projections (weights and biases) set to 0, so
// every attention score is exactly 0 and each softmax is uniform over its group.
inline std::unique_ptr<GPT> build_model(bool context_miss, uint64_t seed, DType dtype, Device device, bool zero_queries) {
  manual_seed(seed);
  GPTConfig c;
  c.vocab_size = context_miss ? 42 : 41;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 64;
  c.attention = AttentionKind::Landmark;
  c.landmark_every = 5;
  c.context_miss = context_miss;
  auto m = std::make_unique<GPT>(c);
  for (Var* p : m->parameters())
    if (p->dim() == 2) p->value().copy_(mul(p->value(), 8.0));
  if (zero_queries)
    for (auto& blk : m->blocks) {
      blk->attn.qkv.weight.value().narrow(0, 0, c.n_embd).copy_(zeros({c.n_embd, c.n_embd}));
      if (blk->attn.qkv.bias.defined()) blk->attn.qkv.bias.value().narrow(0, 0, c.n_embd).copy_(zeros({c.n_embd}));
    }
  m->to(dtype);
  m->to(device);
  return m;
}

// The shared model: vocabulary 41, the landmark id 40 its last entry; one seed.
inline std::unique_ptr<GPT> make_model(DType dtype, Device device = Device::CPU) {
  return build_model(false, 101, dtype, device, false);
}

// The same shape trained-style with a context-miss token, for the CMT tests (hand-worked
// statistics use zero_queries).
inline std::unique_ptr<GPT> make_cmt_model(DType dtype, Device device = Device::CPU, bool zero_queries = false) {
  return build_model(true, 102, dtype, device, zero_queries);
}

// n raw tokens in [0, 40): never the landmark id.
inline std::vector<int32_t> random_raw(int64_t n, uint64_t seed) {
  manual_seed(seed);
  return rand({n}, DType::F64, Device::CPU, 0, 40).to(DType::I32).to_vector<int32_t>();
}

// Exact positions and k above anything ever cached: every block is retrieved, so the session
// must reproduce the one-shot forward.
inline InferConfig exact_all(int64_t chunk) {
  InferConfig c;
  c.chunk_len = chunk;
  c.k = 1000;
  c.positions = PositionMode::Exact;
  return c;
}

}  // namespace infer_test
}  // namespace lm
