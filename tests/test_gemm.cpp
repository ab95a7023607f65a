// test_gemm.cpp: the blocked GEMM (tensor/cpu/gemm.cpp) against the naive triple loop and an FMA
// chain (results must not depend on the cache blocks), the blocks' derivation from cache sizes
// (tensor/cpu/cache_info.cpp), and, on shapes
// that hit every edge (partial tiles, K not a multiple of the KC block, N beyond one NC block),
// all transpose combinations, batches, a shared B, alpha/beta; and the matmul front's layouts.
#include "tests/helpers.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "tensor/cpu/cache_info.h"
#include "tensor/cpu/gemm.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;
namespace fs = std::filesystem;

namespace {
// Relative error of blocked vs naive (naive accumulates in f64). For f32 with K terms of unit
// variance, blocked f32 accumulation error grows like sqrt(K) * 2^-24 * |terms|.
template <class Scalar> double gemm_error(GemmArgs g, uint64_t seed) {
  manual_seed(seed);
  DType dt = dtype_of<Scalar>();
  int64_t a_rows = g.trans_a ? g.K : g.M, a_cols = g.trans_a ? g.M : g.K;
  int64_t b_rows = g.trans_b ? g.N : g.K, b_cols = g.trans_b ? g.K : g.N;
  g.lda = a_cols;
  g.ldb = b_cols;
  g.ldc = g.N;
  g.stride_a = a_rows * a_cols;
  g.stride_b = g.stride_b == 0 ? 0 : b_rows * b_cols;
  g.stride_c = g.M * g.N;
  Tensor A = randn({g.batch, a_rows, a_cols}, dt);
  Tensor B = randn({g.stride_b == 0 ? 1 : g.batch, b_rows, b_cols}, dt);
  Tensor C0 = randn({g.batch, g.M, g.N}, dt);
  Tensor C1 = C0.clone(), C2 = C0.clone();
  cpu::gemm_blocked<Scalar>(g, A.data<Scalar>(), B.data<Scalar>(), C1.data<Scalar>());
  cpu::gemm_naive<Scalar>(g, A.data<Scalar>(), B.data<Scalar>(), C2.data<Scalar>());
  return max_abs_diff(C1, C2) / std::sqrt(static_cast<double>(std::max<int64_t>(g.K, 1)));
}
}  // namespace

TEST_CASE("gemm: blocked equals naive on edge shapes and all transposes (f32, f64)", "[gemm]") {
  cpu::GemmTiling t = cpu::gemm_tiling<float>();
  const int64_t shapes[][3] = {{1, 1, 1},   {7, 5, 3},   {t.mr, t.nr, 1},       {t.mr + 1, t.nr + 1, t.kc + 1},
                               {37, 70, 129}, {2 * t.mc + 3, 45, 9}, {5, t.nc + 17, 20}, {64, 64, 2 * t.kc + 5}};
  uint64_t seed = 100;
  for (auto& s : shapes)
    for (int tr = 0; tr < 4; ++tr) {
      GemmArgs g;
      g.M = s[0];
      g.N = s[1];
      g.K = s[2];
      g.trans_a = tr & 1;
      g.trans_b = tr & 2;
      INFO("M=" << g.M << " N=" << g.N << " K=" << g.K << " ta=" << g.trans_a << " tb=" << g.trans_b);
      CHECK(gemm_error<float>(g, ++seed) < 1e-5);   // ~ a few f32 ulps per sqrt(K) of magnitude
      CHECK(gemm_error<double>(g, ++seed) < 1e-13); // ~ a few f64 ulps
    }
}

TEST_CASE("gemm: batches, shared B, alpha and beta", "[gemm]") {
  GemmArgs g;
  g.M = 33;
  g.N = 40;
  g.K = 17;
  g.batch = 5;
  g.stride_b = 1;  // per-batch B (gemm_error fills in the real stride)
  CHECK(gemm_error<float>(g, 1) < 1e-5);
  g.stride_b = 0;  // one B shared by every batch
  CHECK(gemm_error<float>(g, 2) < 1e-5);
  g.alpha = 0.5;
  g.beta = 2.0;  // accumulate into the existing C
  CHECK(gemm_error<double>(g, 3) < 1e-13);
  g.batch = 64;  // many small matrices: the batch-parallel path
  g.M = g.N = g.K = 8;
  CHECK(gemm_error<float>(g, 4) < 1e-5);
  g.K = 0;  // C = beta * C
  g.batch = 1;
  CHECK(gemm_error<double>(g, 5) == 0);
}

