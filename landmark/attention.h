// attention.h: landmark attention (the paper's Section 3.1): causal attention whose softmax is
// the grouped softmax, so each earlier block is reachable only through its landmark. Two
// versions, as for every clever op: the fused op (one kernel pass per head, closed-form
// backward; CPU and CUDA) and a composed reference built from autograd ops that reads like the
// paper's equations. tests/test_landmark_attention.cpp checks that they agree.
#pragma once

#include "autograd/var.h"
#include "landmark/layout.h"

namespace lm {

// q, k, v (B, NH, T, HS) -> (B, NH, T, HS), scale 1/sqrt(HS); the layout comes from
// make_layout(kinds) for the same (B, T) on the same device.
Var landmark_attention(const Var& q, const Var& k, const Var& v, const LandmarkLayout& layout);

// The final attention weights W (B, NH, T, T) of the fused forward (for tests and attention maps).
Tensor landmark_attention_weights(const Tensor& q, const Tensor& k, const LandmarkLayout& layout);

// The composed reference: group ids G (B, T, T) as in the paper, a grouped softmax from exp,
// matmul and where over a (T x T x T) "same group" tensor, then the gating products. Slow and
// memory hungry by design (tests only, T up to a few dozen). kinds: i32 (B, T) on the CPU.
Var landmark_attention_reference(const Var& q, const Var& k, const Var& v, const Tensor& kinds);

// The paper's group matrix for one batch row (T x T, row-major): G[i][j] for j <= i, with the
// values -1 (ignored: i's own landmark), -2 (controlled-landmark group), a landmark position p
// (the group of block p), or T (the open tail block); kMasked (below) for j > i.
constexpr int32_t kMaskedGroup = -1000;
std::vector<int32_t> paper_groups(const std::vector<int32_t>& kinds_row);

}  // namespace lm

#include "nn/gpt.h"

namespace lm {
// Landmark attention as the attention core of a GPT (see AttentionFn in nn/gpt.h): every block
// uses the same layout. `fused` false uses the composed reference (needs kinds on the CPU).
AttentionFn landmark_attention_core(const LandmarkLayout& layout, bool fused = true);
}  // namespace lm
