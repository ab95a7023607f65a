// bench_gemm.cpp: GFLOP/s of our blocked GEMM (tensor/cpu/gemm.cpp) against the naive triple
// loop and OpenBLAS's cblas_sgemm, on the shapes a GPT-2-small-ish layer runs, in the three
// layouts a Linear layer needs: NT (forward, y = x W^T), NN (dx = g W) and TN (dW = g^T x).
// All three are measured in the same run with the same thread count; the last line is
//   gemm ratio_vs_openblas=<geometric mean over rows of ours / OpenBLAS>
// The naive loop is timed on the first rows of C only (it is ~100x slower); GFLOP/s is rate.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "bench/bench_main.h"
#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/rng.h"

#ifdef LANDMARK_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

using namespace lm;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call of f, averaged over one batch of calls lasting at least `min_s` seconds.
template <class Fn> double time_batch(Fn&& f, double min_s) {
  int iters = 0;
  double t0 = now(), t;
  do {
    f();
    ++iters;
    t = now();
  } while (t - t0 < min_s);
  return (t - t0) / iters;
}

// Best time of `reps` timed batches (after a warm-up call: first touch, packing buffers).
template <class Fn> double time_best(Fn&& f, double min_s = 0.25, int reps = 3) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) best = std::min(best, time_batch(f, min_s));
  return best;
}

// Two contenders timed in alternation, `rounds` batches each, best batch of each: a slow phase
// of the shared machine then hits both sides alike instead of one.
template <class F1, class F2> std::pair<double, double> time_alternating(F1&& f1, F2&& f2, int rounds) {
  f1();
  f2();
  double b1 = 1e30, b2 = 1e30;
  for (int r = 0; r < rounds; ++r) {
    b1 = std::min(b1, time_batch(f1, 0.08));
    b2 = std::min(b2, time_batch(f2, 0.08));
  }
  return {b1, b2};
}

struct Row {
  const char* layout;
  int64_t M, N, K;
  bool ta, tb;
};

}  // namespace

const char* kUsage =
    "usage: bench_gemm [--quick] [--blocks KC,MC,NC]\n  Prints GFLOP/s of ours, naive and OpenBLAS sgemm; thread count from OMP_NUM_THREADS.\n"
    "  --blocks  cache blocks to try instead of those derived from this CPU's cache sizes\n";

int bench_main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--blocks" && i + 1 < argc) {
      const std::string v = argv[++i];
      int kc = 0, mc = 0, nc = 0;
      char tail = 0;
      if (std::sscanf(v.c_str(), "%d,%d,%d%c", &kc, &mc, &nc, &tail) != 3)
        throw lm::bench::UsageError{"--blocks needs KC,MC,NC (three integers), got '" + v + "'"};
      try {
        cpu::set_gemm_blocks<float>(kc, mc, nc);
      } catch (const std::exception& e) {
        throw lm::bench::UsageError{std::string("--blocks: ") + e.what()};
      }
    }
    else if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      throw lm::bench::UsageError{"unknown flag '" + a + "'"};
    }
  }
  const int threads = cpu::num_threads();
