// test_cuda_nn.cpp: CUDA equals CPU for nn/'s fused kernels (rotary embedding, causal attention
// forward and backward, the AdamW step) and for one whole GPT training step (loss, every gradient,
// clipping, the updated parameters) from identical weights and batch. Not a test of the math: the
// CPU twins (nn/cpu/*.cpp) are checked against composed references, finite differences and the
// written-out AdamW formula in tests/test_nn_functional.cpp; here the CPU is the oracle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "gpu_compare.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/kernels.h"
#include "nn/optim.h"
#include "tensor/dispatch.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::gputest;

namespace {
const DType kFloatTypes[] = {DType::F32, DType::F64};

// A fresh host copy (never aliasing t, even when t is already on the CPU).
Tensor host_copy(const Tensor& t) { return t.device() == Device::CPU ? t.clone() : t.to(Device::CPU); }

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_double_vector()) m = std::max(m, std::fabs(x));
  return m;
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

Tensor random_tokens(int64_t B, int64_t T, int64_t V) {
  return rand({B, T}, DType::F64, Device::CPU, 0, static_cast<double>(V)).to(DType::I32);
}
}  // namespace

TEST_CASE("cuda: rotary embedding, forward and inverse, shared and per-batch positions", "[cuda][nn]") {
  manual_seed(201);
  for (DType dt : kFloatTypes) {
    const int64_t B = 2, NH = 3, T = 7, HS = 10;
    Tensor x = randn({B, NH, T, HS}, dt);
    Tensor pos = from_vector(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 40, 41, 42, 43, 44, 45, 46}, {B, T});
    RotaryTables shared = rotary_tables(T, HS, 10000.0, dt, Device::CPU);
    RotaryTables shared_gpu = rotary_tables(T, HS, 10000.0, dt, kGpu);
    RotaryTables per_batch = rotary_tables(pos, HS, 10000.0, dt, Device::CPU);
    RotaryTables per_batch_gpu = rotary_tables(pos, HS, 10000.0, dt, kGpu);
    // Tolerance 0: the tables are made on the host and copied, and both devices rotate with
    // nnmath::rotate_pair, whose products and sums are rounded one by one (no FMA on either side).
    for (bool inverse : {false, true}) {
      require_equal(rotary(x, shared, inverse), rotary(to_gpu(x), shared_gpu, inverse), "rotary, shared positions");
      require_equal(rotary(x, per_batch, inverse), rotary(to_gpu(x), per_batch_gpu, inverse),
                    "rotary, per-batch positions");
    }
    // A strided view (heads and time swapped) is made contiguous by the front on both devices.
    Tensor xt = randn({B, T, NH, HS}, dt);
    require_equal(rotary(xt.transpose(1, 2), shared), rotary(to_gpu(xt).transpose(1, 2), shared_gpu),
                  "rotary of a transposed view");
    // The differentiable form: its backward is the inverse rotation, so gradients are exact too.
    Tensor g = randn({B, NH, T, HS}, dt);
    Var xc(x, true), xg(to_gpu(x), true);
    rotary(xc, per_batch).backward(g);
    rotary(xg, per_batch_gpu).backward(to_gpu(g));
    require_equal(xc.grad(), xg.grad(), "rotary backward");
  }
}

