// test_cuda_landmark.cpp: CUDA equals CPU for the fused landmark attention (the CUDA kernels in
// landmark/cuda/attention.cu against their CPU twin, landmark/cpu/attention.cpp): P', the output
// and all three gradients, the autograd op on strided inputs, and landmark_attention_weights. Not
// a test of the math: the CPU twin is checked against the definition, the composed reference and
// finite differences in tests/test_landmark_attention.cpp; here the CPU is the oracle.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "gpu_compare.h"
#include "landmark/attention.h"
#include "landmark/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::gputest;

namespace {
const DType kFloatTypes[] = {DType::F32, DType::F64};

// Which landmarks are controlled (gated by the CMT, Appendix D) rather than free.
enum class Gate { Free, Controlled, Alternating };

// One batch row of T kinds: a CMT at position 0 when `cmt`, then blocks whose regular-token
// counts cycle through `lens`, each closed by a landmark; the last block stays open unless T
// ends exactly on a landmark. Empty `lens`: no landmarks (plain causal attention).
std::vector<int32_t> kinds_row(int64_t T, bool cmt, const std::vector<int>& lens, Gate gate) {
  std::vector<int32_t> k(static_cast<size_t>(T), kRegular);
  int64_t t = 0;
  if (cmt && T > 0) k[t++] = kContextMiss;
  if (lens.empty()) return k;
  for (size_t g = 0;; ++g) {
    t += lens[g % lens.size()];
    if (t >= T) break;
    const bool controlled = gate == Gate::Controlled || (gate == Gate::Alternating && g % 2 == 1);
    k[t++] = controlled ? kControlledLandmark : kLandmark;
  }
  return k;
}

// Five batch rows with five layouts, so a head reading another batch row's layout (the h / NH
// mapping) gives wrong rows: plain causal; free landmarks every 4 tokens; a CMT with free and
// controlled landmarks alternating; a CMT with only controlled landmarks; ragged blocks of
// 1, 6, 2 and 9 regular tokens (a one-token block is the smallest group there is).
Tensor five_layouts(int64_t T) {
  const std::vector<std::vector<int32_t>> rows = {
      kinds_row(T, false, {}, Gate::Free), kinds_row(T, false, {4}, Gate::Free),
      kinds_row(T, true, {3}, Gate::Alternating), kinds_row(T, true, {5}, Gate::Controlled),
      kinds_row(T, false, {1, 6, 2, 9}, Gate::Free)};
  std::vector<int32_t> all;
  for (const std::vector<int32_t>& r : rows) all.insert(all.end(), r.begin(), r.end());
  return from_vector(all, {static_cast<int64_t>(rows.size()), T});
}

// Every element strictly above the diagonal of each (T, T) matrix of p (BH, T, T) is exactly 0.
void require_zero_above_diagonal(const Tensor& p, const std::string& what) {
  const int64_t T = p.size(1);
  const std::vector<double> v = p.to_double_vector();
  int64_t nonzero = 0;
  for (size_t e = 0; e < v.size(); ++e) {
    const int64_t i = static_cast<int64_t>(e) / T % T, j = static_cast<int64_t>(e) % T;
    if (j > i && v[e] != 0.0) ++nonzero;
  }
  INFO(what << ": " << nonzero << " entries above the diagonal are not 0");
  REQUIRE(nonzero == 0);
}

// Tolerances, shared by the tests below. The scores are sums of HS products grouped differently
// by cuBLAS and the CPU GEMM, then exp (CUDA's expf and glibc's are each within 2 ulp) and the
// group sums (in a different order; no fused multiply-add on either side). Each P' entry then
// differs by a few f32 ulps relative; a weight is at most a product of three of them. Measured
// with the CPU twin as f32 against f64 on these shapes and layouts (up to T = 1000, HS = 64), one
// device's own error is below 4.1e-7 (P') and 8.8e-7 (out, entries up to ~3.5), and never more
// than 1.9e-7 beyond 1e-4 relative; f64 scales that by its smaller epsilon (~2e-9). A wrong
// layout row, a mis-strided GEMM or a missed mask is off by > 1e-3. On the H100 and H200
// (2026-11-27) every comparison of this file used at most 3.1% of its tolerance (f32); the
// margin is kept for GPUs whose cuBLAS kernels group the sums differently.
Tol forward_tol(DType dt) { return tol_for(dt, {1e-4, 1e-5}, {1e-11, 1e-13}); }
// dS subtracts sums of similar size (G - delta, G - a_g), so its absolute error is that of
// G = dout v^T (~eps |dout| |v| sqrt(HS)); dq and dk sum up to T of those. Same measurement: one
// device's f32 error is below 2.8e-6 (entries up to ~10) and never more than 2.9e-7 beyond 1e-4
// relative; the atol leaves two devices' worth of that a 50x margin.
Tol backward_tol(DType dt) { return tol_for(dt, {1e-4, 3e-5}, {1e-10, 1e-12}); }
}  // namespace