#ifdef LANDMARK_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  cpu::GemmTiling tl = cpu::gemm_tiling<float>();
  const cpu::CacheSizes& caches = cpu::cache_sizes();
  bench::print_machine_line(threads, caches.l1d, caches.l2, caches.l3_per_core, caches.source.c_str());
  const double peak = bench::fma_peak_gflops(threads);
  std::printf("gemm benchmark: f32; tile MR=%d NR=%d, blocks KC=%d MC=%d NC=%d (from the cache sizes)\n", tl.mr, tl.nr,
              tl.kc, tl.mc, tl.nc);
  std::printf("FMA peak (probe): %.1f GFLOP/s on %d thread(s)\n", peak, threads);
  std::printf("idle threads sleep on both sides: OMP_WAIT_POLICY=%s, OPENBLAS_THREAD_TIMEOUT=%s\n",
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(unset)",
              std::getenv("OPENBLAS_THREAD_TIMEOUT") ? std::getenv("OPENBLAS_THREAD_TIMEOUT") : "(unset)");
  std::printf("layouts: NT = x W^T (forward), NN = g W (input grad), TN = g^T x (weight grad)\n\n");
  std::printf("%-6s %6s %6s %6s %12s %8s %12s %13s %10s\n", "layout", "M", "N", "K", "ours GF/s", "of peak", "naive GF/s",
              "OpenBLAS GF/s", "ours/BLAS");

  const int64_t shapes[][3] = {{4096, 768, 256}, {4096, 256, 256}, {4096, 1024, 256}, {4096, 256, 1024}, {2048, 2048, 2048}};
  std::vector<Row> rows;
  for (auto& s : shapes) {
    // For TN the product is dW (N_out x K_in) = g^T x with the token count as the inner dim.
    rows.push_back({"NT", s[0], s[1], s[2], false, true});
    rows.push_back({"NN", s[0], s[1], s[2], false, false});
    rows.push_back({"TN", s[1], s[2], s[0], true, false});
  }
  if (quick) rows.resize(3);

  manual_seed(1);
  double log_ratio_sum = 0, log_share_sum = 0;
  int n_ratio = 0;
  for (const Row& r : rows) {
    Tensor A = r.ta ? randn({r.K, r.M}) : randn({r.M, r.K});
    Tensor B = r.tb ? randn({r.N, r.K}) : randn({r.K, r.N});
    Tensor C = zeros({r.M, r.N});
    GemmArgs g;
    g.trans_a = r.ta;
    g.trans_b = r.tb;
    g.M = r.M;
    g.N = r.N;
    g.K = r.K;
    g.lda = r.ta ? r.M : r.K;
    g.ldb = r.tb ? r.K : r.N;
    g.ldc = r.N;
    const float* a = A.data<float>();
    const float* b = B.data<float>();
    float* c = C.data<float>();
    const double flops = 2.0 * r.M * r.N * r.K;

    auto ours = [&] { cpu::gemm_blocked<float>(g, a, b, c); };

    // Naive: the first few rows of C (row i of op(A) with all of op(B)); rate scales with rows.
    GemmArgs gn = g;
    gn.M = std::min<int64_t>(r.M, quick ? 8 : 16);
    double t_naive = time_best([&] { cpu::gemm_naive<float>(gn, a, b, c); }, 0.1, 1);
    double gf_naive = 2.0 * gn.M * r.N * r.K / t_naive * 1e-9;

#ifdef LANDMARK_HAVE_OPENBLAS
    auto blas = [&] {
      cblas_sgemm(CblasRowMajor, r.ta ? CblasTrans : CblasNoTrans, r.tb ? CblasTrans : CblasNoTrans, (int)r.M, (int)r.N,
                  (int)r.K, 1.0f, a, (int)g.lda, b, (int)g.ldb, 0.0f, c, (int)g.ldc);
    };
    const std::pair<double, double> t = time_alternating(ours, blas, quick ? 2 : 6);
    const double t_ours = t.first, t_blas = t.second;
    double gf_ours = flops / t_ours * 1e-9;
    double gf_blas = flops / t_blas * 1e-9;
    log_ratio_sum += std::log(gf_ours / gf_blas);
    ++n_ratio;
    log_share_sum += std::log(gf_ours / peak);
    std::printf("%-6s %6lld %6lld %6lld %12.1f %7.0f%% %12.2f %13.1f %10.2f\n", r.layout, (long long)r.M, (long long)r.N,
                (long long)r.K, gf_ours, 100 * gf_ours / peak, gf_naive, gf_blas, gf_ours / gf_blas);
#else
    double gf_ours = flops / time_best(ours) * 1e-9;
    log_share_sum += std::log(gf_ours / peak);
    std::printf("%-6s %6lld %6lld %6lld %12.1f %7.0f%% %12.2f %13s %10s\n", r.layout, (long long)r.M, (long long)r.N,
                (long long)r.K, gf_ours, 100 * gf_ours / peak, gf_naive, "n/a", "n/a");
#endif
    std::fflush(stdout);
  }
  std::printf("gemm peak_share=%.3f\n", std::exp(log_share_sum / static_cast<double>(rows.size())));
  if (n_ratio > 0) std::printf("gemm ratio_vs_openblas=%.3f\n", std::exp(log_ratio_sum / n_ratio));
  else std::printf("gemm ratio_vs_openblas=unavailable (OpenBLAS not found at configure time)\n");
  return 0;
}

int main(int argc, char** argv) {
  // Idle threads must sleep on both sides, or the side that just ran keeps a core spinning while
  // the other is timed: libgomp and OpenBLAS read these settings when they load, so the program
  // sets any that are missing and starts itself again. (Measured on a 2-vCPU machine: with
  // OpenBLAS's threads spinning for its default timeout, some of our rows ran at half speed.)
  if (!std::getenv("OMP_WAIT_POLICY") || !std::getenv("OPENBLAS_THREAD_TIMEOUT")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);  // spin 2^4 cycles, the least OpenBLAS allows
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "bench_gemm: note: could not restart with the sleep settings (%s); timing as is\n",
                 std::strerror(errno));
  }
  return lm::bench::run_bench_main("bench_gemm", kUsage, argc, argv, bench_main);
}
