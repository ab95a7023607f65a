// gpt.h: a GPT-2 style decoder: token embedding (tied with the LM head), no learned position
// embedding (rotary positions inside attention instead), n_layer pre-LN blocks of
// [LayerNorm -> causal self-attention -> residual, LayerNorm -> MLP(4x, GELU) -> residual],
// a final LayerNorm and logits = x wte^T. Init: normal(0, 0.02); the two output projections of
// each block use 0.02 / sqrt(2 n_layer) so the residual stream's variance does not grow with depth.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/functional.h"
#include "nn/layers.h"

namespace lm {

// The attention a model is trained with: causal (standard) or landmark attention (Section 3.1).
enum class AttentionKind { Standard, Landmark };
AttentionKind parse_attention_kind(const std::string& s);  // "standard" | "landmark"; throws otherwise
const char* attention_kind_name(AttentionKind a);

struct GPTConfig {
  int64_t vocab_size = 256;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 256;
  int64_t block_size = 512;  // the training context length T
  double dropout = 0.0;
  double rotary_base = 10000.0;
  double ln_eps = 1e-5;
  bool bias = false;            // biases in Linear layers
  bool fused_attention = true;  // false: the composed reference (slow; for tests)
  // Which attention the model was trained with. nn/ does not interpret it (the landmark variant
  // lives in landmark/ and is passed in as an AttentionFn); it travels with the config into
  // checkpoints (as "standard" or "landmark"), next to the landmark settings below.
  AttentionKind attention = AttentionKind::Standard;
  int64_t landmark_every = 50;  // F: regular tokens per landmark block
  bool context_miss = false;    // trained with a context-miss token (Appendix D)
  // Transformer-XL (docs/nn.md section 17): M, the positions of cached keys and values per layer
  // that a window sees before its own (forward_xl); 0 = off, a plain causal model. Standard
  // attention only; CPU only.
  int64_t xl_cache = 0;
  int64_t head_size() const { return n_embd / n_head; }
  bool landmark() const { return attention == AttentionKind::Landmark; }
  void validate() const;  // throws naming the bad field
  // About how many parameters the model has (vocab x C for the embedding, 12 C^2 + 13 C per
  // layer): what validate() bounds by memory, and what a checkpoint must roughly hold before a
  // model is built from its config (nn/gpt_io.h check_config_fits_checkpoint).
  double approx_params() const {
    const double C = static_cast<double>(n_embd);
    return static_cast<double>(vocab_size) * C + static_cast<double>(n_layer) * (12.0 * C * C + 13.0 * C);
  }
};

// Transformer-XL's cache: per layer, the keys (before rotary) and the values (B, NH, M, HS) of the
// M positions before the current window, plain tensors (no gradient flows into them). No layers
// (length 0) at the start of a segment or a text.
struct XLCache {
  std::vector<Tensor> k, v;
  int64_t length() const { return k.empty() ? 0 : k[0].size(2); }
};

// An attention core: q, k, v (B, NH, T, HS) after rotary -> (B, NH, T, HS). Empty = causal.
using AttentionFn = std::function<Var(const Var& q, const Var& k, const Var& v)>;

class CausalSelfAttention : public Module {
 public:
  explicit CausalSelfAttention(const GPTConfig& cfg);
  // x (B, T, C) -> (B, T, C); positions enter through the rotary tables.
  Var forward(const Var& x, const RotaryTables& rot, const AttentionFn& core = nullptr) const;
  // Transformer-XL: x (B, T, C) of the window after the cached positions; ck, cv (B, NH, M, HS)
  // their un-rotated keys and values (undefined: M = 0); rot for positions M..M+T-1, rot_cache
  // for 0..M-1 -> (B, T, C). k_new, v_new (when given) receive the window's un-rotated keys and
  // values (B, NH, T, HS), detached.
  Var forward_xl(const Var& x, const RotaryTables& rot, const Tensor& ck, const Tensor& cv,
                 const RotaryTables& rot_cache, Tensor* k_new, Tensor* v_new) const;
  Linear qkv, proj;  // qkv: C -> 3C (q, k, v stacked in that order); proj: C -> C

 private:
  GPTConfig cfg_;
};

class MLP : public Module {
 public:
  explicit MLP(const GPTConfig& cfg);
  Var forward(const Var& x) const;  // (B, T, C) -> (B, T, C)
  Linear fc, proj;

 private:
  double dropout_;
};

class Block : public Module {
 public:
  explicit Block(const GPTConfig& cfg);
  Var forward(const Var& x, const RotaryTables& rot, const AttentionFn& core = nullptr) const;
  Var forward_xl(const Var& x, const RotaryTables& rot, const Tensor& ck, const Tensor& cv,
                 const RotaryTables& rot_cache, Tensor* k_new,
                 Tensor* v_new) const;  // as CausalSelfAttention::forward_xl
  LayerNorm ln1, ln2;
  CausalSelfAttention attn;
  MLP mlp;
};

class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& cfg);  // parameters drawn from the global RNG (seed it first)
  // idx i32 (B, T) -> logits (B, T, V). `positions` i32 (1 or B, T) defaults to 0..T-1;
  // `core` replaces causal attention in every block (e.g. landmark attention).
  Var forward(const Tensor& idx, const Tensor& positions = Tensor(), const AttentionFn& core = nullptr) const;
  // Mean cross-entropy of forward(idx) against targets i32 (B, T); ignore_index rows skipped.
  Var loss(const Tensor& idx, const Tensor& targets, const Tensor& positions = Tensor(), int64_t ignore_index = -100,
           const AttentionFn& core = nullptr) const;
  // Transformer-XL: idx i32 (B, T), the window right after the positions `cache` holds (none at a
  // segment's start) -> logits (B, T, V). Query i attends to all M cached keys of its layer and to
  // the window's keys j <= i; rotary positions are 0..M-1 for the cache and M..M+T-1 for the
  // window (only offsets matter). `next`, when given (it may be &cache), receives the cache for
  // the following window: per layer the last min(xl_cache, M + T) positions of [cache | window].
  Var forward_xl(const Tensor& idx, const XLCache& cache, XLCache* next) const;
  // Mean cross-entropy of forward_xl(idx, cache, next) against targets i32 (B, T).
  Var loss_xl(const Tensor& idx, const Tensor& targets, const XLCache& cache, XLCache* next) const;
  const GPTConfig& config() const { return cfg_; }
  Device device() const { return wte.weight.device(); }

  Embedding wte;
  std::vector<std::unique_ptr<Block>> blocks;
  LayerNorm ln_f;

 private:
  GPTConfig cfg_;
};

}  // namespace lm
