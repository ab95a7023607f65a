// layout.h: the block structure of each batch row, computed once per batch on the host from the
// token kinds and handed to the attention kernels as small i32 tensors (see RowLayout in
// grouped_softmax.h). Block g = the positions after landmark g-1 up to and including landmark g;
// the open tail (no landmark yet) is the last block. The CMT token, when present, sits at
// position 0 outside every block.
#pragma once

#include <memory>

#include "landmark/grouped_softmax.h"
#include "tensor/tensor.h"

namespace lm {

// The drop-rate statistic of Appendix D: over every (head, query) that sees the CMT, how many had
// a CMT probability below the cutoff (so their controlled blocks were dropped).
struct CmtStats {
  int64_t rows = 0, dropped = 0;
  double drop_rate() const { return rows == 0 ? 0.0 : static_cast<double>(dropped) / static_cast<double>(rows); }
};

struct LandmarkLayout {
  Tensor kind;         // i32 (B, T)
  Tensor block_of;     // i32 (B, T), -1 for the CMT
  Tensor block_start;  // i32 (B, T + 1), unused entries = T
  Tensor cmt;          // i32 (B), position of the CMT or -1
  int64_t B = 0, T = 0;
  double cmt_cutoff = 0;                // evaluation only; see RowLayout::cmt_cutoff
  std::shared_ptr<CmtStats> cmt_stats;  // when set, every forward adds its counts here
  // Host view of row b (valid only for CPU tensors).
  RowLayout row(int64_t b) const;
};

// kinds: i32 (B, T) of TokenKind values. Checks that a CMT appears only at position 0 and that
// no block before the last is empty (a window starting with a landmark would give block 0 no
// regular tokens, so its landmark's mass would vanish: batching avoids such windows).
LandmarkLayout make_layout(const Tensor& kinds, Device device = Device::CPU);

}  // namespace lm
