// test_cuda_layers.cpp: CUDA equals CPU for matmul (cuBLAS against the blocked CPU GEMM), the
// embedding gather and its scatter-add backward, concat, fused layer norm and fused
// cross-entropy, forward and backward, including their error paths. Elementwise ops,
// reductions and softmax are in test_cuda_ops.cpp.
#include <catch2/catch.hpp>

#include <vector>

#include "gpu_compare.h"

using namespace lm;
using namespace lm::gputest;

namespace {
const DType kFloatTypes[] = {DType::F32, DType::F64};

// f32 GEMMs sum K products in different orders and groupings (cuBLAS tiles, the CPU's FMA
// micro-kernel): with randn inputs each entry is ~sqrt(K) in size and differs by ~eps * K at
// worst. A layout bug (wrong transpose, stride or ld) gives O(1) errors instead.
Tol gemm_tol(DType dt) { return tol_for(dt, {1e-4, 1e-4}, {1e-11, 1e-11}); }

void check_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, const std::string& what) {
  Tol t = gemm_tol(a.dtype());
  require_close(matmul(a, b, ta, tb), matmul(to_gpu(a), to_gpu(b), ta, tb), t.rtol, t.atol, what);
}
}  // namespace

TEST_CASE("cuda: matmul, transposed, batched and with a shared B", "[cuda][matmul]") {
  for (DType dt : kFloatTypes) {
    for (const std::vector<int64_t>& mkn : std::vector<std::vector<int64_t>>{{5, 7, 3}, {64, 129, 33}, {1, 40, 1}}) {
      const int64_t M = mkn[0], K = mkn[1], N = mkn[2];
      Tensor a = randn({M, K}, dt), b = randn({K, N}, dt);
      Tensor at = randn({K, M}, dt), bt = randn({N, K}, dt);
      check_matmul(a, b, false, false, "A B");
      check_matmul(at, b, true, false, "A^T B");
      check_matmul(a, bt, false, true, "A B^T");
      check_matmul(at, bt, true, true, "A^T B^T");
      // Transposed views are handed to GEMM in place with flipped flags (ops_matmul.cpp).
      check_matmul(at.transpose(0, 1), bt.transpose(0, 1), false, false, "views of transposes");
      // Batched (3-d and 4-d), and a 2-d B shared by every batch (stride_b == 0).
      Tensor a3 = randn({4, M, K}, dt), b3 = randn({4, K, N}, dt), a4 = randn({2, 3, M, K}, dt);
      check_matmul(a3, b3, false, false, "batched");
      check_matmul(a3, b3.transpose(1, 2).contiguous(), false, true, "batched B^T");
      check_matmul(a4, randn({2, 3, K, N}, dt), false, false, "4-d batched");
      check_matmul(a4, b, false, false, "shared B");
      check_matmul(a4, bt, false, true, "shared B^T");
      check_matmul(randn({4, K, M}, dt), b, true, false, "batched A^T, shared B");
    }
    // K = 0: an empty sum, so the product is all zeros on both devices.
    require_equal(matmul(zeros({3, 0}, dt), zeros({0, 4}, dt)),
                  matmul(zeros({3, 0}, dt, kGpu), zeros({0, 4}, dt, kGpu)), "K = 0");
  }
}

