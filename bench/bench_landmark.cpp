// bench_landmark.cpp: the cost of landmark attention. Fused landmark attention (forward +
// backward) against our fused causal attention at the paper's training shape (B 8, NH 4,
// T 512, HS 64, F 50), and against the composed reference (which builds a (B, T, T, T) tensor, so
// it runs at T 128). Same inputs, same thread count, one run. Then training with the cache: the
// top-k op (sparse/attention.h, K 4, F 50, Gates::Chosen) against the dense landmark op at long
// windows (B 1, NH 2, HS 64; the dense op only where its T x T probabilities fit in half the free
// memory), the crossover T where the sparse op starts to win, and the tokens per second of a
// whole training step of a tiny model, dense against sparse. Lines:
//   landmark sparse_train_speedup_at_<T>=<dense op time / sparse op time>
//   landmark sparse_crossover_T=<smallest T of 256, 512, ... where sparse is faster>
//   landmark sparse_step_tokens_per_s_at_<T>=<dense>/<sparse>
//   landmark overhead_vs_causal=<fused landmark time / fused causal time>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "autograd/functions.h"
#include "bench/bench_main.h"
#include "bench/bench_models.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "nn/functional.h"
#include "sparse/attention.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/rng.h"

using namespace lm;

namespace {
template <class Fn>
double best_of(int reps, Fn&& f) {
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = bench::now_s();
    f();
    best = std::min(best, bench::now_s() - t0);
  }
  return best;
}

constexpr int64_t kSparseK = 4;

double run(const std::string& which, int64_t B, int64_t NH, int64_t T, int64_t HS, int64_t F, int reps) {
  manual_seed(3);
  Tensor q = randn({B, NH, T, HS}), k = randn({B, NH, T, HS}), v = randn({B, NH, T, HS}), g = randn({B, NH, T, HS});
  Tensor kinds = bench::window_kinds(B, T, F);
  LandmarkLayout layout = make_layout(kinds);
  SparseOptions sparse;
  sparse.top_k = kSparseK;
  return best_of(reps, [&] {
    Var qv(q, true), kv(k, true), vv(v, true);
    Var y = which == "causal"     ? causal_attention(qv, kv, vv)
            : which == "landmark" ? landmark_attention(qv, kv, vv, layout)
            : which == "sparse"   ? sparse_landmark_attention(qv, kv, vv, layout, sparse)
                                  : landmark_attention_reference(qv, kv, vv, kinds);
    y.backward(g);
  });
}

// Free memory as the kernel reports it (MemAvailable), 0 when unknown.
double available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (f >> key)
    if (key == "MemAvailable:") {
      f >> kb;
      break;
    }
  return kb * 1024;
}

// Tokens per second of training steps (forward with the loss, backward) of a tiny landmark model at
// window T, through the dense landmark core or the top-k one. The best of `reps` after a warm-up.
double step_tokens_per_s(int64_t T, bool sparse, int reps) {
  manual_seed(1);
  GPTConfig c = bench::gpt_config(2, 128, 4, T, 256);
  c.landmark_every = 50;
  GPT model(c);
  const int64_t B = 1;
  Tensor idx = rand({B, T}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32);
  Tensor tgt = rand({B, T}, DType::F64, Device::CPU, 0, c.vocab_size).to(DType::I32);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  Tensor positions = from_vector(pos, {B, T});
  LandmarkLayout layout = make_layout(bench::window_kinds(B, T, 50));
  SparseOptions so;
  so.top_k = kSparseK;
  AttentionFn core = sparse ? sparse_attention_core(layout, so) : landmark_attention_core(layout);
  const double s = best_of(reps, [&] {
    model.zero_grad();
    model.loss(idx, tgt, positions, -100, core).backward();
  });
  return static_cast<double>(B * T) / s;
}

