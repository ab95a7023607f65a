// grouped_softmax.h: the grouped softmax of one query row, forward and backward, as LM_HD
// functions. The CPU kernel (landmark/cpu/attention.cpp) and the CPU and CUDA inference rows
// (infer/cpu_rows.cpp, infer/cuda/chunk_attention.cu) run them, so the CPU tests check the row
// code CUDA inference runs. The CUDA training kernel (landmark/cuda/attention.cu) does not:
// warp_row_forward and warp_row_forward_backward spell the same groups and formulas for a warp,
// sharing only RowLayout, gsm::cmt_dropped and gsm::neg_inf with this file (and math::exp_softmax
// with these rows); their sums are warp trees, so they differ from these rows in the last bits,
// and the GPU tests (tests/gpu/test_cuda_landmark.cpp) hold them to the CPU kernel.
// The paper's Section 3.1 and Appendix D define it (docs/paper.md maps them to this code); the composed reference
// (landmark/reference.cpp) spells the same thing with tensor ops.
//
// For query i in block b (positions j <= i only):
//   top group  = regular tokens of block b, free landmarks of blocks 0..b-1, and the CMT token;
//   group g<b  = the regular tokens of block g;
//   group CMT  = the controlled landmarks of blocks 0..b-1 (only with a CMT token).
// Softmax within each group (own max). We keep P' (T x T, the "probabilities" row):
//   P'[j] = top-group probability for top-group members, in-group probability otherwise
// and the final weights
//   own token j            w = P'[j]
//   token j of block g     w = gate_g P'[j],  gate_g = P'[lm_g] (free) or P'[cmt] P'[lm_g] (controlled)
//   landmarks and the CMT  w = 0
// Block b's own landmark is excluded (it matters when i is that landmark).
#pragma once

#include <cmath>
#include <cstdint>

#include "landmark/tokens.h"
#include "tensor/elementwise_math.h"
#include "tensor/hostdevice.h"

