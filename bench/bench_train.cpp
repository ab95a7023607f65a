// bench_train.cpp: time of one training step of the GPT presets, split into forward (incl. the
// loss), backward and the AdamW update, plus tokens/s; and the fused causal attention against the
// composed reference (matmul + where + softmax + matmul through autograd), forward + backward.
// Everything is measured in this one run with the printed thread count. Last line:
//   train tiny_step_s=<seconds> attention fused_speedup_vs_reference=<ratio>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "autograd/functions.h"
#include "bench/bench_main.h"
#include "nn/gpt.h"
#include "nn/optim.h"
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
    "usage: bench_train [--quick] [--vocab V]\n  Times training steps of the tiny and small presets "
    "(default vocab 4096) and fused vs composed attention.\n";

int bench_main(int argc, char** argv) {
  bool quick = false;
  int64_t vocab = 4096;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--vocab" && i + 1 < argc) vocab = lm::bench::parse_int_flag("--vocab", argv[++i], 2, 1 << 20);
    else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown or incomplete flag '" + a + "'"};
    }
  }
  std::printf("CPU: %s\n", bench::cpu_model().c_str());
  std::printf("training-step benchmark: f32, %d thread(s), vocab %lld, best of %d steps after a warm-up\n",
              cpu::num_threads(), (long long)vocab, quick ? 1 : 3);
  std::printf("%-6s %3s %4s %3s %4s %2s %9s %9s %9s %9s %10s\n", "preset", "L", "C", "NH", "T", "B", "fwd s", "bwd s",
              "adamw s", "step s", "tokens/s");
  struct Preset { const char* name; int64_t L, C, NH, T, B; };
  Preset presets[] = {{"tiny", 4, 256, 4, 512, 8}, {"small", 6, 512, 8, 512, 8}};
  double tiny_step = 0;
  for (const Preset& p : presets) {
    if (quick && std::strcmp(p.name, "small") == 0) continue;
    GPTConfig c;
    c.vocab_size = vocab;
    c.n_layer = p.L;
    c.n_embd = p.C;
    c.n_head = p.NH;
    c.block_size = p.T;
    StepTimes t = time_steps(c, p.B, quick ? 1 : 3);
    if (std::strcmp(p.name, "tiny") == 0) tiny_step = t.total();
    std::printf("%-6s %3lld %4lld %3lld %4lld %2lld %9.3f %9.3f %9.3f %9.3f %10.0f\n", p.name, (long long)p.L,
                (long long)p.C, (long long)p.NH, (long long)p.T, (long long)p.B, t.fwd, t.bwd, t.opt, t.total(),
                static_cast<double>(p.B * p.T) / t.total());
    std::fflush(stdout);
  }
  const int64_t B = 8, NH = 4, T = 512, HS = 64;
  double tf = time_attention(true, B, NH, T, HS, quick ? 1 : 3), tr = time_attention(false, B, NH, T, HS, quick ? 1 : 3);
  std::printf("\ncausal attention fwd+bwd at B %lld NH %lld T %lld HS %lld: fused %.4f s, composed reference %.4f s\n",
              (long long)B, (long long)NH, (long long)T, (long long)HS, tf, tr);
  std::printf("train tiny_step_s=%.3f attention fused_speedup_vs_reference=%.2f\n", tiny_step, tr / tf);
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_train", kUsage, argc, argv, bench_main); }
