// test_cuda_sparse.cpp: CUDA equals CPU for top-k landmark attention (sparse/cuda/attention.cu
// against sparse/cpu/attention.cpp): the chosen blocks, the output, the left-out shares and the
// three gradients, both gate variants, several K. The CPU kernel is the oracle here; its math is
// tested against the dense op, the composed twin and finite differences in
// tests/test_sparse_attention.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "gpu_compare.h"
#include "landmark/layout.h"
#include "landmark/tokens.h"
#include "sparse/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::gputest;

namespace {
// Three batch rows: blocks of 4 regular tokens, ragged blocks of 1, 6, 2 and 9, and blocks of 7.
Tensor three_layouts(int64_t T) {
  std::vector<int32_t> all;
  for (const std::vector<int>& lens : {std::vector<int>{4}, std::vector<int>{1, 6, 2, 9}, std::vector<int>{7}}) {
    std::vector<int32_t> k(static_cast<size_t>(T), kRegular);
    int64_t t = 0;
    for (size_t g = 0;; ++g) {
      t += lens[g % lens.size()];
      if (t >= T) break;
      k[t++] = kLandmark;
    }
    all.insert(all.end(), k.begin(), k.end());
  }
  return from_vector(all, {3, T});
}
}  // namespace

TEST_CASE("cuda: top-k landmark attention, forward and backward, both gate variants", "[cuda][sparse]") {
  // Tolerances: the CUDA kernel sums a row's dot products in another order than the CPU's
  // vectorised ones, and its backward adds into dk and dv with atomics (no fixed order): f32
  // 1e-4 relative (sums of up to ~70 O(1) terms), f64 1e-10. Not yet measured on a GPU.
  manual_seed(901);
  for (DType dt : {DType::F64, DType::F32})
    for (bool all_gates : {false, true})
      for (int64_t K : {1, 3, 100}) {
        const int64_t T = 70, HS = 8, NH = 2;
        Tensor kinds = three_layouts(T);
        const int64_t BH = kinds.size(0) * NH;
        INFO("dtype " << dtype_name(dt) << ", gates " << (all_gates ? "all" : "chosen") << ", K " << K);
        const LandmarkLayout Lc = make_layout(kinds), Lg = make_layout(kinds, kGpu);
        const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
        Tensor q = randn({BH, T, HS}, dt), k = randn({BH, T, HS}, dt), v = randn({BH, T, HS}, dt),
               dout = randn({BH, T, HS}, dt);
        Tensor chosen({BH, T, K}, DType::I32), m({BH, T}, dt), out({BH, T, HS}, dt);
        Tensor chosen_g = full({BH, T, K}, -7, DType::I32, kGpu), mg = full({BH, T}, NAN, dt, kGpu),
               outg = full({BH, T, HS}, NAN, dt, kGpu);
        LM_KERNEL(Device::CPU, sparse_landmark_forward, q, k, v, Lc.kind, Lc.block_of, Lc.block_start, K, all_gates,
                  scale, chosen, m, out);
        LM_KERNEL(kGpu, sparse_landmark_forward, to_gpu(q), to_gpu(k), to_gpu(v), Lg.kind, Lg.block_of,
                  Lg.block_start, K, all_gates, scale, chosen_g, mg, outg);
        const Tol tol = tol_for(dt, {1e-4, 1e-5}, {1e-10, 1e-12});
        require_equal(chosen, chosen_g, "sparse chosen blocks");
        require_close(m, mg, tol.rtol, tol.atol, "sparse left-out share");
        require_close(out, outg, tol.rtol, tol.atol, "sparse out");
        Tensor dq({BH, T, HS}, dt), dk({BH, T, HS}, dt), dv({BH, T, HS}, dt);
        Tensor dqg = full({BH, T, HS}, NAN, dt, kGpu), dkg = full({BH, T, HS}, NAN, dt, kGpu),
               dvg = full({BH, T, HS}, NAN, dt, kGpu);
        LM_KERNEL(Device::CPU, sparse_landmark_backward, q, k, v, Lc.kind, Lc.block_of, Lc.block_start, K, all_gates,
                  chosen, dout, scale, dq, dk, dv);
        LM_KERNEL(kGpu, sparse_landmark_backward, to_gpu(q), to_gpu(k), to_gpu(v), Lg.kind, Lg.block_of,
                  Lg.block_start, K, all_gates, to_gpu(chosen), to_gpu(dout), scale, dqg, dkg, dvg);
        require_close(dq, dqg, tol.rtol, tol.atol, "sparse dq");
        require_close(dk, dkg, tol.rtol, tol.atol, "sparse dk");
        require_close(dv, dvg, tol.rtol, tol.atol, "sparse dv");
      }
}
