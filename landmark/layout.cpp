// layout.cpp: make_layout (layout.h).
#include "landmark/layout.h"

#include <vector>

#include "tensor/create.h"

namespace lm {

RowLayout LandmarkLayout::row(int64_t b) const {
  LM_CHECK(kind.device() == Device::CPU, "LandmarkLayout::row: the layout lives on " << device_name(kind.device()));
  RowLayout r;
  r.kind = kind.data<int32_t>() + b * T;
  r.block_of = block_of.data<int32_t>() + b * T;
  r.block_start = block_start.data<int32_t>() + b * (T + 1);
  r.cmt = cmt.data<int32_t>()[b];
  r.cmt_cutoff = cmt_cutoff;
  return r;
}

LandmarkLayout make_layout(const Tensor& kinds, Device device) {
  LM_CHECK(kinds.defined() && kinds.dim() == 2 && kinds.dtype() == DType::I32,
           "make_layout: kinds must be i32 (B, T), got " << describe(kinds));
  const int64_t B = kinds.size(0), T = kinds.size(1);
  std::vector<int32_t> k = kinds.to_vector<int32_t>();
  std::vector<int32_t> block_of(B * T), start(B * (T + 1), static_cast<int32_t>(T)), cmt(B, -1);
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* kr = k.data() + b * T;
    int32_t blk = 0;
    int64_t first = 0;
    if (T > 0 && kr[0] == kContextMiss) {
      cmt[b] = 0;
      block_of[b * T] = -1;
      first = 1;
    }
    start[b * (T + 1)] = static_cast<int32_t>(first);
    for (int64_t t = first; t < T; ++t) {
      const int32_t kind = kr[t];
      LM_CHECK(kind >= kRegular && kind <= kContextMiss,
               "make_layout: unknown token kind " << kind << " at row " << b << ", position " << t);
      LM_CHECK(kind != kContextMiss,
               "make_layout: a context-miss token may only be at position 0 (row " << b << ", position " << t << ")");
      block_of[b * T + t] = blk;
      if (kind == kLandmark || kind == kControlledLandmark) {
        LM_CHECK(t > start[b * (T + 1) + blk],
                 "make_layout: block " << blk << " of row " << b
                                       << " has no regular token before its landmark at position " << t
                                       << " (a window must not start with a landmark; see docs/landmark.md)");
        ++blk;
        start[b * (T + 1) + blk] = static_cast<int32_t>(t + 1);
      }
    }
  }
  LandmarkLayout L;
  L.B = B;
  L.T = T;
  L.kind = kinds.contiguous().to(device);
  L.block_of = from_vector(block_of, {B, T}, device);
  L.block_start = from_vector(start, {B, T + 1}, device);
  L.cmt = from_vector(cmt, {B}, device);
  return L;
}

}  // namespace lm
