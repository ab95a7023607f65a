// retrieval_trim.h: beyond the paper. Retrieving fewer blocks than the plan chose, decided from
// scores alone, before any block is read (chunk_attention calls these between plan_retrieval and
// attend_plan):
//   drop_gated_off   a row whose context-miss token falls below the cutoff gives its retrieved
//                    blocks weight 0 (Appendix D), and the paper still retrieves them ("we always
//                    perform the retrieval"). Here their blocks leave the plan, so a block that only
//                    such rows chose is not fetched, copied or attended. The logits are the same
//                    bits: the CMT's share and the local weights do not depend on the retrieved
//                    blocks, and zero weights are skipped (tests/test_retrieval_trim.cpp).
//   trim_to_left_out adaptive k (InferConfig::left_out = E, exact positions): each row keeps the
//                    fewest of its best-scored blocks whose left-out weight M (certificate.h) is at
//                    most E, at most the k it chose.
// Both need the part of the gates' group that lies in the chunk's own keys (local_gates).
#pragma once

#include <cstdint>
#include <vector>

#include "infer/layer_cache.h"
#include "infer/retrieval_plan.h"
#include "tensor/tensor.h"

namespace lm {

// Per (head, query) row r = h * n + i of a chunk, from its scores against [tail | chunk] and the
// CMT: the grouped softmax's top group without the cached landmarks, i.e. the query's own block's
// regular tokens and the free landmarks of earlier local blocks (and the CMT).
struct LocalGates {
  std::vector<double> log_rest;  // log of sum e^score over those local keys (-inf when none)
  std::vector<double> p_cmt;     // with a CMT: its share of the top group, P'(CMT); empty without
};
// q_rot (NH, n, HS) and k_rot (NH, L, HS) on the CPU, as attend_plan takes them.
LocalGates local_gates(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot);

// Empties the rows whose P'(CMT) is below `cutoff` by a relative margin of 1e-4 (so that the row's
// own grouped softmax, in its own rounding, drops it as well), and every row at a cutoff of 1.
// Returns the rows emptied.
int64_t drop_gated_off(const LocalGates& g, double cutoff, RetrievalPlan& plan);

// Adaptive k: rows over which it ran, the blocks they kept, and those that kept all they had
// chosen while their left-out weight was still above E (capped by k).
struct AdaptiveCount {
  int64_t rows = 0, blocks = 0, capped = 0;
};
// Cuts each row of `plan` (a scan's top k, exact positions) to the fewest of its blocks, best score
// first (ties: the older block), whose left-out weight is at most E. A row the CMT gates off keeps
// none (its M is 0 whatever it reads).
AdaptiveCount trim_to_left_out(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot,
                               const LocalGates& g, double E, RetrievalPlan& plan);

}  // namespace lm
