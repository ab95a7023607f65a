// virtual_row.h: the layout of one query's "virtual row" at cached inference, shared by the CPU
// rows (cpu_rows.cpp) and the CUDA rows (cuda/chunk_attention.cu), so both hand the very
// same RowLayout to gsm::row_forward. The row is, in this order:
//   [CMT]                     with a context-miss token only: its score, weight 0
//   kb retrieved blocks        F regular keys and a landmark each, chronological; the landmark is
//                             CMT-controlled when there is a CMT (a cached block is memory)
//   the local keys            [tail | chunk] up to the query, with their own kinds; landmarks here
//                             are free (still inside the current window)
// Blocks end at landmarks, so block_of / block_start follow from the kinds, as in make_layout.
#pragma once

#include <cstdint>

#include "landmark/grouped_softmax.h"
#include "landmark/tokens.h"
#include "tensor/hostdevice.h"

namespace lm {

// Fills kind, block_of (len entries) and block_start (up to len + 1) for a row of
// len = (cmt ? 1 : 0) + kb (F + 1) + nloc keys and returns its layout. local_kind: the kinds of
// the first nloc local keys.
LM_HD RowLayout virtual_row_layout(bool cmt, double cmt_cutoff, int64_t kb, int64_t F, const int32_t* local_kind,
                                   int64_t nloc, int32_t* kind, int32_t* block_of, int32_t* block_start) {
  const int64_t B1 = F + 1, first = cmt ? 1 : 0, len = first + kb * B1 + nloc;
  if (cmt) kind[0] = kContextMiss;
  const int32_t retrieved_landmark = cmt ? kControlledLandmark : kLandmark;
  // The retrieved blocks: block c is entries [first + c B1, first + (c + 1) B1), its landmark last.
  block_start[0] = static_cast<int32_t>(first);
  if (cmt) block_of[0] = -1;
  for (int64_t c = 0; c < kb; ++c) {
    for (int64_t t = 0; t < B1; ++t) {
      kind[first + c * B1 + t] = t < F ? kRegular : retrieved_landmark;
      block_of[first + c * B1 + t] = static_cast<int32_t>(c);
    }
    block_start[c + 1] = static_cast<int32_t>(first + (c + 1) * B1);
  }
  // The local keys: a block ends at each landmark among them.
  int32_t blk = static_cast<int32_t>(kb);
  for (int64_t j = first + kb * B1; j < len; ++j) {
    const int32_t kd = local_kind[j - first - kb * B1];
    kind[j] = kd;
    block_of[j] = blk;
    if (kd == kLandmark || kd == kControlledLandmark) block_start[++blk] = static_cast<int32_t>(j + 1);
  }
  RowLayout L{kind, block_of, block_start, cmt ? 0 : -1};
  L.cmt_cutoff = cmt_cutoff;
  return L;
}

}  // namespace lm