TEST_CASE("gemm: beta = 0 never reads C (NaN in C does not leak)", "[gemm]") {
  GemmArgs g;
  g.M = 20;
  g.N = 40;
  g.K = 8;
  g.lda = 8;
  g.ldb = 40;
  g.ldc = 40;
  Tensor A = ones({20, 8}), B = ones({8, 40}), C = full({20, 40}, NAN);
  cpu::gemm_blocked<float>(g, A.data<float>(), B.data<float>(), C.data<float>());
  CHECK(max_abs_diff(C, full({20, 40}, 8.0)) == 0);
}

TEST_CASE("matmul: hand-worked 2x3 times 3x2", "[gemm]") {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(values(matmul(a, b)) == std::vector<double>{58, 64, 139, 154});
  CHECK(values(matmul(b, a, true, true)) == std::vector<double>{58, 139, 64, 154});  // (ab)^T = b^T a^T
}

TEST_CASE("matmul: transposed views and flags agree with explicit copies", "[gemm]") {
  manual_seed(21);
  Tensor a = randn({4, 6, 5}, DType::F64), b = randn({4, 5, 7}, DType::F64), w = randn({7, 5}, DType::F64);
  Tensor ref = matmul(a, b);
  // A transposed view is handed to GEMM with a flipped flag instead of being copied.
  Tensor at = a.transpose(1, 2).contiguous();  // (4, 5, 6) storage
  CHECK(max_abs_diff(matmul(at.transpose(1, 2), b), ref) < 1e-13);
  CHECK(max_abs_diff(matmul(at, b, true, false), ref) < 1e-13);
  Tensor bt = b.transpose(1, 2).contiguous();
  CHECK(max_abs_diff(matmul(a, bt, false, true), ref) < 1e-13);
  // Shared 2-d weight (Linear: x W^T) against a per-batch loop.
  Tensor y = matmul(a.narrow(2, 0, 5), w, false, true);  // (4, 6, 7)
  for (int64_t bi = 0; bi < 4; ++bi)
    CHECK(max_abs_diff(y.select(0, bi), matmul(a.select(0, bi), w.transpose(0, 1).contiguous())) < 1e-13);
  // A non-contiguous view that is not a transpose (a narrow) is copied first and still right.
  Tensor an = randn({6, 9}, DType::F64).narrow(1, 2, 5);
  CHECK(max_abs_diff(matmul(an, b.select(0, 0)), matmul(an.contiguous(), b.select(0, 0))) == 0);
}

TEST_CASE("matmul: errors name the shapes", "[gemm]") {
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4, 5})), Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({3, 3, 2})), Catch::Contains("batch"));
  CHECK_THROWS_AS(matmul(zeros({3}), zeros({3, 2})), Error);
  CHECK_THROWS_AS(matmul(zeros({2, 3}, DType::I32), zeros({3, 2}, DType::I32)), Error);
  CHECK_THROWS_AS(matmul(zeros({2, 3}), zeros({3, 2}, DType::F64)), Error);
  CHECK(matmul(zeros({0, 3}), zeros({3, 2})).shape() == Shape{0, 2});
}

namespace {
// The independent answer for the chain property: per element, one fused multiply-add after
// another in k order from zero (std::fma rounds once, as the micro-kernel's FMAs do), then alpha.
template <class Scalar> std::vector<Scalar> fma_chain(const GemmArgs& g, const Scalar* A, const Scalar* B) {
  std::vector<Scalar> C(static_cast<size_t>(g.M * g.N));
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      Scalar acc = 0;
      for (int64_t k = 0; k < g.K; ++k)
        acc = std::fma(g.trans_a ? A[k * g.lda + i] : A[i * g.lda + k], g.trans_b ? B[j * g.ldb + k] : B[k * g.ldb + j], acc);
      C[i * g.N + j] = g.alpha == 1.0 ? acc : static_cast<Scalar>(g.alpha) * acc;
    }
  return C;
}

