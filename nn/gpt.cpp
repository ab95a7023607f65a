// gpt.cpp: the GPT model (gpt.h).
#include "nn/gpt.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "nn/xl_attention.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

namespace lm {

AttentionKind parse_attention_kind(const std::string& s) {
  if (s == "standard") return AttentionKind::Standard;
  if (s == "landmark") return AttentionKind::Landmark;
  LM_FAIL("GPTConfig: attention must be standard or landmark, got '" << s << "'");
}
const char* attention_kind_name(AttentionKind a) { return a == AttentionKind::Landmark ? "landmark" : "standard"; }

void GPTConfig::validate() const {
  LM_CHECK(vocab_size > 0, "GPTConfig: vocab_size must be positive, got " << vocab_size);
  LM_CHECK(n_layer > 0, "GPTConfig: n_layer must be positive, got " << n_layer);
  LM_CHECK(n_head > 0 && n_embd > 0 && n_embd % n_head == 0,
           "GPTConfig: n_embd (" << n_embd << ") must be a positive multiple of n_head (" << n_head << ")");
  LM_CHECK(head_size() % 2 == 0,
           "GPTConfig: head size n_embd / n_head = " << head_size() << " must be even (rotary pairs)");
  LM_CHECK(block_size > 0, "GPTConfig: block_size must be positive, got " << block_size);
  LM_CHECK(dropout >= 0 && dropout < 1, "GPTConfig: dropout must be in [0, 1), got " << dropout);
  LM_CHECK(landmark_every > 0, "GPTConfig: landmark_every (F) must be positive, got " << landmark_every);
  LM_CHECK(!context_miss || landmark(),
           "GPTConfig: context_miss (a context-miss token, Appendix D) needs landmark "
           "attention");
  // Rotary frequencies are base^(-2i/HS): at a base of 1 or less they no longer fall with i. The
  // upper bound, 1e12, is far above the bases models train with (1e4 here): past it a damaged
  // number (1e308), not a model. ln_eps is added to a variance before its square root: 0 divides
  // by zero on a constant row, and past 1 it drowns a unit variance.
  LM_CHECK(rotary_base > 1 && rotary_base <= 1e12, "GPTConfig: rotary_base must be in (1, 1e12], got " << rotary_base);
  LM_CHECK(ln_eps > 0 && ln_eps <= 1, "GPTConfig: ln_eps must be in (0, 1], got " << ln_eps);
  LM_CHECK(xl_cache >= 0 && xl_cache <= (int64_t(1) << 24),
           "GPTConfig: xl_cache (Transformer-XL cache length) must be in [0, 2^24], got " << xl_cache);
  LM_CHECK(xl_cache == 0 || !landmark(), "GPTConfig: xl_cache " << xl_cache
                                                                << " (Transformer-XL) needs standard attention, "
                                                                << "not landmark attention");
  // Sane limits, before anything is built (n_layer 100000 once allocated layer after layer for a
  // minute before failing): ids are int32 below 2^30, positions int32.
  LM_CHECK(vocab_size < (int64_t(1) << 30), "GPTConfig: vocab_size " << vocab_size << " is past 2^30");
  LM_CHECK(n_layer <= 4096 && n_embd <= (int64_t(1) << 20) && block_size <= (int64_t(1) << 24) &&
               landmark_every <= (int64_t(1) << 24),
           "GPTConfig: n_layer " << n_layer << ", n_embd " << n_embd << ", block_size " << block_size
                                 << " or landmark_every " << landmark_every
                                 << " is past its limit (4096, 2^20, 2^24, 2^24)");
  // The weights alone must fit in memory: vocab x C for the embedding, about 12 C^2 per layer.
  const double params = approx_params();
  const double bytes = params * 4.0, have = static_cast<double>(physical_memory_bytes());
  LM_CHECK(bytes <= have, "GPTConfig: about " << params << " parameters (" << bytes / 1e9
                                              << " GB in f32) do not fit in "
                                              << "this machine's " << have / 1e9 << " GB of memory");
}

namespace {
double proj_std(const GPTConfig& c) { return 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer)); }
}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& cfg)
    : qkv(cfg.n_embd, 3 * cfg.n_embd, cfg.bias), proj(cfg.n_embd, cfg.n_embd, cfg.bias, proj_std(cfg)), cfg_(cfg) {
  register_module("qkv", qkv);
  register_module("proj", proj);
}