TEST_CASE("cuda: fused causal attention kernels, forward and backward", "[cuda][nn][attention]") {
  manual_seed(202);
  // T = 1 (a lone query), odd sizes, T spanning several of the CPU's 64-row blocks, and T above
  // the 256 threads of a softmax block (so threads loop over a row). On CUDA the GEMMs are cut
  // into row tiles of 512 (tensor/cuda/attention_tiles.h): one tile up to T = 512, three at
  // T = 1030 (the last one shorter). gpu-check.sh also runs this test with
  // LM_CUDA_ATTENTION_TILE=100 (three tiles at T = 300, eleven at 1030).
  const std::vector<std::vector<int64_t>> shapes = {{1, 16}, {7, 16}, {64, 8}, {150, 16}, {300, 32}, {1030, 16}};
  for (DType dt : kFloatTypes) {
    for (const std::vector<int64_t>& th : shapes) {
      const int64_t BH = 5, T = th[0], HS = th[1];
      INFO("dtype " << dtype_name(dt) << ", T = " << T << ", HS = " << HS);
      const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
      Tensor q = randn({BH, T, HS}, dt), k = randn({BH, T, HS}, dt), v = randn({BH, T, HS}, dt);
      Tensor dout = randn({BH, T, HS}, dt);
      Tensor qg = to_gpu(q), kg = to_gpu(k), vg = to_gpu(v), doutg = to_gpu(dout);

      // The kernels themselves, so the saved probabilities can be compared too. The GPU outputs
      // start as NaN: every element, the masked triangle included, must be written.
      Tensor probs({BH, T, T}, dt), out({BH, T, HS}, dt);
      Tensor probsg = full({BH, T, T}, NAN, dt, kGpu), outg = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(Device::CPU, causal_attention_forward, q, k, v, scale, probs, out);
      LM_KERNEL(kGpu, causal_attention_forward, qg, kg, vg, scale, probsg, outg);
      // Scores are sums of HS products (cuBLAS and the CPU's FMA micro-kernel group them
      // differently), then exp (CUDA's expf and glibc's are each within 2 ulp) and a row sum (in
      // order on the CPU, as a tree on CUDA): each probability differs by a few f32 ulps relative.
      // The output sums up to T of them times randn values. The error of one device alone,
      // measured on the CPU as f32 vs f64 for these shapes: below 3e-7 (probs) and 6e-7 (out); f64
      // errors are ~1e-9 of those. A transposed or mis-strided GEMM, or a wrong mask, is off by
      // > 1e-3. On the H100 and H200 (2026-11-27) this test used at most 1.2% of its tolerances.
      const Tol tf = tol_for(dt, {1e-4, 1e-5}, {1e-11, 1e-13});
      require_close(probs, probsg, tf.rtol, tf.atol, "attention probs");
      require_zero_above_diagonal(probsg, "attention probs on cuda");
      require_close(out, outg, tf.rtol, tf.atol, "attention out");

      // Backward from the same saved probabilities, so only the backward kernels are compared.
      Tensor dq({BH, T, HS}, dt), dk({BH, T, HS}, dt), dv({BH, T, HS}, dt);
      Tensor dqg = full({BH, T, HS}, NAN, dt, kGpu), dkg = full({BH, T, HS}, NAN, dt, kGpu),
             dvg = full({BH, T, HS}, NAN, dt, kGpu);
      LM_KERNEL(Device::CPU, causal_attention_backward, q, k, v, probs, dout, scale, dq, dk, dv);
      LM_KERNEL(kGpu, causal_attention_backward, qg, kg, vg, to_gpu(probs), doutg, scale, dqg, dkg, dvg);
      // dS = P (dP - rowsum(P dP)) subtracts two sums of similar size, so its absolute error is
      // that of dP (~eps * |dout| |v| sqrt(HS)); dq and dk sum T of those. Same measurement as
      // above: one device's f32 error is below 2e-6 (entries up to ~2 in size) at T = 300.
      const Tol tb = tol_for(dt, {1e-4, 2e-5}, {1e-10, 1e-12});
      require_close(dv, dvg, tb.rtol, tb.atol, "attention dv");
      require_close(dq, dqg, tb.rtol, tb.atol, "attention dq");
      require_close(dk, dkg, tb.rtol, tb.atol, "attention dk");
    }
  }
}

TEST_CASE("cuda: causal_attention through autograd, strided inputs", "[cuda][nn][attention]") {
  manual_seed(203);
  for (DType dt : kFloatTypes) {
    const int64_t B = 2, NH = 3, T = 33, HS = 8;
    // q, k, v enter as (B, T, NH, HS) transposed to (B, NH, T, HS): the front makes them contiguous.
    Tensor q = randn({B, T, NH, HS}, dt), k = randn({B, T, NH, HS}, dt), v = randn({B, T, NH, HS}, dt);
    Tensor g = randn({B, NH, T, HS}, dt);
    Var qc(q, true), kc(k, true), vc(v, true), qg(to_gpu(q), true), kg(to_gpu(k), true), vg(to_gpu(v), true);
    auto attend = [](const Var& a, const Var& b, const Var& c) {
      return causal_attention(transpose(a, 1, 2), transpose(b, 1, 2), transpose(c, 1, 2));
    };
    Var yc = attend(qc, kc, vc), yg = attend(qg, kg, vg);
    // As in the kernel test above (T = 33 here).
    const Tol tf = tol_for(dt, {1e-4, 1e-5}, {1e-11, 1e-13}), tb = tol_for(dt, {1e-4, 2e-5}, {1e-10, 1e-12});
    require_close(yc.value(), yg.value(), tf.rtol, tf.atol, "causal_attention");
    yc.backward(g);
    yg.backward(to_gpu(g));
    require_close(qc.grad(), qg.grad(), tb.rtol, tb.atol, "causal_attention dq");
    require_close(kc.grad(), kg.grad(), tb.rtol, tb.atol, "causal_attention dk");
    require_close(vc.grad(), vg.grad(), tb.rtol, tb.atol, "causal_attention dv");
  }
}

