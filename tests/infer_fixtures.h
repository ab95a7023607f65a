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

// A 2-layer landmark GPT (vocab 41, d 16, 2 heads, a landmark every 5) with its matrices scaled
// by 8, so attention is far from uniform and a wrongly gathered or placed block shows. One seed;
// converted to `dtype` and moved to `device`.
inline std::unique_ptr<GPT> make_model(DType dtype, Device device = Device::CPU) {
  manual_seed(101);
  GPTConfig c;
  c.vocab_size = 41;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 64;
  c.attention = "landmark";
  c.landmark_every = 5;
  auto m = std::make_unique<GPT>(c);
  for (Var* p : m->parameters())
    if (p->dim() == 2) p->value().copy_(mul(p->value(), 8.0));
  m->to(dtype);
  m->to(device);
  return m;
}

constexpr int32_t kCmtId = 41;  // the context-miss token of make_cmt_model's vocabulary of 42

// The same model trained-shape with a context-miss token (Appendix D): vocabulary 42, the CMT id
// 41. `zero_queries`: the query projections (weights and biases) set to 0, so every attention
// score is exactly 0 and each softmax is uniform over its group, for hand-worked CMT statistics.
inline std::unique_ptr<GPT> make_cmt_model(DType dtype, Device device = Device::CPU, bool zero_queries = false) {
  manual_seed(102);
  GPTConfig c;
  c.vocab_size = 42;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 64;
  c.attention = "landmark";
  c.landmark_every = 5;
  c.context_miss = true;
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