namespace lm {

// The block structure of one batch row of length T (built by make_layout, landmark/layout.h).
struct RowLayout {
  const int32_t* kind;         // (T) TokenKind of each position
  const int32_t* block_of;     // (T) block index; -1 for the CMT token
  const int32_t* block_start;  // (T + 1) first position of block g; block g's landmark sits at
                               // block_start[g + 1] - 1 for every closed block g
  int32_t cmt;                 // position of the CMT token, or -1
  double cmt_cutoff = 0;       // evaluation only (Appendix D): a CMT probability below this gates
                               // the controlled blocks with 0, as if no retrieval happened
};

namespace gsm {

template <class Scalar>
LM_HD Scalar neg_inf() {
  return -INFINITY;
}

// The CMT cutoff (Appendix D, evaluation only): is a CMT probability p dropped at cutoff c? Below
// the cutoff, and always at c >= 1: a cutoff of 1 means "never retrieve", also for a row whose
// CMT probability rounded to exactly 1 (in f32 every other top-group member can underflow).
template <class Scalar>
LM_HD bool cmt_dropped(Scalar p, double cutoff) {
  return cutoff >= 1.0 || p < Scalar(cutoff);
}

// Forward for row i: s[0..i] are the scaled scores; writes pp[0..i] (P') and w[0..i] (weights).
// Entries beyond i are not touched. A CMT query attends to nothing: pp = w = 0. pp may alias s
// (the CPU kernel turns scores into P' in place): every s[j] is read before pp[j] is written.
// Each group costs three short passes (max, exp + sum, scale), one exp per element; the own
// block and each earlier block are contiguous runs of regular tokens, so the passes vectorise.
template <class Scalar>
LM_HD void row_forward(const RowLayout& L, int i, const Scalar* s, Scalar* pp, Scalar* w) {
  if (L.kind[i] == kContextMiss) {
    for (int j = 0; j <= i; ++j) pp[j] = w[j] = Scalar(0);
    return;
  }
  const int b = L.block_of[i];
  const int own_begin = L.block_start[b];
  const int own_end = L.kind[i] == kRegular ? i + 1 : i;  // i's own landmark is excluded
  // --- maxima of the top group (own tokens, free landmarks, CMT) and the controlled group ---
  Scalar m = neg_inf<Scalar>(), mc = neg_inf<Scalar>();
  for (int j = own_begin; j < own_end; ++j) m = s[j] > m ? s[j] : m;
  for (int g = 0; g < b; ++g) {
    const int lmk = L.block_start[g + 1] - 1;
    if (L.kind[lmk] == kLandmark)
      m = s[lmk] > m ? s[lmk] : m;
    else
      mc = s[lmk] > mc ? s[lmk] : mc;
  }
  if (L.cmt >= 0) m = s[L.cmt] > m ? s[L.cmt] : m;
  // --- exponentials (stored unnormalised) and the two normalisers ---
  Scalar z = 0, zc = 0;
  for (int j = own_begin; j < own_end; ++j) pp[j] = math::exp_softmax(s[j] - m);  // vectorises
  for (int j = own_begin; j < own_end; ++j) z += pp[j];                           // in order
  for (int g = 0; g < b; ++g) {
    const int lmk = L.block_start[g + 1] - 1;
    if (L.kind[lmk] == kLandmark) {
      pp[lmk] = math::exp_softmax(s[lmk] - m);
      z += pp[lmk];
    } else {
      pp[lmk] = math::exp_softmax(s[lmk] - mc);
      zc += pp[lmk];
    }
  }
  Scalar p_cmt = 0;
  if (L.cmt >= 0) {
    pp[L.cmt] = math::exp_softmax(s[L.cmt] - m);
    z += pp[L.cmt];
  }
  const Scalar inv_top = Scalar(1) / z, inv_ctrl = zc > Scalar(0) ? Scalar(1) / zc : Scalar(0);
  for (int j = own_begin; j < own_end; ++j) {
    pp[j] *= inv_top;
    w[j] = pp[j];
  }
  if (own_end == i) pp[i] = w[i] = Scalar(0);
  if (L.cmt >= 0) {
    pp[L.cmt] *= inv_top;
    p_cmt = pp[L.cmt];
    w[L.cmt] = Scalar(0);
    if (cmt_dropped(p_cmt, L.cmt_cutoff)) p_cmt = Scalar(0);  // the cutoff: pp keeps the true value
  }
  // --- each earlier block: its own softmax, gated by its landmark (and the CMT if controlled) ---
  for (int g = 0; g < b; ++g) {
    const int begin = L.block_start[g], lmk = L.block_start[g + 1] - 1;
    Scalar gate;
    if (L.kind[lmk] == kLandmark) {
      pp[lmk] *= inv_top;
      gate = pp[lmk];
    } else {
      pp[lmk] *= inv_ctrl;
      gate = p_cmt * pp[lmk];
    }
    w[lmk] = Scalar(0);
    Scalar mg = neg_inf<Scalar>(), zg = 0;
    for (int j = begin; j < lmk; ++j) mg = s[j] > mg ? s[j] : mg;
    for (int j = begin; j < lmk; ++j) pp[j] = math::exp_softmax(s[j] - mg);
    for (int j = begin; j < lmk; ++j) zg += pp[j];
    const Scalar inv = Scalar(1) / zg, gate_inv = gate * inv;
    for (int j = begin; j < lmk; ++j) {
      w[j] = pp[j] * gate_inv;
      pp[j] *= inv;
    }
  }
}

// The final weights of row i from its P' row (the forward's second output, recomputed in the
// backward instead of being stored).
template <class Scalar>
LM_HD void row_weights(const RowLayout& L, int i, const Scalar* pp, Scalar* w) {
  if (L.kind[i] == kContextMiss) {
    for (int j = 0; j <= i; ++j) w[j] = Scalar(0);
    return;
  }
  const int b = L.block_of[i];
  Scalar p_cmt = L.cmt >= 0 ? pp[L.cmt] : Scalar(0);
  if (cmt_dropped(p_cmt, L.cmt_cutoff)) p_cmt = Scalar(0);
  if (L.cmt >= 0) w[L.cmt] = 0;
  for (int g = 0; g < b; ++g) {
    const int begin = L.block_start[g], lmk = L.block_start[g + 1] - 1;
    const Scalar gate = L.kind[lmk] == kLandmark ? pp[lmk] : p_cmt * pp[lmk];
    for (int j = begin; j < lmk; ++j) w[j] = gate * pp[j];
    w[lmk] = 0;
  }
  for (int j = L.block_start[b]; j <= i; ++j) w[j] = L.kind[j] == kRegular ? pp[j] : Scalar(0);
}

// Backward for row i, given P' (pp), the weights (w) and G[j] = dL/dw[j]: writes dS[0..i] =
// dL/ds. With delta = sum_j w_j G_j, a_g = sum_{j in block g} P'_j G_j and
// a_cmt = sum over controlled g of P'[lm_g] a_g:
//   own token         P'_j (G_j - delta)
//   free landmark g   P'[lm_g] (a_g - delta)
//   controlled lm g   P'[cmt] P'[lm_g] (a_g - a_cmt)
//   CMT               P'[cmt] (a_cmt - delta)
//   token j in g      w_j (G_j - a_g)
template <class Scalar>
LM_HD void row_backward(const RowLayout& L, int i, const Scalar* pp, const Scalar* w, const Scalar* G, Scalar* ds) {
  if (L.kind[i] == kContextMiss) {
    for (int j = 0; j <= i; ++j) ds[j] = Scalar(0);
    return;
  }
  const int b = L.block_of[i];
  Scalar delta = 0;
  for (int j = 0; j <= i; ++j) delta += w[j] * G[j];
  Scalar a_cmt = 0;
  for (int g = 0; g < b; ++g) {
    const int begin = L.block_start[g], lmk = L.block_start[g + 1] - 1;
    Scalar a = 0;
    for (int j = begin; j < lmk; ++j) a += pp[j] * G[j];
    for (int j = begin; j < lmk; ++j) ds[j] = w[j] * (G[j] - a);
    if (L.kind[lmk] == kLandmark) {
      ds[lmk] = pp[lmk] * (a - delta);
    } else {
      a_cmt += pp[lmk] * a;
      ds[lmk] = a;  // finished below, once a_cmt is known
    }
  }
  const Scalar p_cmt = L.cmt >= 0 ? pp[L.cmt] : Scalar(0);
  for (int g = 0; g < b; ++g) {
    const int lmk = L.block_start[g + 1] - 1;
    if (L.kind[lmk] == kControlledLandmark) ds[lmk] = p_cmt * pp[lmk] * (ds[lmk] - a_cmt);
  }
  if (L.cmt >= 0) ds[L.cmt] = p_cmt * (a_cmt - delta);
  for (int j = L.block_start[b]; j <= i; ++j) ds[j] = L.kind[j] == kRegular ? pp[j] * (G[j] - delta) : Scalar(0);
}

}  // namespace gsm
}  // namespace lm
