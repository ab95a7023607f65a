// sparse/rows.h: one query row of top-k landmark attention ("training with the cache", beyond
// the paper), forward and backward, as LM_HD functions that the CPU kernel
// (sparse/cpu/attention.cpp) and the CUDA kernel (sparse/cuda/attention.cu) both run.
//
// The dense grouped softmax (landmark/grouped_softmax.h) lets query i of block b reach the
// regular tokens of every earlier block g through the gate P'[lm_g]. Here query i scores the
// landmarks of all b earlier blocks, keeps the K best (ties to the older block, as cached
// inference does), and attends to the regular tokens of those K blocks only:
//
//   top group = own block's regular tokens (j <= i)  +  landmarks of set A
//               A = the chosen blocks C   (Gates::Chosen, "train like you infer": the softmax
//                                           the cached inference computes)
//               A = every earlier block   (Gates::All, "exact gates": the blocks left out keep
//                                           their share of the normaliser; their mass is lost)
//   group g in C = the regular tokens of block g, gated by P'[lm_g]
//
// Weights: own token j: P'_j; token j of chosen block g: P'[lm_g] P'_j; all else 0. With K at or
// above b, C is every earlier block and both variants are the dense op. The left-out share of
// row i, M_i = sum over g in A \ C of P'[lm_g], is the gate mass no token receives (zero under
// Chosen); it is the M that beyond/certificate bounds at inference.
//
// The backward is the dense row's (grouped_softmax.h, gsm::row_backward) restricted to the row's
// entries. With G_j = dL/dw_j, delta = sum_j w_j G_j and a_g = sum_{j in g} P'_j G_j:
//   own token j          dS_j = P'_j (G_j - delta)
//   landmark g in C      dS = P'[lm_g] (a_g - delta)
//   landmark g in A \ C  dS = P'[lm_g] (0 - delta)     (no tokens: a_g = 0)
//   token j of g in C    dS_j = P'[lm_g] P'_j (G_j - a_g)
// The choice C itself carries no gradient (as in MoBA and NSA): it is a set of indices.
//
// Arrays of a row, all short: the own block's scores (own_end - own_begin), the b landmark scores,
// and the chosen blocks' token scores back to back in the order of C (ascending). P' may be
// written over the scores in place.
#pragma once

#include <cstdint>

#include "landmark/grouped_softmax.h"