TEST_CASE("cuda: fused landmark attention kernels, forward and backward, five layouts",
          "[cuda][landmark][attention]") {
  manual_seed(301);
  // T = 1 (a lone query; the CMT rows are then only the CMT), odd sizes, T = 65 across the CPU's
  // 64-row blocks, T = 300 (rows longer than a warp's 32 lanes, several groups per lane pass) and
  // T = 1030 (three query tiles of the CUDA kernels at the default 512 rows, the last shorter;
  // gpu-check.sh runs this test again with 100-row tiles).
  const std::vector<std::vector<int64_t>> shapes = {{1, 8}, {7, 16}, {23, 4}, {65, 16}, {300, 32}, {1030, 16}};
  for (DType dt : kFloatTypes) {
    for (const std::vector<int64_t>& th : shapes) {
      const int64_t T = th[0], HS = th[1], NH = 2;
      Tensor kinds = five_layouts(T);
      const int64_t B = kinds.size(0), BH = B * NH;
      INFO("dtype " << dtype_name(dt) << ", T = " << T << ", HS = " << HS);
      const LandmarkLayout Lc = make_layout(kinds), Lg = make_layout(kinds, kGpu);
      const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
      Tensor q = randn({BH, T, HS}, dt), k = randn({BH, T, HS}, dt), v = randn({BH, T, HS}, dt);
      Tensor dout = randn({BH, T, HS}, dt);
      Tensor qg = to_gpu(q), kg = to_gpu(k), vg = to_gpu(v), doutg = to_gpu(dout);

      // The GPU outputs start as NaN: every element, the masked triangle included, must be written.
      Tensor probs({BH, T, T}, dt), out({BH, T, HS}, dt);
      Tensor probsg = full({BH, T, T}, NAN, dt, kGpu), outg = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(Device::CPU, landmark_attention_forward, q, k, v, Lc.kind, Lc.block_of, Lc.block_start, Lc.cmt, scale,
                0.0 /* no CMT cutoff */, probs, out);
      LM_KERNEL(kGpu, landmark_attention_forward, qg, kg, vg, Lg.kind, Lg.block_of, Lg.block_start, Lg.cmt, scale,
                0.0 /* no CMT cutoff */, probsg, outg);
      const Tol tf = forward_tol(dt);
      require_close(probs, probsg, tf.rtol, tf.atol, "landmark P'");
      require_zero_above_diagonal(probsg, "landmark P' on cuda");
      require_close(out, outg, tf.rtol, tf.atol, "landmark out");
      // Without probs (what training on CUDA does: P' is not kept) the output is the same bits.
      Tensor out_np = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(kGpu, landmark_attention_forward, qg, kg, vg, Lg.kind, Lg.block_of, Lg.block_start, Lg.cmt, scale,
                0.0 /* no CMT cutoff */, Tensor(), out_np);
      require_equal(outg.to(Device::CPU), out_np, "landmark out, cuda without probs");

      // Backward from the same saved P', so only the backward kernels are compared.
      Tensor dq({BH, T, HS}, dt), dk({BH, T, HS}, dt), dv({BH, T, HS}, dt);
      Tensor dqg = full({BH, T, HS}, NAN, dt, kGpu), dkg = full({BH, T, HS}, NAN, dt, kGpu),
             dvg = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(Device::CPU, landmark_attention_backward, q, k, v, Lc.kind, Lc.block_of, Lc.block_start, Lc.cmt, probs,
                dout, scale, dq, dk, dv);
      LM_KERNEL(kGpu, landmark_attention_backward, qg, kg, vg, Lg.kind, Lg.block_of, Lg.block_start, Lg.cmt,
                to_gpu(probs), doutg, scale, dqg, dkg, dvg);
      const Tol tb = backward_tol(dt);
      require_close(dv, dvg, tb.rtol, tb.atol, "landmark dv");
      require_close(dq, dqg, tb.rtol, tb.atol, "landmark dq");
      require_close(dk, dkg, tb.rtol, tb.atol, "landmark dk");

      // No atomics and fixed reduction orders: a second run gives the same bits.
      Tensor probs2 = full({BH, T, T}, NAN, dt, kGpu), out2 = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(kGpu, landmark_attention_forward, qg, kg, vg, Lg.kind, Lg.block_of, Lg.block_start, Lg.cmt, scale,
                0.0 /* no CMT cutoff */, probs2, out2);
      require_equal(probsg.to(Device::CPU), probs2, "landmark P', second cuda run");
      require_equal(outg.to(Device::CPU), out2, "landmark out, second cuda run");
      Tensor dq2 = full({BH, T, HS}, NAN, dt, kGpu), dk2 = full({BH, T, HS}, NAN, dt, kGpu),
             dv2 = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(kGpu, landmark_attention_backward, qg, kg, vg, Lg.kind, Lg.block_of, Lg.block_start, Lg.cmt,
                to_gpu(probs), doutg, scale, dq2, dk2, dv2);
      require_equal(dqg.to(Device::CPU), dq2, "landmark dq, second cuda run");
      require_equal(dkg.to(Device::CPU), dk2, "landmark dk, second cuda run");
      require_equal(dvg.to(Device::CPU), dv2, "landmark dv, second cuda run");
    }
  }
}