template <class Scalar> void check_blocks_do_not_change_results() {
  cpu::GemmTiling t = cpu::gemm_tiling<Scalar>();
  const int mr = t.mr, nr = t.nr;
  // Blocks from tiny (many K slices, row blocks and NC blocks) to the cache-derived ones.
  const int blocks[][3] = {{7, mr, nr}, {16, 2 * mr, 2 * nr}, {64, 5 * mr, 4 * nr}, {t.kc, t.mc, t.nc}};
  const int64_t shapes[][3] = {{5, 3, 1}, {13, 70, 129}, {37, 33, 100}, {70, 2 * nr + 3, 45}};
  uint64_t seed = 700;
  for (auto& s : shapes)
    for (int tr = 0; tr < 4; ++tr)
      for (double alpha : {1.0, 0.375}) {
        GemmArgs g;
        g.M = s[0];
        g.N = s[1];
        g.K = s[2];
        g.trans_a = tr & 1;
        g.trans_b = tr & 2;
        g.alpha = alpha;
        g.lda = g.trans_a ? g.M : g.K;
        g.ldb = g.trans_b ? g.K : g.N;
        g.ldc = g.N;
        manual_seed(++seed);
        const DType dt = dtype_of<Scalar>();
        Tensor A = randn({g.M * g.K}, dt), B = randn({g.K * g.N}, dt), C0 = randn({g.M * g.N}, dt);
        const std::vector<Scalar> want = fma_chain<Scalar>(g, A.data<Scalar>(), B.data<Scalar>());
        std::vector<Scalar> with_beta;  // beta = 1: the same for every blocking, checked below
        for (auto& b : blocks) {
          INFO("M=" << g.M << " N=" << g.N << " K=" << g.K << " ta=" << g.trans_a << " tb=" << g.trans_b
                    << " alpha=" << alpha << " blocks kc=" << b[0] << " mc=" << b[1] << " nc=" << b[2]);
          cpu::set_gemm_blocks<Scalar>(b[0], b[1], b[2]);
          Tensor C = C0.clone();
          g.beta = 0.0;
          cpu::gemm_blocked<Scalar>(g, A.data<Scalar>(), B.data<Scalar>(), C.data<Scalar>());
          // Bit for bit: the blocks change which loop runs when, never an element's sum. (Where the
          // build has no FMA instructions the kernel's chain rounds twice per step; then only the
          // equality across blockings below is checked.)
#if defined(__FMA__) || defined(__aarch64__)
          CHECK(std::vector<Scalar>(C.data<Scalar>(), C.data<Scalar>() + g.M * g.N) == want);
#endif
          Tensor Cb = C0.clone();
          g.beta = 1.0;
          cpu::gemm_blocked<Scalar>(g, A.data<Scalar>(), B.data<Scalar>(), Cb.data<Scalar>());
          std::vector<Scalar> got(Cb.data<Scalar>(), Cb.data<Scalar>() + g.M * g.N);
          if (with_beta.empty()) with_beta = got;
          CHECK(got == with_beta);
          // And against the f64 naive product: a few ulps per sqrt(K), as in gemm_error above.
          Tensor Cn = C0.clone();
          cpu::gemm_naive<Scalar>(g, A.data<Scalar>(), B.data<Scalar>(), Cn.data<Scalar>());
          CHECK(max_abs_diff(Cb, Cn) / std::sqrt(static_cast<double>(g.K)) < (sizeof(Scalar) == 4 ? 1e-5 : 1e-13));
        }
      }
  cpu::set_gemm_blocks<Scalar>(0, 0, 0);
  CHECK(cpu::gemm_tiling<Scalar>().kc == t.kc);
  CHECK(cpu::gemm_tiling<Scalar>().mc == t.mc);
}
}  // namespace

TEST_CASE("gemm: the cache blocks never change a result (each element is one FMA chain in k order)", "[gemm]") {
  // Threads split rows and columns differently under each blocking too; 1 thread and the
  // machine's count both run in CI (tests/cli scripts set OMP_NUM_THREADS for some runs).
  check_blocks_do_not_change_results<float>();
  check_blocks_do_not_change_results<double>();
  CHECK_THROWS_WITH(cpu::set_gemm_blocks<float>(0, 7, 32), Catch::Contains("kc 0"));
  CHECK_THROWS_WITH(cpu::set_gemm_blocks<float>(64, cpu::gemm_tiling<float>().mr + 1, 32),
                    Catch::Contains("multiple of"));
}

