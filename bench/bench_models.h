// bench_models.h: what bench_train (CPU), bench_gpu (CUDA) and bench_landmark share: timing one
// training step of a GPT on a device, profiling one step per op (autograd/var.h), and the
// landmark layout of random training windows.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/var.h"
#include "landmark/tokens.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "tensor/create.h"
#include "tensor/rng.h"
#include "tensor/storage.h"

namespace lm {
namespace bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CUDA work runs after its launch returns: a timed phase on the GPU ends when the device is idle.
inline void wait_for(Device d) {
  if (d == Device::CUDA) cuda_synchronize();
}

// A GPT of the benchmarks' shapes: L layers, width C, NH heads, T positions, vocabulary V.
inline GPTConfig gpt_config(int64_t L, int64_t C, int64_t NH, int64_t T, int64_t V) {
  GPTConfig c;
  c.vocab_size = V;
  c.n_layer = L;
  c.n_embd = C;
  c.n_head = NH;
  c.block_size = T;
  return c;
}

struct StepTimes {
  double fwd = 1e30, bwd = 1e30, opt = 1e30;
  double total() const { return fwd + bwd + opt; }
};

// The best forward (with the loss), backward and AdamW times of `steps` training steps of a fresh
// GPT (seed 1) on device d, batch B of random tokens, after one warm-up step (caches, allocations,
// cuBLAS handles).
inline StepTimes time_train_steps(const GPTConfig& c, int64_t B, int steps, Device d) {
  manual_seed(1);
  GPT model(c);
  AdamW opt(model, AdamWConfig{});
  model.to(d);
  opt.to(d);
  Tensor idx = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32).to(d);
  Tensor tgt = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32).to(d);
  StepTimes best;
  for (int s = 0; s < steps + 1; ++s) {
    model.zero_grad();
    wait_for(d);
    const double t0 = now_s();
    Var loss = model.loss(idx, tgt);
    wait_for(d);
    const double t1 = now_s();
    loss.backward();
    wait_for(d);
    const double t2 = now_s();
    opt.step(1e-3);
    wait_for(d);
    const double t3 = now_s();
    if (s == 0) continue;
    best.fwd = std::min(best.fwd, t1 - t0);
    best.bwd = std::min(best.bwd, t2 - t1);
    best.opt = std::min(best.opt, t3 - t2);
  }
  return best;
}

// One more forward + backward of that model with per-op profiling on, printed as a table of the
// `rows` ops that took longest (on CUDA the profiler waits for the device at every op).
inline void print_step_profile(const GPTConfig& c, int64_t B, Device d, int rows, const std::string& title) {
  manual_seed(1);
  GPT model(c);
  model.to(d);
  Tensor idx = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32).to(d);
  Tensor tgt = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32).to(d);
  for (int s = 0; s < 2; ++s) {  // step 0 warms up; step 1 is profiled
    model.zero_grad();
    wait_for(d);
    if (s == 1) set_op_profiling(true);
    Var loss = model.loss(idx, tgt);
    loss.backward();
    wait_for(d);
  }
  set_op_profiling(false);
  const std::vector<OpTotals> ops = op_profile();
  double total = 0;
  for (const OpTotals& o : ops) total += o.forward_s + o.backward_s;
  std::printf("\n%s (one profiled step, %.3f s in ops):\n", title.c_str(), total);
  std::printf("%-28s %6s %10s %10s %7s\n", "op", "calls", "fwd ms", "bwd ms", "share");
  for (int i = 0; i < rows && i < static_cast<int>(ops.size()); ++i)
    std::printf("%-28s %6lld %10.2f %10.2f %6.1f%%\n", ops[i].op.c_str(), (long long)ops[i].calls, 1e3 * ops[i].forward_s,
                1e3 * ops[i].backward_s, 100 * (ops[i].forward_s + ops[i].backward_s) / total);
}

// Kinds for B rows of T tokens with a landmark after every F regular ones, each row at its own
// phase (as random training windows are).
inline Tensor window_kinds(int64_t B, int64_t T, int64_t F) {
  std::vector<int32_t> k(static_cast<size_t>(B * T), kRegular);
  for (int64_t b = 0; b < B; ++b) {
    int64_t phase = (b * 13) % F;
    for (int64_t t = 0; t < T; ++t) {
      if (phase == F) {
        k[static_cast<size_t>(b * T + t)] = kLandmark;
        phase = 0;
      } else {
        ++phase;
      }
    }
  }
  return from_vector(k, {B, T});
}

}  // namespace bench
}  // namespace lm
