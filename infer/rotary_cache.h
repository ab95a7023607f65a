// rotary_cache.h: the rotary tables of cached inference (nn/functional.h's rotary_tables, kept
// between chunks). A session decides every position at use (stingy slots, the chunk after them),
// so it asks for cos/sin rows many times per chunk: this cache computes each row once and hands
// it out as gathered tables (for the rotary op), as raw rows (retrieval_plan.cpp rotates the
// newest landmark keys by hand) and transposed (cpu_rows.cpp rotates retrieved keys while
// scoring them, vectorised over positions). It lives in infer/ because only inference uses it;
// training builds its tables once per forward (GPT::forward). Test: tests/test_rotary_cache.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/functional.h"
#include "tensor/check.h"
#include "tensor/tensor.h"

namespace lm {

// Rows for positions [0, P) computed once (exactly as rotary_tables does) and grown on demand;
// tables for any list of non-negative positions are then row gathers.
class RotaryCache {
 public:
  RotaryCache(int64_t head_size, double base, DType dtype, Device device);
  RotaryTables tables(const std::vector<int32_t>& positions);  // (1, n, HS/2)
  RotaryTables range(int64_t start, int64_t n);                // positions start .. start+n-1
  // Raw rows (HS/2 values each, consecutive positions adjacent) for loops that rotate by hand;
  // valid until the next call that grows the cache. CPU caches only.
  template <class Scalar>
  const Scalar* cos_rows(int64_t start, int64_t n) {
    return rows<Scalar>(cos_, start, n);
  }
  template <class Scalar>
  const Scalar* sin_rows(int64_t start, int64_t n) {
    return rows<Scalar>(sin_, start, n);
  }
  // The same tables transposed, (HS/2, P): the cos of pair i at position p is
  // cos_cols()[i * col_stride() + p], so consecutive positions of one pair are adjacent (for
  // loops that vectorise over positions). Grown to at least `positions` first; valid until the
  // next call that grows the cache. CPU caches only.
  template <class Scalar>
  const Scalar* cos_cols(int64_t positions) {
    return cols<Scalar>(cos_t_, positions);
  }
  template <class Scalar>
  const Scalar* sin_cols(int64_t positions) {
    return cols<Scalar>(sin_t_, positions);
  }
  int64_t col_stride() const { return cos_.size(0); }

 private:
  void grow(int64_t positions);
  template <class Scalar>
  const Scalar* rows(const Tensor& table, int64_t start, int64_t n) {
    LM_CHECK(device_ == Device::CPU && start >= 0 && n >= 0,
             "RotaryCache: raw rows need a CPU cache and a valid range");
    grow(start + n);
    return table.template data<Scalar>() + start * (head_size_ / 2);
  }
  template <class Scalar>
  const Scalar* cols(const Tensor& table_t, int64_t positions) {
    LM_CHECK(device_ == Device::CPU && positions >= 0, "RotaryCache: raw columns need a CPU cache and a valid count");
    grow(positions);  // reassigns the member table_t refers to, so read it after
    return table_t.template data<Scalar>();
  }
  int64_t head_size_;
  double base_;
  DType dtype_;
  Device device_;
  Tensor cos_, sin_;      // (P, HS/2)
  Tensor cos_t_, sin_t_;  // (HS/2, P), CPU caches only
};

}  // namespace lm
