// bench_train.cpp: time of one training step of the GPT presets, split into forward (incl. the
// loss), backward and the AdamW update, plus tokens/s; and the fused causal attention against the
// composed reference (matmul + where + softmax + matmul through autograd), forward + backward.
// Then one profiled tiny step: the ops that take its time (autograd/var.h, set_op_profiling).
// Everything is measured in this one run with the printed thread count. Last line:
//   train tiny_step_s=<seconds> attention fused_speedup_vs_reference=<ratio>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "bench/bench_main.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/rng.h"

using namespace lm;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct StepTimes {
  double fwd = 0, bwd = 0, opt = 0;
  double total() const { return fwd + bwd + opt; }
};

StepTimes time_steps(GPTConfig c, int64_t B, int steps) {
  manual_seed(1);
  GPT model(c);
  AdamW opt(model, AdamWConfig{});
  Tensor idx = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32);
  Tensor tgt = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32);
  StepTimes best{1e30, 1e30, 1e30};
  for (int s = 0; s < steps + 1; ++s) {  // the first step warms caches and allocations
    model.zero_grad();
    double t0 = now();
    Var loss = model.loss(idx, tgt);
    double t1 = now();
    loss.backward();
    double t2 = now();
    opt.step(1e-3);
    double t3 = now();
    if (s == 0) continue;
    best.fwd = std::min(best.fwd, t1 - t0);
    best.bwd = std::min(best.bwd, t2 - t1);
    best.opt = std::min(best.opt, t3 - t2);
  }
  return best;
}

// One more step of the model in `time_steps`'s setting with per-op profiling on (autograd/var.h):
// the ops that take the most time, forward and backward, as a table.
void print_op_profile(GPTConfig c, int64_t B, int rows) {
  manual_seed(1);
  GPT model(c);
  Tensor idx = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32);
  Tensor tgt = rand({B, c.block_size}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32);
  for (int s = 0; s < 2; ++s) {  // step 0 warms up; step 1 is profiled
    model.zero_grad();
    if (s == 1) set_op_profiling(true);
    Var loss = model.loss(idx, tgt);
    loss.backward();
  }
  set_op_profiling(false);
  std::vector<OpTotals> ops = op_profile();
  double total = 0;
  for (const OpTotals& o : ops) total += o.forward_s + o.backward_s;
  std::printf("\nwhere the tiny step's forward + backward go (one profiled step, %.3f s in ops):\n", total);
  std::printf("%-28s %6s %10s %10s %7s\n", "op", "calls", "fwd ms", "bwd ms", "share");
  for (int i = 0; i < rows && i < static_cast<int>(ops.size()); ++i)
    std::printf("%-28s %6lld %10.2f %10.2f %6.1f%%\n", ops[i].op.c_str(), (long long)ops[i].calls, 1e3 * ops[i].forward_s,
                1e3 * ops[i].backward_s, 100 * (ops[i].forward_s + ops[i].backward_s) / total);
}

double time_attention(bool fused, int64_t B, int64_t NH, int64_t T, int64_t HS, int reps) {
  manual_seed(2);
  Tensor q = randn({B, NH, T, HS}), k = randn({B, NH, T, HS}), v = randn({B, NH, T, HS}), g = randn({B, NH, T, HS});
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    Var qv(q, true), kv(k, true), vv(v, true);
    double t0 = now();
    Var y = fused ? causal_attention(qv, kv, vv) : causal_attention_reference(qv, kv, vv);
    y.backward(g);
    double t1 = now();
    if (r > 0) best = std::min(best, t1 - t0);
  }
  return best;
}
}  // namespace

const char* kUsage =
    "usage: bench_train [--quick | --tiny] [--vocab V]\n  Times training steps of the tiny and small presets "
    "(default vocab 4096), where the tiny step's time goes per op, and fused vs composed attention.\n"
    "  --quick  one timed step, tiny preset only\n"
    "  --tiny   the tiny preset's step alone, best of 3 (what scripts/bench_vs_pytorch.sh alternates with PyTorch)\n";