TEST_CASE("gemm: block sizes derived from cache sizes (hand-worked)", "[gemm]") {
  const cpu::GemmTiling t = cpu::gemm_tiling<float>();
  const int64_t bytes_per_b_row = int64_t(t.nr) * 4;
  // A Zen 4 core: 32 KiB L1d, 1 MiB L2, 32 MiB L3 shared by 8 cores.
  cpu::CacheSizes zen4{32 << 10, 1 << 20, 4 << 20, "test"};
  cpu::GemmTiling z = cpu::gemm_tiling_for<float>(zen4);
  // KC: L2 / 8 per B micro-panel of NR floats, a multiple of 8, within [128, 1024].
  CHECK(z.kc == std::min<int64_t>(1024, (1 << 20) / 8 / bytes_per_b_row / 8 * 8));
  // MC: 3/8 of L2 for the MC x KC block of A, a multiple of MR.
  CHECK(z.mc == std::max<int64_t>(4 * t.mr, (3 << 20) / 8 / (int64_t(z.kc) * 4) / t.mr * t.mr));
  CHECK(z.mc % t.mr == 0);
  // NC: half of the core's L3 share for the KC x NC slice of B, a multiple of NR.
  CHECK(z.nc == std::clamp<int64_t>((2 << 20) / (int64_t(z.kc) * 4) / t.nr * t.nr, 4 * t.nr, 16384 / t.nr * t.nr));
  // A small L2 (64 KiB) gives shallower slices whatever the vector width (with 16-byte vectors,
  // NR 8, a 256 KiB L2 already reaches the 1024 cap, as the sanitizer build showed); the clamps
  // hold for absurd reports.
  cpu::GemmTiling small = cpu::gemm_tiling_for<float>(cpu::CacheSizes{32 << 10, 64 << 10, 1 << 20, "test"});
  CHECK(small.kc == std::max<int64_t>(128, (64 << 10) / 8 / bytes_per_b_row / 8 * 8));
  CHECK(small.kc < z.kc);
  cpu::GemmTiling tiny = cpu::gemm_tiling_for<float>(cpu::CacheSizes{1, 1, 1, "test"});
  CHECK(tiny.kc == 128);
  CHECK(tiny.mc == 4 * t.mr);
  CHECK(tiny.nc == 4 * t.nr);
  cpu::GemmTiling huge = cpu::gemm_tiling_for<float>(cpu::CacheSizes{1 << 30, 1 << 30, 1 << 30, "test"});
  CHECK(huge.kc == 1024);
  CHECK(huge.mc <= 8192);
  CHECK(huge.nc <= 16384);
}

TEST_CASE("cache sizes: sysfs files, sizes and CPU lists parsed, and this machine's figures in range", "[gemm]") {
  CHECK(cpu::parse_cache_size("32K") == 32768);
  CHECK(cpu::parse_cache_size("1024K") == 1048576);
  CHECK(cpu::parse_cache_size("2M") == 2097152);
  CHECK(cpu::parse_cache_size("512") == 512);
  CHECK(cpu::parse_cache_size("32K\n") == 32768);
  CHECK(cpu::parse_cache_size("") == -1);
  CHECK(cpu::parse_cache_size("K") == -1);
  CHECK(cpu::parse_cache_size("32KB") == -1);
  CHECK(cpu::parse_cache_size("99999999999999999999K") == -1);
  CHECK(cpu::count_cpu_list("0") == 1);
  CHECK(cpu::count_cpu_list("0-1") == 2);
  CHECK(cpu::count_cpu_list("0-3,8,10-11") == 7);
  CHECK(cpu::count_cpu_list("") == -1);
  CHECK(cpu::count_cpu_list("3-1") == -1);
  CHECK(cpu::count_cpu_list("a-b") == -1);
  CHECK(cpu::count_cpu_list("1,,2") == -1);

  // A hand-made sysfs directory: L1d 48K, L1i (ignored), L2 2M, L3 30M shared by 0-5,12-17.
  fs::path dir = fresh_temp_dir("gemm_sysfs_cache");
  auto index = [&](int i, const char* level, const char* type, const char* size, const char* shared) {
    const fs::path d = dir / ("index" + std::to_string(i));
    fs::create_directories(d);
    const char* names[] = {"level", "type", "size", "shared_cpu_list"};
    const char* texts[] = {level, type, size, shared};
    for (int f = 0; f < 4; ++f) write_text_file(d / names[f], std::string(texts[f]) + "\n");
  };
  index(0, "1", "Data", "48K", "0,12");
  index(1, "1", "Instruction", "32K", "0,12");
  index(2, "2", "Unified", "2048K", "0,12");
  index(3, "3", "Unified", "30M", "0-5,12-17");
  cpu::CacheSizes c = cpu::read_sysfs_caches(dir.string());
  CHECK(c.l1d == 48 * 1024);
  CHECK(c.l2 == 2 * 1024 * 1024);
  CHECK(c.l3_per_core == 30 * 1024 * 1024 / 12);
  CHECK(cpu::read_sysfs_caches((dir / "absent").string()).l1d == 0);
  fs::remove_all(dir);

  const cpu::CacheSizes& here = cpu::cache_sizes();
  CHECK(here.l1d >= 16 * 1024);
  CHECK(here.l1d <= 256 * 1024);
  CHECK(here.l2 >= 128 * 1024);
  CHECK(here.l3_per_core >= 256 * 1024);
  CHECK((here.source == "sysfs" || here.source == "sysconf" || here.source == "assumed"));
}