Var CausalSelfAttention::forward(const Var& x, const RotaryTables& rot, const AttentionFn& core) const {
  const int64_t B = x.size(0), T = x.size(1), C = cfg_.n_embd, NH = cfg_.n_head, HS = cfg_.head_size();
  Var qkv_out = qkv.forward(x);  // (B, T, 3C)
  Var y;
  if (!core && cfg_.fused_attention) {
    // The fast path: q, k, v as one packed tensor (3, B, NH, T, HS), so that their gradients come
    // back as one tensor too. Same values as the spelled-out split below.
    y = causal_attention_packed(qkv_heads(qkv_out, NH, rot));
  } else {
    // Split q, k, v and move heads forward: (B, T, C) -> (B, T, NH, HS) -> (B, NH, T, HS).
    auto heads = [&](int64_t part) {
      return transpose(reshape(narrow(qkv_out, 2, part * C, C), {B, T, NH, HS}), 1, 2);
    };
    Var q = rotary(contiguous(heads(0)), rot), k = rotary(contiguous(heads(1)), rot), v = heads(2);
    y = core                   ? core(q, k, v)
        : cfg_.fused_attention ? causal_attention(q, k, v)
                               : causal_attention_reference(q, k, contiguous(v));
  }
  y = reshape(transpose(y, 1, 2), {B, T, C});  // heads back together
  return dropout(proj.forward(y), cfg_.dropout, is_training());
}

Var CausalSelfAttention::forward_xl(const Var& x, const RotaryTables& rot, const Tensor& ck, const Tensor& cv,
                                    const RotaryTables& rot_cache, Tensor* k_new, Tensor* v_new) const {
  const int64_t B = x.size(0), T = x.size(1), C = cfg_.n_embd, NH = cfg_.n_head, HS = cfg_.head_size();
  Var qkv_out = qkv.forward(x);  // (B, T, 3C)
  auto heads = [&](int64_t part) { return transpose(reshape(narrow(qkv_out, 2, part * C, C), {B, T, NH, HS}), 1, 2); };
  Var k_raw = contiguous(heads(1)), v = heads(2);  // (B, NH, T, HS)
  // The cache keeps keys un-rotated (rotated at use, at positions 0..M-1) and its own copies, so
  // that it holds no view into this window's activations.
  if (k_new) *k_new = k_raw.value();
  if (v_new) *v_new = v.value().contiguous();
  Var q = rotary(contiguous(heads(0)), rot), k = rotary(k_raw, rot);
  const bool cached = ck.defined() && ck.size(2) > 0;
  const Tensor ckr = cached ? rotary(ck, rot_cache) : Tensor(), cvc = cached ? cv : Tensor();
  Var y = cfg_.fused_attention ? prefix_attention(q, k, v, ckr, cvc)
                               : prefix_attention_reference(q, k, contiguous(v), ckr, cvc);
  y = reshape(transpose(y, 1, 2), {B, T, C});
  return dropout(proj.forward(y), cfg_.dropout, is_training());
}

MLP::MLP(const GPTConfig& cfg)
    : fc(cfg.n_embd, 4 * cfg.n_embd, cfg.bias),
      proj(4 * cfg.n_embd, cfg.n_embd, cfg.bias, proj_std(cfg)),
      dropout_(cfg.dropout) {
  register_module("fc", fc);
  register_module("proj", proj);
}

Var MLP::forward(const Var& x) const { return dropout(proj.forward(gelu(fc.forward(x))), dropout_, is_training()); }

Block::Block(const GPTConfig& cfg) : ln1(cfg.n_embd, cfg.ln_eps), ln2(cfg.n_embd, cfg.ln_eps), attn(cfg), mlp(cfg) {
  register_module("ln1", ln1);
  register_module("attn", attn);
  register_module("ln2", ln2);
  register_module("mlp", mlp);
}

Var Block::forward(const Var& x, const RotaryTables& rot, const AttentionFn& core) const {
  Var h = add(x, attn.forward(ln1.forward(x), rot, core));
  return add(h, mlp.forward(ln2.forward(h)));
}

Var Block::forward_xl(const Var& x, const RotaryTables& rot, const Tensor& ck, const Tensor& cv,
                      const RotaryTables& rot_cache, Tensor* k_new, Tensor* v_new) const {
  Var h = add(x, attn.forward_xl(ln1.forward(x), rot, ck, cv, rot_cache, k_new, v_new));
  return add(h, mlp.forward(ln2.forward(h)));
}

GPT::GPT(const GPTConfig& cfg)
    : wte((cfg.validate(), cfg.vocab_size), cfg.n_embd), ln_f(cfg.n_embd, cfg.ln_eps), cfg_(cfg) {
  register_module("wte", wte);
  for (int64_t l = 0; l < cfg.n_layer; ++l) {
    blocks.push_back(std::make_unique<Block>(cfg));
    register_module("blocks." + std::to_string(l), *blocks.back());
  }
  register_module("ln_f", ln_f);
}