int bench_main(int argc, char** argv) {
  bool quick = false, tiny_only = false;
  int64_t vocab = 4096;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--tiny") tiny_only = true;
    else if (a == "--vocab" && i + 1 < argc) vocab = lm::bench::parse_int_flag("--vocab", argv[++i], 2, 1 << 20);
    else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown or incomplete flag '" + a + "'"};
    }
  }
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  bench::print_machine_line(cpu::num_threads(), caches.l1d, caches.l2, caches.l3_per_core, caches.source.c_str());
  std::printf("training-step benchmark: f32, %d thread(s), vocab %lld, best of %d steps after a warm-up\n",
              cpu::num_threads(), (long long)vocab, quick ? 1 : 3);
  std::printf("%-6s %3s %4s %3s %4s %2s %9s %9s %9s %9s %10s\n", "preset", "L", "C", "NH", "T", "B", "fwd s", "bwd s",
              "adamw s", "step s", "tokens/s");
  struct Preset {
    const char* name;
    int64_t L, C, NH, T, B;
    GPTConfig config(int64_t V) const {
      GPTConfig c;
      c.vocab_size = V;
      c.n_layer = L;
      c.n_embd = C;
      c.n_head = NH;
      c.block_size = T;
      return c;
    }
  };
  const Preset presets[] = {{"tiny", 4, 256, 4, 512, 8}, {"small", 6, 512, 8, 512, 8}};
  double tiny_step = 0;
  for (const Preset& p : presets) {
    if ((quick || tiny_only) && std::strcmp(p.name, "small") == 0) continue;
    StepTimes t = time_steps(p.config(vocab), p.B, quick ? 1 : 3);
    if (std::strcmp(p.name, "tiny") == 0) tiny_step = t.total();
    std::printf("%-6s %3lld %4lld %3lld %4lld %2lld %9.3f %9.3f %9.3f %9.3f %10.0f\n", p.name, (long long)p.L,
                (long long)p.C, (long long)p.NH, (long long)p.T, (long long)p.B, t.fwd, t.bwd, t.opt, t.total(),
                static_cast<double>(p.B * p.T) / t.total());
    std::fflush(stdout);
  }
  if (tiny_only) {
    std::printf("train tiny_step_s=%.3f\n", tiny_step);
    return 0;
  }
  // A GPT-2 124M-shaped step (12 layers, d 768, 12 heads, vocab 50257, batch 4, sequence 64, f32)
  // against the FMA peak measured by the probe. Model FLOPs per token: 6 per weight of the matrix
  // products (forward 2, backward 4; the tied embedding counts once, as the output layer) plus
  // 6 L T C for causal attention's two products (half of 12 L T C, the masked half is not
  // computed). Embedding lookups, norms, GELU and AdamW count nothing but take time.
  double gpt2_share = 0;
  if (!quick) {
    GPTConfig c;
    c.vocab_size = 50257;
    c.n_layer = 12;
    c.n_embd = 768;
    c.n_head = 12;
    c.block_size = 64;
    const int64_t B2 = 4;
    const double peak = bench::fma_peak_gflops(cpu::num_threads());
    StepTimes t = time_steps(c, B2, 2);
    const double L = 12, C = 768, T = 64, V = 50257;
    const double per_token = 6.0 * (L * 12.0 * C * C + V * C) + 6.0 * L * T * C;
    const double gflops = per_token * static_cast<double>(B2 * c.block_size) / t.total() * 1e-9;
    gpt2_share = gflops / peak;
    std::printf("\ngpt2-124m shape (L 12, C 768, NH 12, V 50257, B 4, T 64): fwd %.3f s, bwd %.3f s, adamw %.3f s, step "
                "%.3f s\n  %.1f GFLOP/s of model FLOPs (%.1f GFLOP per step) against an FMA peak of %.1f GFLOP/s\n",
                t.fwd, t.bwd, t.opt, t.total(), gflops, per_token * static_cast<double>(B2 * c.block_size) * 1e-9,
                peak);
  }
  print_op_profile(presets[0].config(vocab), presets[0].B, quick ? 8 : 14);
  const int64_t B = 8, NH = 4, T = 512, HS = 64;
  double tf = time_attention(true, B, NH, T, HS, quick ? 1 : 3), tr = time_attention(false, B, NH, T, HS, quick ? 1 : 3);
  std::printf("\ncausal attention fwd+bwd at B %lld NH %lld T %lld HS %lld: fused %.4f s, composed reference %.4f s\n",
              (long long)B, (long long)NH, (long long)T, (long long)HS, tf, tr);
  if (!quick) std::printf("train gpt2_124m_peak_share=%.3f\n", gpt2_share);
  std::printf("train tiny_step_s=%.3f attention fused_speedup_vs_reference=%.2f\n", tiny_step, tr / tf);
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_train", kUsage, argc, argv, bench_main); }
