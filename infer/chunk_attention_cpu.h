// chunk_attention_cpu.h: the CPU half of step 3 of chunk attention, the twin of
// infer/cuda/chunk_attention.h. Internal to infer/: callers use attend_plan() or chunk_attention()
// in infer/chunk_attention.h, which check the inputs and choose the device.
#pragma once

#include "infer/chunk_attention.h"

namespace lm {

// attend_plan() on the CPU for contiguous q_rot (NH, n, HS), k_rot and v_loc (NH, L, HS) in the
// cache's dtype (Scalar). Per (head, query) the virtual row, its grouped softmax and the weighted
// values (attend_row, cpu_rows.h), the rows in parallel. Counts the CMT rows into cmt_count, fills
// `mass` when given, shows every row to `observers` when given (hooks.h), and adds the captured
// head's rows to ctx.capture when set.
// Its buffer of shared rotated keys is what release_chunk_scratch() hands back.
template <class Scalar>
Tensor attend_cpu(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                  const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count, RowMass* mass,
                  const HookList* observers);

}  // namespace lm