TEST_CASE("cuda: embedding and its backward", "[cuda][index]") {
  for (DType dt : kFloatTypes) {
    Tensor w = randn({10, 6}, dt);
    Tensor idx = from_vector(std::vector<int32_t>{3, 0, 9, 3, 3, 7, 0, 1, 9, 3, 2, 5}, {3, 4});
    // A gather copies values: exact.
    require_equal(embedding(w, idx), embedding(to_gpu(w), to_gpu(idx)), "embedding");
    // Both devices add the rows of each index in position order with plain adds: exact too.
    Tensor g = randn({3, 4, 6}, dt);
    require_equal(embedding_backward(g, idx, 10), embedding_backward(to_gpu(g), to_gpu(idx), 10), "embedding_backward");
    // Non-contiguous indices and gradients are made contiguous by the front.
    Tensor idx_t = idx.transpose(0, 1), g_t = g.transpose(0, 1);
    require_equal(embedding(w, idx_t), embedding(to_gpu(w), to_gpu(idx).transpose(0, 1)), "embedding, strided idx");
    require_equal(embedding_backward(g_t, idx_t, 12),
                  embedding_backward(to_gpu(g).transpose(0, 1), to_gpu(idx).transpose(0, 1), 12),
                  "embedding_backward, strided");
    // Many positions, long runs of one token and a large vocabulary (the CUDA backward sorts the
    // positions by token on the token's 16 significant bits, then sums each run in position
    // order): still exact.
    Tensor many = rand({5000}, DType::F64, Device::CPU, 0, 300).to(DType::I32), gm = randn({5000, 20}, dt);
    require_equal(embedding_backward(gm, many, 50257), embedding_backward(to_gpu(gm), to_gpu(many), 50257),
                  "embedding_backward, 5000 positions, vocabulary 50257");
    // An out-of-range index is reported with its position, on CUDA as on the CPU.
    Tensor bad = from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 10, -1}, {7});
    REQUIRE_THROWS_WITH(embedding(w, bad), Catch::Contains("at position 5"));
    REQUIRE_THROWS_WITH(embedding(to_gpu(w), to_gpu(bad)), Catch::Contains("at position 5"));
    Tensor neg = from_vector(std::vector<int32_t>{1, -1}, {2});
    REQUIRE_THROWS_WITH(embedding(to_gpu(w), to_gpu(neg)), Catch::Contains("at position 1"));
  }
}

TEST_CASE("cuda: concat along every dim", "[cuda][index]") {
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    Tensor a = small_ints({2, 3, 4}, dt), b = small_ints({2, 3, 4}, dt);
    for (int64_t d : {0, 1, 2, -1}) {
      Tensor c = small_ints(d == 0 ? Shape{1, 3, 4} : d == 1 ? Shape{2, 2, 4} : Shape{2, 3, 5}, dt);
      // Copies only: exact. b enters as a non-contiguous view.
      Tensor bv = b.transpose(0, 1).contiguous().transpose(0, 1);
      require_equal(concat({a, bv, c}, d), concat({to_gpu(a), to_gpu(b).transpose(0, 1).contiguous().transpose(0, 1),
                                                   to_gpu(c)}, d),
                    "concat");
    }
  }
}

TEST_CASE("cuda: layer norm forward and backward", "[cuda][nn]") {
  for (DType dt : kFloatTypes) {
    for (const Shape& s : std::vector<Shape>{{6, 33}, {2, 3, 300}, {2, 1024}, {300, 40}}) {
      const int64_t C = s.back();
      Tensor x = add(mul(randn(s, dt), 3.0), 5.0);  // |mean| > std: the two-pass variance matters
      Tensor w = randn({C}, dt), b = randn({C}, dt), g = randn(s, dt);
      LayerNormResult r = layernorm(x, w, b, 1e-5);
      LayerNormResult gr = layernorm(to_gpu(x), to_gpu(w), to_gpu(b), 1e-5);
      // Mean and variance are summed in f64 on both devices (different order), then rounded to the
      // dtype, which may land on the neighbouring f32 value; the output rounds each step the same
      // way on both (no fused multiply-add on either side). H100 and H200: exact on these shapes
      // (docs/results/gpu/h100-comparisons.tsv); the tolerance covers the rare ulp of mean/rstd.
      Tol tf = tol_for(dt, {1e-5, 1e-5}, {1e-12, 1e-12});
      require_close(r.mean, gr.mean, tf.rtol, tf.atol, "layernorm mean");
      require_close(r.rstd, gr.rstd, tf.rtol, tf.atol, "layernorm rstd");
      require_close(r.out, gr.out, tf.rtol, tf.atol, "layernorm out");
      // Backward from the same saved statistics, so only the backward kernels are compared.
      // Row sums are in the input dtype (CPU in order, CUDA in a tree). Column sums (dw, db): the
      // CPU adds rows in order in the input dtype; CUDA in f64, over chunks of rows and then the
      // chunks (300 rows: 5 chunks of 60), rounding once. So f32 differs by the CPU's own
      // rounding: a numpy replay of the CPU's f32 sums against f64 on these shapes (20 seeds)
      // used at most 36% of (1e-4, 1e-5); the H100 and H200 runs used 6.5% (dw and db, 300 rows).
      LayerNormGrads d = layernorm_backward(g, x, w, r.mean, r.rstd);
      LayerNormGrads gd = layernorm_backward(to_gpu(g), to_gpu(x), to_gpu(w), to_gpu(r.mean), to_gpu(r.rstd));
      Tol tb = tol_for(dt, {1e-4, 1e-5}, {1e-11, 1e-12});
      require_close(d.dx, gd.dx, tb.rtol, tb.atol, "layernorm dx");
      require_close(d.dw, gd.dw, tb.rtol, tb.atol, "layernorm dw");
      require_close(d.db, gd.db, tb.rtol, tb.atol, "layernorm db");
    }
  }
}

