// cmt_skip.h: beyond the paper. A row whose context-miss token falls below the cutoff gives its
// retrieved blocks weight 0 (Appendix D), and the paper still retrieves them ("we always perform
// the retrieval"). Here those rows read no block: their blocks leave the plan that is read, so a
// block that only such rows chose is not fetched, copied or attended. The logits are the same
// bits: the CMT's share and the local weights do not depend on the retrieved blocks, and zero
// weights are skipped (tests/test_retrieval_trim.cpp). It attaches at the "which blocks are read"
// point of infer/hooks.h and counts the blocks read.
#pragma once

#include <cstdint>

#include "beyond/local_gates.h"
#include "infer/hooks.h"
#include "infer/retrieval_plan.h"

namespace lm {

// Empties the rows of `plan` that gated_off (local_gates.h) says the CMT drops, and every row at a
// cutoff of 1. Returns the rows emptied.
int64_t drop_gated_off(const LocalGates& g, double cutoff, RetrievalPlan& plan);

// The hook, for a session of a model with a context-miss token. With `skip` false it reads what
// the paper reads and only counts (--no-cmt-skip). Not while a trace or a capture runs: they show
// what retrieval chose. `gates`: shared with adaptive k (adaptive_k.h) when both are attached.
class CmtSkip : public RetrievalHooks {
 public:
  CmtSkip(bool skip, LocalGatesOnce* gates) : skip_(skip), gates_(gates) {}
  bool needs_chunk_path() const override { return false; }  // it only saves reads
  bool read_fewer(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                  const RetrievalPlan& plan, RetrievalPlan& read) override;
  void end_chunk(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                 const RetrievalPlan& read) override;
  // Distinct blocks the rows attended (what a store on disk read), summed over the (chunk, layer)
  // pairs of the chunk path that had a cache: fewer than the distinct blocks chosen when gated-off
  // rows dropped theirs.
  int64_t attended = 0;

 private:
  bool skip_;
  LocalGatesOnce* gates_;
};

}  // namespace lm