Var GPT::forward(const Tensor& idx, const Tensor& positions, const AttentionFn& core) const {
  LM_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::I32,
           "GPT: idx must be i32 (B, T), got " << describe(idx));
  const int64_t B = idx.size(0), T = idx.size(1);
  Tensor pos = positions.defined() ? positions : arange(T, DType::I32).reshape({1, T});
  LM_CHECK(pos.dim() == 2 && (pos.size(0) == 1 || pos.size(0) == B) && pos.size(1) == T,
           "GPT: positions " << describe(pos) << " must be (1 or " << B << ", " << T << ")");
  const Device dev = device();
  RotaryTables rot = rotary_tables(pos, cfg_.head_size(), cfg_.rotary_base, wte.weight.dtype(), dev);
  Var x = dropout(wte.forward(idx.to(dev)), cfg_.dropout, is_training());
  for (const auto& b : blocks) x = b->forward(x, rot, core);
  x = ln_f.forward(x);
  Var logits = matmul(reshape(x, {B * T, cfg_.n_embd}), wte.weight, false, true);  // tied head
  return reshape(logits, {B, T, cfg_.vocab_size});
}

Var GPT::forward_xl(const Tensor& idx, const XLCache& cache, XLCache* next) const {
  LM_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::I32,
           "GPT: idx must be i32 (B, T), got " << describe(idx));
  const int64_t B = idx.size(0), T = idx.size(1), M = cache.length(), L = cfg_.n_layer;
  LM_CHECK(cache.k.empty() || (static_cast<int64_t>(cache.k.size()) == L && cache.v.size() == cache.k.size()),
           "GPT: an XL cache holds one (k, v) per layer: " << cache.k.size() << " and " << cache.v.size() << " for "
                                                           << L << " layers");
  const Device dev = device();
  const DType dt = wte.weight.dtype();
  auto tables = [&](int64_t first, int64_t n) {
    return rotary_tables(
        arange(static_cast<double>(first), static_cast<double>(first + n), 1.0, DType::I32).reshape({1, n}),
        cfg_.head_size(), cfg_.rotary_base, dt, dev);
  };
  const RotaryTables rot = tables(M, T), rot_cache = M > 0 ? tables(0, M) : RotaryTables{};
  Var x = dropout(wte.forward(idx.to(dev)), cfg_.dropout, is_training());
  XLCache out;
  const int64_t keep = std::min(cfg_.xl_cache, M + T);  // positions the next window will see
  for (int64_t l = 0; l < L; ++l) {
    const Tensor ck = M > 0 ? cache.k[static_cast<size_t>(l)] : Tensor(),
                 cv = M > 0 ? cache.v[static_cast<size_t>(l)] : Tensor();
    LM_CHECK(M == 0 || (ck.dim() == 4 && ck.size(2) == M && cv.dim() == 4 && cv.size(2) == M),
             "GPT: the XL cache of layer " << l << " is k " << describe(ck) << ", v " << describe(cv)
                                           << "; every layer must hold " << M << " positions");
    Tensor k_new, v_new;
    x = blocks[static_cast<size_t>(l)]->forward_xl(x, rot, ck, cv, rot_cache, next ? &k_new : nullptr,
                                                   next ? &v_new : nullptr);
    if (next) {  // the last `keep` positions of [cache | window]
      const Tensor k_all = M > 0 ? concat(std::vector<Tensor>{ck, k_new}, 2) : k_new,
                   v_all = M > 0 ? concat(std::vector<Tensor>{cv, v_new}, 2) : v_new;
      out.k.push_back(k_all.narrow(2, M + T - keep, keep).contiguous());
      out.v.push_back(v_all.narrow(2, M + T - keep, keep).contiguous());
    }
  }
  x = ln_f.forward(x);
  Var logits = matmul(reshape(x, {B * T, cfg_.n_embd}), wte.weight, false, true);  // tied head
  if (next) *next = std::move(out);
  return reshape(logits, {B, T, cfg_.vocab_size});
}

Var GPT::loss_xl(const Tensor& idx, const Tensor& targets, const XLCache& cache, XLCache* next) const {
  LM_CHECK(targets.defined() && targets.shape() == idx.shape() && targets.dtype() == DType::I32,
           "GPT: targets " << describe(targets) << " must be i32 with the shape of idx " << describe(idx));
  Var logits = reshape(forward_xl(idx, cache, next), {-1, cfg_.vocab_size});
  return cross_entropy(logits, targets.to(device()).reshape({-1}));
}

Var GPT::loss(const Tensor& idx, const Tensor& targets, const Tensor& positions, int64_t ignore_index,
              const AttentionFn& core) const {
  LM_CHECK(targets.defined() && targets.shape() == idx.shape() && targets.dtype() == DType::I32,
           "GPT: targets " << describe(targets) << " must be i32 with the shape of idx " << describe(idx));
  Var logits = reshape(forward(idx, positions, core), {-1, cfg_.vocab_size});
  return cross_entropy(logits, targets.to(device()).reshape({-1}), ignore_index);
}

}  // namespace lm