namespace lm {
namespace sparse {

// The top k of s[0..b) (landmark scores of the earlier blocks): writes the chosen block indices to
// chosen[0..n) in ascending order and returns n = min(k, b). Ties go to the older block: a later
// block enters only with a strictly larger score. best: scratch of k values.
template <class Scalar>
LM_HD int select_top_k(const Scalar* s, int b, int k, int32_t* chosen, Scalar* best) {
  if (b <= k) {
    for (int g = 0; g < b; ++g) chosen[g] = g;
    return b;
  }
  int n = 0;  // held, best first
  for (int g = 0; g < b; ++g) {
    const Scalar v = s[g];
    if (n == k && !(v > best[k - 1])) continue;
    int pos = n < k ? n++ : k - 1;
    while (pos > 0 && v > best[pos - 1]) {
      best[pos] = best[pos - 1];
      chosen[pos] = chosen[pos - 1];
      --pos;
    }
    best[pos] = v;
    chosen[pos] = g;
  }
  for (int a = 1; a < n; ++a)  // ascending block order (insertion sort: n is small)
    for (int c = a; c > 0 && chosen[c - 1] > chosen[c]; --c) {
      const int32_t t = chosen[c];
      chosen[c] = chosen[c - 1];
      chosen[c - 1] = t;
    }
  return n;
}

// Where row i's pieces are: its own regular tokens [own_begin, own_end), its b earlier blocks,
// and the chosen ones C = chosen[0..n_chosen).
struct SparseRow {
  int own_begin = 0, own_end = 0, b = 0, n_chosen = 0;
  const int32_t* chosen = nullptr;
};

LM_HD SparseRow sparse_row(const RowLayout& L, int i, const int32_t* chosen, int n_chosen) {
  SparseRow r;
  r.b = L.block_of[i];
  r.own_begin = L.block_start[r.b];
  r.own_end = L.kind[i] == kRegular ? i + 1 : i;  // i's own landmark is excluded
  r.chosen = chosen;
  r.n_chosen = n_chosen;
  return r;
}

// First position and landmark position of block g (its regular tokens are [first, landmark)).
LM_HD int block_first(const RowLayout& L, int g) { return L.block_start[g]; }
LM_HD int block_landmark(const RowLayout& L, int g) { return L.block_start[g + 1] - 1; }

// Is block g in the top group's landmark set A? (c: the next index into the ascending chosen list,
// advanced as g walks up.)
LM_HD bool advance_chosen(const SparseRow& r, int g, int& c) {
  if (c < r.n_chosen && r.chosen[c] == g) {
    ++c;
    return true;
  }
  return false;
}

// Forward of row i. In: s_own (own_end - own_begin), s_lm (b), s_tok (the chosen blocks' tokens).
// Out: p_own, p_lm (b; 0 for a landmark outside A), p_tok (in-group probabilities); any may alias
// its input. Returns the left-out share M_i.
template <class Scalar>
LM_HD Scalar row_forward(const RowLayout& L, const SparseRow& r, bool all_gates, const Scalar* s_own,
                         const Scalar* s_lm, const Scalar* s_tok, Scalar* p_own, Scalar* p_lm, Scalar* p_tok) {
  const int n_own = r.own_end - r.own_begin;
  Scalar m = gsm::neg_inf<Scalar>();
  for (int j = 0; j < n_own; ++j) m = s_own[j] > m ? s_own[j] : m;
  for (int g = 0, c = 0; g < r.b; ++g)
    if (advance_chosen(r, g, c) || all_gates) m = s_lm[g] > m ? s_lm[g] : m;
  Scalar z = 0;
  for (int j = 0; j < n_own; ++j) {
    p_own[j] = math::exp_softmax(s_own[j] - m);
    z += p_own[j];
  }
  for (int g = 0, c = 0; g < r.b; ++g) {
    const bool in_a = advance_chosen(r, g, c) || all_gates;
    p_lm[g] = in_a ? math::exp_softmax(s_lm[g] - m) : Scalar(0);
    z += p_lm[g];
  }
  const Scalar inv = Scalar(1) / z;
  for (int j = 0; j < n_own; ++j) p_own[j] *= inv;
  Scalar left_out = 0;
  for (int g = 0, c = 0; g < r.b; ++g) {
    const bool chosen = advance_chosen(r, g, c);
    p_lm[g] *= inv;
    if (!chosen) left_out += p_lm[g];
  }
  int off = 0;  // each chosen block: its own softmax
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], len = block_landmark(L, g) - block_first(L, g);
    Scalar mg = gsm::neg_inf<Scalar>(), zg = 0;
    for (int j = off; j < off + len; ++j) mg = s_tok[j] > mg ? s_tok[j] : mg;
    for (int j = off; j < off + len; ++j) {
      p_tok[j] = math::exp_softmax(s_tok[j] - mg);
      zg += p_tok[j];
    }
    const Scalar ig = Scalar(1) / zg;
    for (int j = off; j < off + len; ++j) p_tok[j] *= ig;
    off += len;
  }
  return left_out;
}

// Backward of row i from its P' (p_own, p_lm, p_tok, as row_forward wrote them) and G (g_own,
// g_tok: dL/dw of the attended tokens). Writes dS: ds_own, ds_lm (b entries; 0 outside A),
// ds_tok; ds_own / ds_tok may alias g_own / g_tok.
template <class Scalar>
LM_HD void row_backward(const RowLayout& L, const SparseRow& r, bool all_gates, const Scalar* p_own, const Scalar* p_lm,
                        const Scalar* p_tok, const Scalar* g_own, const Scalar* g_tok, Scalar* ds_own, Scalar* ds_lm,
                        Scalar* ds_tok) {
  const int n_own = r.own_end - r.own_begin;
  Scalar delta = 0;
  for (int j = 0; j < n_own; ++j) delta += p_own[j] * g_own[j];
  int off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {  // delta gains P'[lm_g] a_g; ds_lm holds a_g for now
    const int g = r.chosen[c], len = block_landmark(L, g) - block_first(L, g);
    Scalar a = 0;
    for (int j = off; j < off + len; ++j) a += p_tok[j] * g_tok[j];
    ds_lm[g] = a;
    delta += p_lm[g] * a;
    off += len;
  }
  off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], len = block_landmark(L, g) - block_first(L, g);
    const Scalar a = ds_lm[g], gate = p_lm[g];
    for (int j = off; j < off + len; ++j) ds_tok[j] = gate * p_tok[j] * (g_tok[j] - a);
    off += len;
  }
  for (int g = 0, c = 0; g < r.b; ++g) {
    const bool chosen = advance_chosen(r, g, c);
    ds_lm[g] = chosen ? p_lm[g] * (ds_lm[g] - delta) : (all_gates ? -p_lm[g] * delta : Scalar(0));
  }
  for (int j = 0; j < n_own; ++j) ds_own[j] = p_own[j] * (g_own[j] - delta);
}

}  // namespace sparse
}  // namespace lm