void sparse_section(int reps, bool quick) {
  const int64_t NH = 2, HS = 64, F = 50;
  std::printf(
      "\ntraining with the cache: top-k op (K %lld, gates chosen) vs dense landmark op, fwd+bwd, B 1, NH %lld, "
      "HS %lld, F %lld\n",
      (long long)kSparseK, (long long)NH, (long long)HS, (long long)F);
  int64_t crossover = 0;
  for (int64_t T = 256; T <= 4096; T *= 2) {
    const double d = run("landmark", 1, NH, T, HS, F, reps), sp = run("sparse", 1, NH, T, HS, F, reps);
    std::printf("T %6lld: dense %.4f s, sparse %.4f s, ratio %.2f\n", (long long)T, d, sp, d / sp);
    if (crossover == 0 && sp < d) crossover = T;
  }
  std::printf("landmark sparse_crossover_T=%lld\n", (long long)crossover);
  const std::vector<int64_t> lengths =
      quick ? std::vector<int64_t>{2048, 8192} : std::vector<int64_t>{2048, 8192, 32768, 65536};
  for (int64_t T : lengths) {
    const double sp = run("sparse", 1, NH, T, HS, F, reps);
    const double dense_bytes = 4.0 * NH * static_cast<double>(T) * static_cast<double>(T);  // f32 P'
    const double avail = available_bytes();
    if (avail > 0 && dense_bytes > avail / 2) {
      std::printf("T %6lld: sparse %.4f s; the dense op needs %.1f GB for P' and %.1f GB is free: not run\n",
                  (long long)T, sp, dense_bytes / 1e9, avail / 1e9);
      continue;
    }
    const double d = run("landmark", 1, NH, T, HS, F, T >= 32768 ? 1 : reps);
    std::printf("T %6lld: dense %.4f s, sparse %.4f s\n", (long long)T, d, sp);
    std::printf("landmark sparse_train_speedup_at_%lldk=%.2f\n", (long long)(T / 1024), d / sp);
  }
  for (int64_t T : {2048, 8192}) {
    const double d = step_tokens_per_s(T, false, reps), sp = step_tokens_per_s(T, true, reps);
    std::printf(
        "landmark sparse_step_tokens_per_s_at_%lldk=%.0f/%.0f (dense/sparse, tiny model: 2 layers, C 128, "
        "NH 4)\n",
        (long long)(T / 1024), d, sp);
  }
}
}  // namespace

const char* kUsage =
    "usage: bench_landmark [--quick]\n  Fused landmark vs fused causal attention (fwd+bwd) and vs the composed "
    "reference.\n";

int bench_main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      reps = 1;
    else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown flag '" + a + "'"};
    }
  }
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  bench::print_machine_line(cpu::num_threads(), caches.l1d, caches.l2, caches.l3_per_core, caches.source.c_str());
  std::printf("landmark attention benchmark: f32, %d thread(s), forward + backward, best of %d\n", cpu::num_threads(),
              reps);
  const int64_t B = 8, NH = 4, T = 512, HS = 64, F = 50;
  double causal = run("causal", B, NH, T, HS, F, reps), landmark = run("landmark", B, NH, T, HS, F, reps);
  std::printf("B %lld NH %lld T %lld HS %lld F %lld: fused causal %.4f s, fused landmark %.4f s\n", (long long)B,
              (long long)NH, (long long)T, (long long)HS, (long long)F, causal, landmark);
  const int64_t Ts = 128;
  double small_landmark = run("landmark", B, NH, Ts, HS, F, reps), reference = run("reference", B, NH, Ts, HS, F, reps);
  std::printf("T %lld: fused landmark %.4f s, composed reference %.4f s (fused is %.1fx faster)\n", (long long)Ts,
              small_landmark, reference, reference / small_landmark);
  sparse_section(reps, reps == 1);
  std::printf("landmark overhead_vs_causal=%.3f\n", landmark / causal);
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_landmark", kUsage, argc, argv, bench_main); }