TEST_CASE("cuda: cross-entropy forward and backward, with ignored rows", "[cuda][nn]") {
  for (DType dt : kFloatTypes) {
    // Sums of exp over a row in the input dtype (sequential on the CPU, a tree on CUDA): the
    // relative error of the sum, ~eps * sqrt(V) typically and eps * V at worst, becomes an
    // absolute error of the loss (through the log) and a relative one of the gradient.
    Tol t = tol_for(dt, {1e-5, 1e-5}, {1e-12, 1e-12});
    Tol tg = tol_for(dt, {1e-4, 1e-6}, {1e-12, 1e-13});
    for (const std::vector<int64_t>& nv : std::vector<std::vector<int64_t>>{{8, 11}, {5, 3000}}) {
      const int64_t N = nv[0], V = nv[1];
      Tensor logits = mul(randn({N, V}, dt), 2.0);
      std::vector<int32_t> tv(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) tv[n] = static_cast<int32_t>((n * 7 + 3) % V);
      tv[1] = -100;  // the default ignore index
      tv[N - 1] = 3;
      Tensor targets = from_vector(tv, {N});
      Tensor gl = to_gpu(logits), gtarg = to_gpu(targets);
      for (int64_t ignore : {int64_t(-100), int64_t(3)}) {
        if (ignore == 3) {  // ignore a real class; -100 is then an out-of-range target
          tv[1] = 0;
          targets = from_vector(tv, {N});
          gtarg = to_gpu(targets);
        }
        require_close(cross_entropy(logits, targets, ignore), cross_entropy(gl, gtarg, ignore), t.rtol, t.atol, "ce");
        require_close(cross_entropy_backward(logits, targets, 0.7, ignore),
                      cross_entropy_backward(gl, gtarg, 0.7, ignore), tg.rtol, tg.atol, "ce backward");
        // From the forward's statistics (what autograd does): the bits of the GPU's own plain
        // backward, and the CPU's within the same tolerance.
        CrossEntropyResult rg = cross_entropy_with_stats(gl, gtarg, ignore);
        require_equal(cross_entropy_backward(gl, gtarg, 0.7, ignore).to(Device::CPU),
                      cross_entropy_backward(gl, gtarg, 0.7, ignore, rg), "ce backward from statistics, cuda");
        require_close(cross_entropy_backward(logits, targets, 0.7, ignore, cross_entropy_with_stats(logits, targets, ignore)),
                      cross_entropy_backward(gl, gtarg, 0.7, ignore, rg), tg.rtol, tg.atol, "ce backward from statistics");
      }
      // Every row ignored: loss 0 and gradient 0, not NaN.
      Tensor none = full({N}, -100.0, DType::I32);
      require_equal(cross_entropy(logits, none), cross_entropy(gl, to_gpu(none)), "ce all ignored");
      require_equal(cross_entropy_backward(logits, none, 1.0), cross_entropy_backward(gl, to_gpu(none), 1.0),
                    "ce backward all ignored");
      // An out-of-range target (not the ignore index) names its row on both devices.
      std::vector<int32_t> badv(static_cast<size_t>(N), 0);
      badv[2] = static_cast<int32_t>(V);
      Tensor bad = from_vector(badv, {N});
      REQUIRE_THROWS_WITH(cross_entropy(logits, bad), Catch::Contains("in row 2"));
      REQUIRE_THROWS_WITH(cross_entropy(gl, to_gpu(bad)), Catch::Contains("in row 2"));
      REQUIRE_THROWS_AS(cross_entropy_backward(gl, to_gpu(bad), 1.0), lm::Error);
    }
  }
}
