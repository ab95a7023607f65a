// Beyond the paper: the baseline of full_cache.h.
// full_cache.cpp: FullKVCache (full_cache.h). f32 only: it exists for speed comparisons. Two
// steps: the hand-written CPU one (FullKVCache::step) and a device-generic one of tensor ops
// (step_tensor_ops), which CUDA models take.
#include "beyond/full_cache.h"

#include <cmath>
#include <cstring>

#include "autograd/functions.h"
#include "nn/functional.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/elementwise_math.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

namespace lm {

FullKVCache::FullKVCache(const GPT& model, int64_t capacity, bool tensor_ops)
    : model_(model),
      capacity_(capacity),
      NH_(model.config().n_head),
      HS_(model.config().head_size()),
      tensor_ops_(tensor_ops || model.device() != Device::CPU) {
  LM_CHECK(model.wte.weight.dtype() == DType::F32, "FullKVCache: needs an f32 model");
  LM_CHECK(capacity > 0, "FullKVCache: capacity must be positive");
  LM_CHECK(HS_ % 4 == 0, "FullKVCache: head size " << HS_ << " must be a multiple of 4");
  for (int64_t l = 0; l < model.config().n_layer; ++l) {
    if (tensor_ops_) {
      kt_.push_back(zeros({NH_, capacity, HS_}, DType::F32, model.device()));
      vt_.push_back(zeros({NH_, capacity, HS_}, DType::F32, model.device()));
    } else {
      k_.emplace_back(static_cast<size_t>(NH_ * capacity * HS_));
      v_.emplace_back(static_cast<size_t>(NH_ * capacity * HS_));
    }
  }
}

int64_t FullKVCache::bytes() const { return 2 * model_.config().n_layer * NH_ * capacity_ * HS_ * 4; }

void FullKVCache::fill_random(int64_t n, uint64_t seed) {
  LM_CHECK(n <= capacity_, "FullKVCache: " << n << " positions exceed the capacity " << capacity_);
  RngState saved = global_rng();
  manual_seed(seed);
  for (int64_t l = 0; l < model_.config().n_layer; ++l) {
    Tensor r = randn({2, NH_ * capacity_ * HS_});
    if (tensor_ops_) {  // the same numbers, copied to the device
      kt_[l].copy_(r.select(0, 0).reshape({NH_, capacity_, HS_}).to(kt_[l].device()));
      vt_[l].copy_(r.select(0, 1).reshape({NH_, capacity_, HS_}).to(vt_[l].device()));
    } else {
      std::memcpy(k_[l].data(), r.data<float>(), k_[l].size() * sizeof(float));
      std::memcpy(v_[l].data(), r.data<float>() + NH_ * capacity_ * HS_, v_[l].size() * sizeof(float));
    }
  }
  global_rng() = saved;
  len_ = n;
}

// The generic step: the same layer as the CPU step, written with tensor ops so that it runs on
// the model's device. Per layer: the token's rotated key and value go into row len_ of the
// cache tensors; the scores q K^T / sqrt(HS) over the N = len_ + 1 cached positions, their
// softmax and the weighted sum of values are one batched matmul, one softmax and one more
// matmul over the heads (the narrowed cache is copied to a contiguous block for the GEMMs).
Tensor FullKVCache::step_tensor_ops(int32_t token) {
  NoGradGuard ng;
  const Device dev = model_.device();
  const int64_t C = model_.config().n_embd, NH = NH_, HS = HS_, N = len_ + 1;
  RotaryTables rot = rotary_tables(full({1, 1}, static_cast<double>(len_), DType::I32), HS, model_.config().rotary_base,
                                   DType::F32, dev);
  Var x = model_.wte.forward(full({1, 1}, token, DType::I32, dev));  // (1, 1, C)
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (size_t l = 0; l < kt_.size(); ++l) {
    const Block& blk = *model_.blocks[l];
    Tensor qkv = blk.attn.qkv.forward(blk.ln1.forward(x)).value().reshape({3, NH, 1, HS});
    Tensor q = rotary(qkv.select(0, 0).unsqueeze(0), rot).reshape({NH, 1, HS});
    kt_[l].narrow(1, len_, 1).copy_(rotary(qkv.select(0, 1).unsqueeze(0), rot).reshape({NH, 1, HS}));
    vt_[l].narrow(1, len_, 1).copy_(qkv.select(0, 2));
    Tensor w = softmax(mul(matmul(q, kt_[l].narrow(1, 0, N), false, true), scale));  // (NH, 1, N)
    Tensor y = matmul(w, vt_[l].narrow(1, 0, N));                                    // (NH, 1, HS)
    x = add(x, blk.attn.proj.forward(Var(y.reshape({1, 1, C}))));
    x = add(x, blk.mlp.forward(blk.ln2.forward(x)));
  }
  ++len_;
  return matmul(model_.ln_f.forward(x).value().reshape({1, C}), model_.wte.weight.value(), false, true).squeeze(0);
}

Tensor FullKVCache::step(int32_t token) {
  LM_CHECK(len_ < capacity_, "FullKVCache: full (" << capacity_ << " positions)");
  if (tensor_ops_) return step_tensor_ops(token);
  NoGradGuard ng;
  const int64_t C = model_.config().n_embd, NH = NH_, HS = HS_, N = len_ + 1;
  RotaryTables rot = rotary_tables(full({1, 1}, static_cast<double>(len_), DType::I32), HS, model_.config().rotary_base,
                                   DType::F32, Device::CPU);
  Var x = model_.wte.forward(full({1, 1}, token, DType::I32));  // (1, 1, C)
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for (size_t l = 0; l < k_.size(); ++l) {
    const Block& blk = *model_.blocks[l];
    Tensor qkv = blk.attn.qkv.forward(blk.ln1.forward(x)).value().reshape({3, NH, 1, HS});
    Tensor q = rotary(qkv.select(0, 0).unsqueeze(0), rot).contiguous(),
           k = rotary(qkv.select(0, 1).unsqueeze(0), rot).contiguous();
    Tensor v = qkv.select(0, 2).contiguous();
    float *K = k_[l].data(), *Vc = v_[l].data();
    for (int64_t h = 0; h < NH; ++h) {
      std::memcpy(K + (h * capacity_ + len_) * HS, k.data<float>() + h * HS, HS * sizeof(float));
      std::memcpy(Vc + (h * capacity_ + len_) * HS, v.data<float>() + h * HS, HS * sizeof(float));
    }
    Tensor y({1, NH, 1, HS}, DType::F32);
    const float* qp = q.data<float>();
    float* yp = y.data<float>();
    cpu::parallel_for(NH, N * HS, [&](int64_t h0, int64_t h1) {
      std::vector<float> s(static_cast<size_t>(N));
      for (int64_t h = h0; h < h1; ++h) {
        const float* qh = qp + h * HS;
        float m = -INFINITY;
        for (int64_t j = 0; j < N; ++j) {
          const float* kj = K + (h * capacity_ + j) * HS;
          float a0 = 0, a1 = 0, a2 = 0, a3 = 0;  // four partial sums: vectorisable, fixed order
          for (int64_t d = 0; d < HS; d += 4) {
            a0 += qh[d] * kj[d];
            a1 += qh[d + 1] * kj[d + 1];
            a2 += qh[d + 2] * kj[d + 2];
            a3 += qh[d + 3] * kj[d + 3];
          }
          s[j] = ((a0 + a1) + (a2 + a3)) * scale;
          m = s[j] > m ? s[j] : m;
        }
        float z = 0;
        for (int64_t j = 0; j < N; ++j) z += s[j] = math::exp_softmax(s[j] - m);
        float* yh = yp + h * HS;
        for (int64_t d = 0; d < HS; ++d) yh[d] = 0;
        for (int64_t j = 0; j < N; ++j) {
          const float w = s[j] / z;
          const float* vj = Vc + (h * capacity_ + j) * HS;
          for (int64_t d = 0; d < HS; ++d) yh[d] += w * vj[d];
        }
      }
    });
    x = add(x, blk.attn.proj.forward(Var(y.reshape({1, 1, C}))));
    x = add(x, blk.mlp.forward(blk.ln2.forward(x)));
  }
  ++len_;
  return matmul(model_.ln_f.forward(x).value().reshape({1, C}), model_.wte.weight.value(), false, true).squeeze(0);
}

}  // namespace lm
