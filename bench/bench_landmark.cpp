// bench_landmark.cpp: the cost of landmark attention. Fused landmark attention (forward +
// backward) against our fused causal attention at the paper's training shape (B 8, NH 4,
// T 512, HS 64, F 50), and against the composed reference (which builds a (B, T, T, T) tensor, so
// it runs at T 128). Same inputs, same thread count, one run. Last line:
//   landmark overhead_vs_causal=<fused landmark time / fused causal time>
#include <chrono>
#include <cstdio>
#include <string>

#include "autograd/functions.h"
#include "bench/bench_main.h"
#include "bench/bench_models.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "nn/functional.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/rng.h"

using namespace lm;

namespace {
template <class Fn> double best_of(int reps, Fn&& f) {
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = bench::now_s();
    f();
    best = std::min(best, bench::now_s() - t0);
  }
  return best;
}

double run(const std::string& which, int64_t B, int64_t NH, int64_t T, int64_t HS, int64_t F, int reps) {
  manual_seed(3);
  Tensor q = randn({B, NH, T, HS}), k = randn({B, NH, T, HS}), v = randn({B, NH, T, HS}), g = randn({B, NH, T, HS});
  Tensor kinds = bench::window_kinds(B, T, F);
  LandmarkLayout layout = make_layout(kinds);
  return best_of(reps, [&] {
    Var qv(q, true), kv(k, true), vv(v, true);
    Var y = which == "causal"     ? causal_attention(qv, kv, vv)
            : which == "landmark" ? landmark_attention(qv, kv, vv, layout)
                                  : landmark_attention_reference(qv, kv, vv, kinds);
    y.backward(g);
  });
}
}  // namespace

const char* kUsage =
    "usage: bench_landmark [--quick]\n  Fused landmark vs fused causal attention (fwd+bwd) and vs the composed reference.\n";

int bench_main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") reps = 1;
    else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown flag '" + a + "'"};
    }
  }
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  bench::print_machine_line(cpu::num_threads(), caches.l1d, caches.l2, caches.l3_per_core, caches.source.c_str());
  std::printf("landmark attention benchmark: f32, %d thread(s), forward + backward, best of %d\n", cpu::num_threads(), reps);
  const int64_t B = 8, NH = 4, T = 512, HS = 64, F = 50;
  double causal = run("causal", B, NH, T, HS, F, reps), landmark = run("landmark", B, NH, T, HS, F, reps);
  std::printf("B %lld NH %lld T %lld HS %lld F %lld: fused causal %.4f s, fused landmark %.4f s\n", (long long)B,
              (long long)NH, (long long)T, (long long)HS, (long long)F, causal, landmark);
  const int64_t Ts = 128;
  double small_landmark = run("landmark", B, NH, Ts, HS, F, reps), reference = run("reference", B, NH, Ts, HS, F, reps);
  std::printf("T %lld: fused landmark %.4f s, composed reference %.4f s (fused is %.1fx faster)\n", (long long)Ts,
              small_landmark, reference, reference / small_landmark);
  std::printf("landmark overhead_vs_causal=%.3f\n", landmark / causal);
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_landmark", kUsage, argc, argv, bench_main); }
