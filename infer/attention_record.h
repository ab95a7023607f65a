// attention_record.h: what a layer's attention for one chunk reports beside its output, kept apart
// from the arithmetic (cpu_rows.h, chunk_attention_cpu.h, cuda/chunk_attention.cu) and the
// dispatch (chunk_attention.cpp):
//   capture_row       one (head, query) row as AttentionCapture keeps it (attention maps);
//   row_mass          where one row's attention went, per block, tail and chunk (RowMass: the
//                     explorer, through a detailed RetrievalTrace);
//   trace_step        a chunk's plan as RetrievalTrace records it;
//   retrieval_record  a chunk's RetrievalRecord: blocks cached, distinct and fetched (Table 2's
//                     counts), keys scored, CMT rows dropped (Table 3);
//   fetched_blocks    its fetched count alone (also a standard model read in blocks,
//                     beyond/standard_blocks.cpp).
// None of them changes what the rows compute.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/chunk_attention.h"
#include "infer/retrieval_plan.h"
#include "infer/session.h"

namespace lm {

// The captured row of query i (of a chunk with a tail of tl keys) that chose `chosen`: w holds its
// weights, `first` entries (the CMT, weight 0, not shown) then kb (F+1) for the retrieved blocks,
// then tl + i + 1 for the local keys. Keys are given by their true global positions.
template <class Scalar>
AttentionCapture::Row capture_row(const ChunkContext& ctx, const RetrievalPlan& plan,
                                  const std::vector<int32_t>& chosen, int64_t i, int64_t tl, int64_t first,
                                  const Scalar* w);

// One row's RowMass entry from its weights w = [CMT (`first` entries) | kb blocks of B1 keys |
// tail (tl) | chunk up to the query]: nloc = tl + i + 1 local keys; kb + 2 sums, each block's, the
// tail's, the chunk's.
template <class Scalar>
std::vector<double> row_mass(const Scalar* w, int64_t first, int64_t kb, int64_t B1, int64_t tl, int64_t nloc);

// The trace's record of a chunk of n queries: its plan; with the trace's detail also each chosen
// block's score (plan.score) and each row's mass (moved from *mass, which must then be given).
RetrievalTrace::Step trace_step(const ChunkContext& ctx, const RetrievalPlan& plan, int64_t n, RowMass* mass);

// Blocks fetched for the (head, query) rows' chosen sets `sel` (NH x n rows, head-major): one per
// member of each distinct set, as the paper's Table 2 counts them (a set shared by the heads of a
// token, or by the tokens of a head, is fetched once).
int64_t fetched_blocks(const std::vector<std::vector<int32_t>>& sel, int64_t n, Granularity granularity);

// What retrieval did for a chunk of n queries under `plan`. Fetched counts one per member of each
// distinct set, as the paper's Table 2 counts them: a set shared by the heads of a token, or by
// the tokens of a head, is fetched once.
RetrievalRecord retrieval_record(const ChunkContext& ctx, const RetrievalPlan& plan, int64_t n, const CmtCount& cmt);

}  // namespace lm
