// rotary_cache.h: the rotary tables of cached inference (nn/functional.h's rotary_tables, kept
// between chunks). A session decides every position at use (stingy slots, the chunk after them),
// so it asks for cos/sin rows many times per chunk: this cache computes each row once and hands
// it out as gathered tables (for the rotary op), as raw rows (retrieval_plan.cpp rotates the
// newest landmark keys by hand) and transposed (cpu_rows.cpp rotates retrieved keys while
// scoring them, vectorised over positions). It lives in infer/ because only inference uses it;
// training builds its tables once per forward (GPT::forward). Test: tests/test_rotary_cache.cpp.
//
// It holds a window of positions [lo, hi), not every position from 0: in stingy mode the chunk
// sits after k reserved slots, at (k + 1)(F + 1), and with few blocks cached only the slots next to
// the chunk are used, so the rows held follow the text, not k (retrieval_positions, cpu_rows.h).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/functional.h"
#include "tensor/check.h"
#include "tensor/tensor.h"

namespace lm {

// The transposed tables of a window of positions, for loops that vectorise over positions: the
// cosine of pair i at position p is cos_at(p)[i * stride], so consecutive positions of one pair
// are adjacent. Column 0 is position `origin`, the window's first. Valid until the cache grows.
template <class Scalar>
struct RotaryColumns {
  const Scalar* cos_t = nullptr;  // (HS/2, stride)
  const Scalar* sin_t = nullptr;
  int64_t stride = 0;  // columns per pair: the positions held
  int64_t origin = 0;  // the position of column 0
  const Scalar* cos_at(int64_t p) const { return cos_t + (p - origin); }
  const Scalar* sin_at(int64_t p) const { return sin_t + (p - origin); }
};

// Rows for a window of positions [lo, hi), each computed once, exactly as rotary_tables computes
// it (so a row has the same bits whatever the window), and the window grown on demand: up as
// positions above it are asked for, down as positions below it are. Each growth at least doubles
// the window (never below position 0), so a row is recomputed or copied O(1) times on average.
class RotaryCache {
 public:
  RotaryCache(int64_t head_size, double base, DType dtype, Device device);
  // Holds the rows of positions [lo, hi) from now on (0 <= lo <= hi; nothing to do when lo == hi).
  void cover(int64_t lo, int64_t hi);
  RotaryTables tables(const std::vector<int32_t>& positions);  // (1, n, HS/2), non-negative positions
  RotaryTables range(int64_t start, int64_t n);                // positions start .. start+n-1
  // One position's tables (1, 1, HS/2) without moving the window: the held row when the window
  // has it, else computed here (rotary_tables: the same bits) and not kept. For a lone position
  // far below the window: stingy mode keeps every landmark key rotated at slot 0's landmark,
  // position F (LayerCache::absorb), while the window sits next to the chunk.
  RotaryTables at(int64_t position);
  // Raw rows (HS/2 values each, consecutive positions adjacent) for loops that rotate by hand:
  // the returned pointer is row `start`; the window is grown to cover the n rows first. Valid until
  // the next call that grows the cache. CPU caches only.
  template <class Scalar>
  const Scalar* cos_rows(int64_t start, int64_t n) {
    return rows<Scalar>(cos_, start, n);
  }
  template <class Scalar>
  const Scalar* sin_rows(int64_t start, int64_t n) {
    return rows<Scalar>(sin_, start, n);
  }
  // The transposed tables, the window grown to cover positions [lo, hi) first. CPU caches only.
  template <class Scalar>
  RotaryColumns<Scalar> columns(int64_t lo, int64_t hi) {
    LM_CHECK(device_ == Device::CPU, "RotaryCache: raw columns need a CPU cache");
    cover(lo, hi);
    if (rows_held() == 0) return {};
    return {cos_t_.template data<Scalar>(), sin_t_.template data<Scalar>(), rows_held(), lo_};
  }
  int64_t first_held() const { return lo_; }       // the window's first position
  int64_t rows_held() const { return hi_ - lo_; }  // its length

 private:
  template <class Scalar>
  const Scalar* rows(const Tensor& table, int64_t start, int64_t n) {
    LM_CHECK(device_ == Device::CPU && start >= 0 && n >= 0,
             "RotaryCache: raw rows need a CPU cache and a valid range");
    cover(start, start + n);  // reassigns the member `table` refers to, so read it after
    return n == 0 ? nullptr : table.template data<Scalar>() + (start - lo_) * (head_size_ / 2);
  }
  RotaryTables compute_rows(int64_t lo, int64_t hi) const;  // positions [lo, hi) by rotary_tables: (hi - lo, HS/2)
  int64_t head_size_;
  double base_;
  DType dtype_;
  Device device_;
  int64_t lo_ = 0, hi_ = 0;  // the window: row r of the tables is position lo_ + r
  Tensor cos_, sin_;         // (hi - lo, HS/2)
  Tensor cos_t_, sin_t_;     // (HS/2, hi - lo), CPU caches only
};

}  // namespace lm