TEST_CASE("cuda: landmark_attention through autograd, strided inputs", "[cuda][landmark]") {
  manual_seed(302);
  for (DType dt : kFloatTypes) {
    const int64_t NH = 3, T = 41, HS = 8;
    Tensor kinds = five_layouts(T);
    const int64_t B = kinds.size(0);
    INFO("dtype " << dtype_name(dt));
    const LandmarkLayout Lc = make_layout(kinds), Lg = make_layout(kinds, kGpu);
    // q, k, v enter as (B, T, NH, HS) transposed to (B, NH, T, HS): the front makes them
    // contiguous on both devices.
    Tensor q = randn({B, T, NH, HS}, dt), k = randn({B, T, NH, HS}, dt), v = randn({B, T, NH, HS}, dt);
    Tensor g = randn({B, NH, T, HS}, dt);
    Var qc(q, true), kc(k, true), vc(v, true), qg(to_gpu(q), true), kg(to_gpu(k), true), vg(to_gpu(v), true);
    Var yc = landmark_attention(transpose(qc, 1, 2), transpose(kc, 1, 2), transpose(vc, 1, 2), Lc);
    Var yg = landmark_attention(transpose(qg, 1, 2), transpose(kg, 1, 2), transpose(vg, 1, 2), Lg);
    // As in the kernel test above (T = 41 here).
    const Tol tf = forward_tol(dt), tb = backward_tol(dt);
    require_close(yc.value(), yg.value(), tf.rtol, tf.atol, "landmark_attention");
    yc.backward(g);
    yg.backward(to_gpu(g));
    require_close(qc.grad(), qg.grad(), tb.rtol, tb.atol, "landmark_attention dq");
    require_close(kc.grad(), kg.grad(), tb.rtol, tb.atol, "landmark_attention dk");
    require_close(vc.grad(), vg.grad(), tb.rtol, tb.atol, "landmark_attention dv");
    // A host layout with device inputs is refused by the front, before any kernel runs.
    Tensor qh = to_gpu(randn({B, NH, T, HS}, dt));
    CHECK_THROWS_WITH(landmark_attention(Var(qh), Var(qh), Var(qh), Lc), Catch::Contains("layout on cpu"));
  }
}

TEST_CASE("cuda: landmark_attention_weights", "[cuda][landmark]") {
  manual_seed(303);
  for (DType dt : kFloatTypes) {
    for (int64_t T : {9, 70}) {
      const int64_t NH = 2, HS = 8;
      Tensor kinds = five_layouts(T);
      const int64_t B = kinds.size(0);
      INFO("dtype " << dtype_name(dt) << ", T = " << T);
      Tensor q = randn({B, NH, T, HS}, dt), k = randn({B, NH, T, HS}, dt);
      Tensor W = landmark_attention_weights(q, k, make_layout(kinds));
      Tensor Wg = landmark_attention_weights(to_gpu(q), to_gpu(k), make_layout(kinds, kGpu));
      // W is P' expanded on the host by the same row function, so it inherits P's tolerance.
      const Tol tf = forward_tol(dt);
      require_close(W, Wg, tf.rtol, tf.atol, "landmark_attention_weights");
      require_zero_above_diagonal(Wg.to(Device::CPU).view({B * NH, T, T}), "landmark weights on cuda");
    }
  }
}
