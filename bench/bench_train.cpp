// bench_train.cpp: time of one training step of the GPT presets, split into forward (incl. the
// loss), backward and the AdamW update, plus tokens/s; and the fused causal attention against the
// composed reference (matmul + where + softmax + matmul through autograd), forward + backward.
// Then a GPT-2 124M-shaped step against the FMA peak, and one profiled step of it and of the tiny
// preset: the ops that take their time (autograd/var.h, set_op_profiling). And GELU forward +
// backward in f32 (math::normal_cdf, vectorised) against the same loops through libm's erff.
// Everything is measured in this one run with the printed thread count. Last line:
//   train tiny_step_s=<seconds> attention fused_speedup_vs_reference=<ratio>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "bench/bench_main.h"
#include "bench/bench_models.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/elementwise_math.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

using namespace lm;

namespace {
double time_attention(bool fused, int64_t B, int64_t NH, int64_t T, int64_t HS, int reps) {
  manual_seed(2);
  Tensor q = randn({B, NH, T, HS}), k = randn({B, NH, T, HS}), v = randn({B, NH, T, HS}), g = randn({B, NH, T, HS});
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    Var qv(q, true), kv(k, true), vv(v, true);
    double t0 = bench::now_s();
    Var y = fused ? causal_attention(qv, kv, vv) : causal_attention_reference(qv, kv, vv);
    y.backward(g);
    double t1 = bench::now_s();
    if (r > 0) best = std::min(best, t1 - t0);
  }
  return best;
}

// GELU forward + backward over n f32 values, through the ops (math::gelu / gelu_grad in f32:
// normal_cdf, plain arithmetic the compiler vectorises) and through loops of the same shape that
// call libm's erff and expf per value (what the f32 ops did before normal_cdf). Best of reps,
// seconds; both use parallel_for, so both get the same threads.
struct GeluTimes { double ours, libm; };
GeluTimes time_gelu(int64_t n, int reps) {
  manual_seed(3);
  Tensor x = randn({n}), g = randn({n});
  Tensor y = empty({n}), dx = empty({n});
  const float* px = x.data<float>();
  const float* pg = g.data<float>();
  float* py = y.data<float>();
  float* pd = dx.data<float>();
  auto libm_pass = [&] {
    cpu::parallel_for(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) py[i] = 0.5f * px[i] * (1.0f + erff(px[i] * 0.70710678f));
    });
    cpu::parallel_for(n, 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float cdf = 0.5f * (1.0f + erff(px[i] * 0.70710678f));
        pd[i] = pg[i] * (cdf + px[i] * 0.39894228f * expf(-0.5f * px[i] * px[i]));
      }
    });
  };
  GeluTimes best{1e30, 1e30};
  for (int r = 0; r < reps + 1; ++r) {
    double t0 = bench::now_s();
    Tensor a = gelu(x), b = gelu_backward(x, g);
    double t1 = bench::now_s();
    libm_pass();
    double t2 = bench::now_s();
    if (r > 0) best = {std::min(best.ours, t1 - t0), std::min(best.libm, t2 - t1)};
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
    GPTConfig config(int64_t V) const { return bench::gpt_config(L, C, NH, T, V); }
  };
  const Preset presets[] = {{"tiny", 4, 256, 4, 512, 8}, {"small", 6, 512, 8, 512, 8}};
  double tiny_step = 0;
  for (const Preset& p : presets) {
    if ((quick || tiny_only) && std::strcmp(p.name, "small") == 0) continue;
    bench::StepTimes t = bench::time_train_steps(p.config(vocab), p.B, quick ? 1 : 3, Device::CPU);
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
    const GPTConfig c = bench::gpt_config(12, 768, 12, 64, 50257);
    const int64_t B2 = 4;
    const double peak = bench::fma_peak_gflops(cpu::num_threads());
    bench::StepTimes t = bench::time_train_steps(c, B2, 2, Device::CPU);
    const double L = 12, C = 768, T = 64, V = 50257;
    const double per_token = 6.0 * (L * 12.0 * C * C + V * C) + 6.0 * L * T * C;
    const double gflops = per_token * static_cast<double>(B2 * c.block_size) / t.total() * 1e-9;
    gpt2_share = gflops / peak;
    std::printf("\ngpt2-124m shape (L 12, C 768, NH 12, V 50257, B 4, T 64): fwd %.3f s, bwd %.3f s, adamw %.3f s, step "
                "%.3f s\n  %.1f GFLOP/s of model FLOPs (%.1f GFLOP per step) against an FMA peak of %.1f GFLOP/s\n",
                t.fwd, t.bwd, t.opt, t.total(), gflops, per_token * static_cast<double>(B2 * c.block_size) * 1e-9,
                peak);
    bench::print_step_profile(c, B2, Device::CPU, 10, "where the gpt2-124m step's forward + backward go");
  }
  bench::print_step_profile(presets[0].config(vocab), presets[0].B, Device::CPU, quick ? 8 : 14,
                            "where the tiny step's forward + backward go");
  const int64_t B = 8, NH = 4, T = 512, HS = 64;
  double tf = time_attention(true, B, NH, T, HS, quick ? 1 : 3), tr = time_attention(false, B, NH, T, HS, quick ? 1 : 3);
  std::printf("\ncausal attention fwd+bwd at B %lld NH %lld T %lld HS %lld: fused %.4f s, composed reference %.4f s\n",
              (long long)B, (long long)NH, (long long)T, (long long)HS, tf, tr);
  // The gpt2-124m step's MLP activations: B 4 x T 64 x 4C 3072 values per layer.
  const int64_t n_gelu = 4 * 64 * 3072;
  const GeluTimes gt = time_gelu(n_gelu, quick ? 2 : 20);
  std::printf("gelu f32 forward + backward over %lld values: ours %.3f ms, libm erff/expf loops %.3f ms\n",
              (long long)n_gelu, gt.ours * 1e3, gt.libm * 1e3);
  std::printf("train gelu_speedup_vs_libm=%.2f\n", gt.libm / gt.ours);
  if (!quick) std::printf("train gpt2_124m_peak_share=%.3f\n", gpt2_share);
  std::printf("train tiny_step_s=%.3f attention fused_speedup_vs_reference=%.2f\n", tiny_step, tr / tf);
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_train", kUsage, argc, argv, bench_main); }
