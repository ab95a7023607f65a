// sparse/attention.h: top-k landmark attention, the op behind `train --train-top-k` (training
// with the cache; beyond the paper, whose Future Work names it). Query i scores the landmarks of
// every earlier block of its window, keeps its K best blocks (per token and head, ties to the
// older block, as cached inference chooses) and attends to the regular tokens of those K blocks
// only, besides its own block. sparse/rows.h writes the row's groups and formulas; this file is
// the op (fused CPU/CUDA kernels with a closed-form backward), its composed reference (the naive
// twin: the dense grouped softmax of landmark/reference.cpp with the left-out blocks masked), and
// the attention core a GPT runs. The choice of blocks carries no gradient.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/var.h"
#include "landmark/layout.h"
#include "nn/gpt.h"

namespace lm {

// The gate group (sparse/rows.h): Chosen keeps only the chosen landmarks in the top group's
// softmax (the softmax cached inference computes); All keeps every earlier landmark there, so
// the gate mass of the blocks left out is lost (the left-out share M).
enum class SparseGates { Chosen, All };
SparseGates parse_sparse_gates(const std::string& s);  // "chosen" | "all"; anything else throws
const char* sparse_gates_name(SparseGates g);

struct SparseOptions {
  int64_t top_k = 0;  // K >= 1 (0 is dense training, which does not use this op)
  SparseGates gates = SparseGates::Chosen;
};

// The mean left-out share M per layer over one forward of a model (Gates::All; 0 rows under
// Chosen). A row counts when it is a regular token's and more than K earlier blocks were there to
// choose from (rows that left nothing out have M = 0 and are not counted). The core fills layer
// l on its l-th call.
struct LeftOutStats {
  std::vector<double> sum;
  std::vector<int64_t> rows;
  int64_t calls = 0;
  double mean(size_t layer) const {
    return layer < rows.size() && rows[layer] > 0 ? sum[layer] / static_cast<double>(rows[layer]) : 0.0;
  }
};

// q, k, v (B, NH, T, HS) -> (B, NH, T, HS), scale 1/sqrt(HS). The layout may not hold a CMT
// (Appendix D's controlled blocks are not supported by this op: an error says so). When
// left_out is given it receives M_i per (head, row): (B, NH, T).
Var sparse_landmark_attention(const Var& q, const Var& k, const Var& v, const LandmarkLayout& layout,
                              const SparseOptions& opts, Tensor* left_out = nullptr);

// The chosen blocks of every (head, row) as the fused forward picks them: i32 (B, NH, T, K),
// ascending, -1 after the last (a row with fewer than K earlier blocks chooses them all).
Tensor sparse_landmark_choice(const Tensor& q, const Tensor& k, const LandmarkLayout& layout, int64_t top_k);

// The naive twin, composed from autograd ops: the paper's group matrix (paper_groups) with the
// regular tokens of the blocks left out masked, and under Chosen their landmarks too; the choice
// is made in plain f64 loops over q and k unless `chosen` (as sparse_landmark_choice returns it)
// is given. It builds a (B NH, T, T, T) tensor: tests only, T up to a few dozen.
Var sparse_landmark_reference(const Var& q, const Var& k, const Var& v, const Tensor& kinds, const SparseOptions& opts,
                              const Tensor& chosen = Tensor());

// Top-k landmark attention as the attention core of a GPT (AttentionFn, nn/gpt.h). With stats,
// each call adds its layer's left-out sums (the l-th call is layer l).
AttentionFn sparse_attention_core(const LandmarkLayout& layout, const SparseOptions& opts,
                                  std::shared_ptr<LeftOutStats> stats = nullptr);

}  // namespace lm
