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
#include <string>
#include <vector>

#include "bench/bench_main.h"
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

// Best time of `reps` timed batches, each running f until at least `min_s` seconds pass.
template <class Fn> double time_best(Fn&& f, double min_s = 0.25, int reps = 3) {
  f();  // warm-up (first-touch, packing buffers)
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    int iters = 0;
    double t0 = now(), t;
    do {
      f();
      ++iters;
      t = now();
    } while (t - t0 < min_s);
    best = std::min(best, (t - t0) / iters);
  }
  return best;
}

struct Row {
  const char* layout;
  int64_t M, N, K;
  bool ta, tb;
};

}  // namespace

const char* kUsage =
    "usage: bench_gemm [--quick]\n  Prints GFLOP/s of ours, naive and OpenBLAS sgemm; thread count from OMP_NUM_THREADS.\n";

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
  const int threads = cpu::num_threads();
#ifdef LANDMARK_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  cpu::GemmTiling tl = cpu::gemm_tiling<float>();
  std::printf("CPU: %s\n", bench::cpu_model().c_str());
  std::printf("gemm benchmark: f32, %d thread(s); tile MR=%d NR=%d, blocks KC=%d MC=%d NC=%d\n", threads, tl.mr, tl.nr,
              tl.kc, tl.mc, tl.nc);
  std::printf("layouts: NT = x W^T (forward), NN = g W (input grad), TN = g^T x (weight grad)\n\n");
  std::printf("%-6s %6s %6s %6s %12s %12s %12s %10s\n", "layout", "M", "N", "K", "ours GF/s", "naive GF/s",
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
  double log_ratio_sum = 0;
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

    double t_ours = time_best([&] { cpu::gemm_blocked<float>(g, a, b, c); });

    // Naive: the first few rows of C (row i of op(A) with all of op(B)); rate scales with rows.
    GemmArgs gn = g;
    gn.M = std::min<int64_t>(r.M, quick ? 8 : 16);
    double t_naive = time_best([&] { cpu::gemm_naive<float>(gn, a, b, c); }, 0.1, 1);
    double gf_naive = 2.0 * gn.M * r.N * r.K / t_naive * 1e-9;

    double gf_ours = flops / t_ours * 1e-9;
#ifdef LANDMARK_HAVE_OPENBLAS
    double t_blas = time_best([&] {
      cblas_sgemm(CblasRowMajor, r.ta ? CblasTrans : CblasNoTrans, r.tb ? CblasTrans : CblasNoTrans, (int)r.M, (int)r.N,
                  (int)r.K, 1.0f, a, (int)g.lda, b, (int)g.ldb, 0.0f, c, (int)g.ldc);
    });
    double gf_blas = flops / t_blas * 1e-9;
    log_ratio_sum += std::log(gf_ours / gf_blas);
    ++n_ratio;
    std::printf("%-6s %6lld %6lld %6lld %12.1f %12.2f %12.1f %10.2f\n", r.layout, (long long)r.M, (long long)r.N,
                (long long)r.K, gf_ours, gf_naive, gf_blas, gf_ours / gf_blas);
#else
    std::printf("%-6s %6lld %6lld %6lld %12.1f %12.2f %12s %10s\n", r.layout, (long long)r.M, (long long)r.N,
                (long long)r.K, gf_ours, gf_naive, "n/a", "n/a");
#endif
    std::fflush(stdout);
  }
  if (n_ratio > 0) std::printf("gemm ratio_vs_openblas=%.3f\n", std::exp(log_ratio_sum / n_ratio));
  else std::printf("gemm ratio_vs_openblas=unavailable (OpenBLAS not found at configure time)\n");
  return 0;
}

int main(int argc, char** argv) { return lm::bench::run_bench_main("bench_gemm", kUsage, argc, argv, bench_main); }
