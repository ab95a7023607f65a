// chunk_attention.h: one layer's attention for one chunk at inference, in three steps:
//   1, 2. the retrieval plan: which cached blocks each (head, query) takes and where they sit
//         (retrieval_plan.h);
//   3.    the attention over that plan: for every (head, query) the grouped softmax over its
//         virtual row [CMT | retrieved blocks | tail | chunk] (virtual_row.h) and the weighted
//         values.
// Step 3 runs here (attend_plan: CPU rows, the CUDA twin in cuda/chunk_attention.cu). Its oracle
// is the paper's AttWeight as the end-to-end reference writes it (infer/reference.h): the tests
// hold attend_plan against it on random plans (tests/test_chunk_attention.cpp) and the whole of
// cached inference against the reference (tests/test_reference.cpp). The grouped softmax of the
// fast rows is the very row function the training kernels use (landmark/grouped_softmax.h).
#pragma once

#include <vector>

#include "infer/layer_cache.h"
#include "infer/retrieval_plan.h"
#include "infer/session.h"
#include "tensor/tensor.h"

namespace lm {

// With a context-miss token: the (head, query) rows that had one, and how many of them had
// S(CMT) below the cutoff (their retrieval was dropped, Appendix D).
struct CmtCount {
  int64_t rows = 0, dropped = 0;
};

// Where one row's attention went: per (head, query) row r = h * n + i, its weight on each
// retrieved block (the block's F + 1 keys), then on the tail, then on the chunk up to the query.
using RowMass = std::vector<std::vector<double>>;  // (NH * n) rows of kb + 2 values

// Step 3. q_rot (NH, n, HS) rotated queries of the chunk; k_rot (NH, L, HS) rotated keys and
// v_loc (NH, L, HS) values of [tail | chunk], L = tail + n, all on the cache's device; `plan` from
// plan_retrieval (or any plan of ascending cached indices with their places). Returns the
// attention output (NH, n, HS) on that device; counts the CMT rows into `cmt` when given; fills
// `mass` when given (CPU rows only: the CUDA rows keep their weights on the device). The hooks of
// ctx.hooks that observe rows (hooks.h) see every row (CPU rows only).
Tensor attend_plan(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt = nullptr, RowMass* mass = nullptr);

// attend_plan's rows share rotated copies of the block keys they chose alike (up to 32 MiB a
// chunk), in a buffer that the calling thread keeps from one chunk to the next.
// release_chunk_scratch gives it back; InferenceSession::feed and read call it when they finish,
// so that between readings a session holds its caches and nothing in proportion to its chunks.
// chunk_scratch_bytes: what the calling thread holds now.
void release_chunk_scratch();
int64_t chunk_scratch_bytes();

// All three steps; fills `record` with what retrieval did, and records the plan in ctx.trace when
// set (with each chosen block's score and each row's mass when the trace asks for detail). The
// hooks of ctx.hooks are called between the plan and the fetch, on the rows, and at the end.
Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                       const Tensor& v_loc, RetrievalRecord* record);

}  // namespace lm
