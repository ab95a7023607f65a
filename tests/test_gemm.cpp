// test_gemm.cpp: the blocked GEMM (tensor/cpu/gemm.cpp) against the naive triple loop, on shapes
// that hit every edge (partial tiles, K not a multiple of the KC block, N beyond one NC block),
// all transpose combinations, batches, a shared B, alpha/beta; and the matmul front's layouts.
#include "tests/helpers.h"

#include "tensor/cpu/gemm.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

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
