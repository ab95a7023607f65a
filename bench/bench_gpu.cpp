// bench_gpu.cpp: our CUDA path's speed, for the side-by-side comparison with PyTorch on the same
// card (scripts/bench_gpu.sh runs this and bench/pytorch_gpu.py in one go and prints the ratios).
//   1. one training step (forward with the loss, backward, AdamW) of the tiny and small presets
//      and of GPT-2 124M's shape at batch 4, sequence 1024, f32, standard causal attention;
//   2. attention forward + backward at T 512..4096 (B 4, NH 8, HS 64): our fused causal
//      attention and our fused landmark attention (a landmark after every 50 tokens).
// Each time is the best of a few runs after a warm-up, with the device synchronised before and
// after each timed phase. Lines meant for the script start with "gpu " and hold key=value pairs.
// Without a CUDA device it says so and exits 77 (what the tests' skip code means, too).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "bench/bench_main.h"
#include "bench/bench_models.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "tensor/create.h"
#include "tensor/rng.h"
#include "tensor/storage.h"

using namespace lm;

namespace {
double time_attention(bool landmark, int64_t B, int64_t NH, int64_t T, int64_t HS, int reps) {
  manual_seed(3);
  const Device d = Device::CUDA;
  Tensor q = randn({B, NH, T, HS}).to(d), k = randn({B, NH, T, HS}).to(d), v = randn({B, NH, T, HS}).to(d),
         g = randn({B, NH, T, HS}).to(d);
  LandmarkLayout layout = make_layout(bench::window_kinds(B, T, 50), d);
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    Var qv(q, true), kv(k, true), vv(v, true);
    cuda_synchronize();
    const double t0 = bench::now_s();
    Var y = landmark ? landmark_attention(qv, kv, vv, layout) : causal_attention(qv, kv, vv);
    y.backward(g);
    cuda_synchronize();
    if (r > 0) best = std::min(best, bench::now_s() - t0);
  }
  return best;
}
}  // namespace

const char* kUsage =
    "usage: bench_gpu [--quick]\n  Our CUDA path: training steps (tiny, small, GPT-2 124M at B 4, T 1024) and causal and landmark\n"
    "  attention forward + backward at T 512..4096, f32. scripts/bench_gpu.sh compares them with PyTorch.\n"
    "  --quick  the tiny preset and T 512 only, one timed run each\n";

int bench_main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown flag '" + a + "'"};
    }
  }
  if (cuda_device_count() == 0) {
    std::printf("bench_gpu: skipped, no CUDA device: %s\n", cuda_unavailable_reason().c_str());
    return 77;
  }
  std::printf("gpu device=\"%s\"\n", cuda_device_description().c_str());
  const int reps = quick ? 1 : 3;
  struct Preset {
    const char* name;
    int64_t L, C, NH, T, B, V;
    GPTConfig config() const { return bench::gpt_config(L, C, NH, T, V); }
  };
  const Preset presets[] = {{"tiny", 4, 256, 4, 512, 8, 4096},
                            {"small", 6, 512, 8, 512, 8, 4096},
                            {"gpt2-124m", 12, 768, 12, 1024, 4, 50257}};
  std::printf("training step, f32, best of %d after a warm-up (seconds)\n", reps);
  for (const Preset& p : presets) {
    if (quick && std::string(p.name) != "tiny") continue;
    const bench::StepTimes t = bench::time_train_steps(p.config(), p.B, reps, Device::CUDA);
    std::printf("gpu train preset=%s L=%lld C=%lld NH=%lld T=%lld B=%lld V=%lld fwd=%.5f bwd=%.5f adamw=%.5f step=%.5f "
                "tokens_per_s=%.0f\n",
                p.name, (long long)p.L, (long long)p.C, (long long)p.NH, (long long)p.T, (long long)p.B, (long long)p.V,
                t.fwd, t.bwd, t.opt, t.total(), static_cast<double>(p.B * p.T) / t.total());
    std::fflush(stdout);
  }
  if (!quick) {
    const Preset& gpt2 = presets[2];
    bench::print_step_profile(gpt2.config(), gpt2.B, Device::CUDA, 16,
                              "where the GPT-2 124M step's forward + backward go on the GPU");
    std::fflush(stdout);
  }
  const int64_t B = 4, NH = 8, HS = 64;
  std::printf("attention forward + backward, f32, B %lld NH %lld HS %lld, best of %d after a warm-up (seconds)\n",
              (long long)B, (long long)NH, (long long)HS, reps + 2);
  for (int64_t T : {512, 1024, 2048, 4096}) {
    if (quick && T > 512) continue;
    const double causal = time_attention(false, B, NH, T, HS, reps + 2);
    const double landmark = time_attention(true, B, NH, T, HS, reps + 2);
    std::printf("gpu attention T=%lld causal=%.6f landmark=%.6f\n", (long long)T, causal, landmark);
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_gpu", kUsage, argc, argv, bench_main); }