TEST_CASE("cuda: packed q/k/v heads and attention through autograd", "[cuda][nn][attention]") {
  manual_seed(205);
  for (DType dt : kFloatTypes) {
    const int64_t B = 2, NH = 3, T = 140, HS = 8;
    Tensor x = randn({B, T, 3 * NH * HS}, dt), g = randn({B, NH, T, HS}, dt);
    Var xc(x, true), xg(to_gpu(x), true);
    Var hc = qkv_heads(xc, NH, rotary_tables(T, HS, 10000.0, dt, Device::CPU));
    Var hg = qkv_heads(xg, NH, rotary_tables(T, HS, 10000.0, dt, kGpu));
    // The packing is a copy and the rotation rotate_pair on both devices: equal bits.
    require_equal(hc.value(), hg.value(), "qkv_heads");
    Var yc = causal_attention_packed(hc), yg = causal_attention_packed(hg);
    // As in the kernel test above.
    const Tol tf = tol_for(dt, {1e-4, 1e-5}, {1e-11, 1e-13}), tb = tol_for(dt, {1e-4, 2e-5}, {1e-10, 1e-12});
    require_close(yc.value(), yg.value(), tf.rtol, tf.atol, "causal_attention_packed");
    yc.backward(g);
    yg.backward(to_gpu(g));
    require_close(xc.grad(), xg.grad(), tb.rtol, tb.atol, "qkv_heads + causal_attention_packed, d qkv");
  }
}

TEST_CASE("cuda: adamw_update, several steps, with and without weight decay", "[cuda][nn][adamw]") {
  manual_seed(204);
  for (DType dt : kFloatTypes) {
    // A size that is no multiple of the block size; some gradients exactly 0 (where every step's
    // is 0, v stays 0 and the denominator is eps alone).
    const int64_t n = 100003;
    for (double wd : {0.0, 0.1}) {
      Tensor p = randn({n}, dt), m = zeros({n}, dt), v = zeros({n}, dt);
      Tensor pg = to_gpu(p), mg = to_gpu(m), vg = to_gpu(v);
      for (int64_t step = 1; step <= 3; ++step) {
        Tensor g = mul(randn({n}, dt), lt(rand({n}, dt), full({}, 0.9, dt)));  // ~10% exact zeros
        adamw_update(p, g, m, v, 1e-2, 0.9, 0.95, 1e-8, wd, step);
        adamw_update(pg, to_gpu(g), mg, vg, 1e-2, 0.9, 0.95, 1e-8, wd, step);
      }
      // Tolerance 0: the constants come from the same host function (nnmath::adamw_coeffs) and
      // each element runs nnmath::adamw_element on both devices: unfused products and sums,
      // correctly rounded sqrt and division (nvcc without --use_fast_math, like the CPU build).
      require_equal(p, pg, "adamw p");
      require_equal(m, mg, "adamw m");
      require_equal(v, vg, "adamw v");
    }
  }
}

namespace {
// What one training step produced, copied to the host: per parameter (in named_parameters()
// order) its value before, its gradient after backward, after clipping, and its value after.
struct StepRecord {
  double loss = 0, norm = 0;
  std::vector<std::string> names;
  std::vector<bool> decays;
  std::vector<Tensor> before, grad, clipped, after;
};

// loss -> backward -> clip_grad_norm -> AdamW step, the order of train/trainer.cpp. Every record
// is a host copy (AdamW updates the parameters in place); the GPU run's records go back to the
// device for require_close, a byte copy each way.
StepRecord train_step(GPT& model, const Tensor& idx, const Tensor& targets, double lr, double max_norm,
                      const AdamWConfig& oc) {
  AdamW opt(model, oc);  // made after the model has its final device and dtype
  StepRecord r;
  for (auto& [name, p] : model.named_parameters()) {
    r.names.push_back(name);
    r.decays.push_back(model.decays(p));
    r.before.push_back(host_copy(p->value()));
  }
  Var loss = model.loss(idx, targets);
  loss.backward();
  r.loss = loss.item();
  for (Var* p : model.parameters()) r.grad.push_back(host_copy(p->grad()));
  r.norm = clip_grad_norm(model, max_norm);
  for (Var* p : model.parameters()) r.clipped.push_back(host_copy(p->grad()));
  opt.step(lr);
  for (Var* p : model.parameters()) r.after.push_back(host_copy(p->value()));
  return r;
}

// GPT builds its parameters in f32; the f64 run swaps each for an f64 copy (rotary tables, the
// loss and every kernel follow the parameters' dtype).
void to_f64(GPT& model) {
  for (Var* p : model.parameters()) *p = Var(p->value().to(DType::F64), true);
}

GPTConfig step_config() {
  GPTConfig c;
  c.vocab_size = 61;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 24;
  c.bias = true;  // bias gradients and their (undecayed) updates are compared too
  return c;
}
}  // namespace

TEST_CASE("cuda: one GPT training step equals the CPU's: loss, gradients, clipping, update",
          "[cuda][nn][gpt]") {
  const int64_t B = 3, T = 24;
  const double lr = 1e-3, max_norm = 0.5;  // max_norm below the first gradient norm: clipping runs
  AdamWConfig oc;
  oc.weight_decay = 0.1;
  manual_seed(205);
  Tensor idx = random_tokens(B, T, 61);
  std::vector<int32_t> tv = random_tokens(B, T, 61).to_vector<int32_t>();
  tv[5] = tv[30] = -100;  // ignored positions carry no loss
  Tensor targets = from_vector(tv, {B, T});

  for (DType dt : kFloatTypes) {
    INFO("dtype " << dtype_name(dt));
    // Two models from the same seed hold the same weights; one moves to the GPU.
    manual_seed(206);
    GPT cpu_model(step_config());
    manual_seed(206);
    GPT gpu_model(step_config());
    if (dt == DType::F64) {
      to_f64(cpu_model);
      to_f64(gpu_model);
    }
    gpu_model.to(kGpu);
    StepRecord c = train_step(cpu_model, idx, targets, lr, max_norm, oc);
    StepRecord g = train_step(gpu_model, idx, targets, lr, max_norm, oc);
    REQUIRE(c.names == g.names);
    for (size_t i = 0; i < c.names.size(); ++i) require_equal(c.before[i], to_gpu(g.before[i]), "initial " + c.names[i]);

    // The loss: every layer's rounding differences (GEMM grouping, tree vs sequential row sums,
    // libm ulps) reach it. One device's f32 error, measured on the CPU as f32 vs f64 over five
    // seeds: below 1e-7 relative.
    const double loss_tol = dt == DType::F32 ? 1e-5 : 1e-12;
    INFO("loss cpu " << c.loss << " gpu " << g.loss);
    REQUIRE(std::fabs(c.loss - g.loss) <= loss_tol * std::fabs(c.loss));

    // Gradients: relative to each tensor's largest entry, because many entries are sums of terms
    // that cancel (their own relative error is meaningless). f32: one device's error (CPU f32 vs
    // f64, five seeds) is below 8e-7 of the largest entry for every parameter; a wrong layout or
    // a missing term errs by O(1) of it.
    const double grad_tol = dt == DType::F32 ? 2e-5 : 1e-10;
    for (size_t i = 0; i < c.names.size(); ++i) {
      const double scale = max_abs(c.grad[i]);
      require_close(c.grad[i], to_gpu(g.grad[i]), grad_tol, grad_tol * scale, "gradient of " + c.names[i]);
    }

    // The global norm is a sum of squares accumulated in f64 on both devices.
    INFO("grad norm cpu " << c.norm << " gpu " << g.norm);
    REQUIRE(c.norm > max_norm);
    REQUIRE(std::fabs(c.norm - g.norm) <= (dt == DType::F32 ? 2e-5 : 1e-12) * c.norm);
    for (size_t i = 0; i < c.names.size(); ++i) {
      const double scale = max_abs(c.clipped[i]);
      require_close(c.clipped[i], to_gpu(g.clipped[i]), grad_tol, grad_tol * scale, "clipped gradient of " + c.names[i]);
    }

    // Updated parameters. At step 1 AdamW moves each weight by lr * g / (|g| + eps) (bias
    // corrections cancel), nearly lr * sign(g): a gradient entry within rounding noise of 0 may
    // move by a different amount on each device, up to lr * noise / eps. f64 noise makes that
    // negligible; in f32 the CPU's f32-vs-f64 difference of the updated weights was at most
    // 1.2e-3 lr over five seeds. A wrong step (sign, bias correction) errs by ~lr or more.
    const double step_tol = dt == DType::F32 ? 0.02 * lr : 1e-12;
    for (size_t i = 0; i < c.names.size(); ++i)
      require_close(c.after[i], to_gpu(g.after[i]), 0.0, step_tol, "updated " + c.names[i]);

    // And the step itself is exact: the CPU kernel applied to the GPU's own clipped gradients
    // reproduces the GPU's updated parameters bit for bit (see the adamw_update test).
    for (size_t i = 0; i < g.names.size(); ++i) {
      Tensor p = g.before[i].clone(), m = zeros_like(p), v = zeros_like(p);
      adamw_update(p, g.clipped[i], m, v, lr, oc.beta1, oc.beta2, oc.eps, g.decays[i] ? oc.weight_decay : 0.0, 1);
      require_equal(p, to_gpu(g.after[i]), "AdamW step on the GPU's gradients, " + g.names[i]);
    }
  }
}
