// rotary_cache.cpp: RotaryCache (rotary_cache.h).
#include "infer/rotary_cache.h"

#include <algorithm>

#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

RotaryCache::RotaryCache(int64_t head_size, double base, DType dtype, Device device)
    : head_size_(head_size), base_(base), dtype_(dtype), device_(device) {
  grow(1024);
}

void RotaryCache::grow(int64_t positions) {
  const int64_t have = cos_.defined() ? cos_.size(0) : 0;
  if (positions <= have) return;
  const int64_t want = std::max(positions, 2 * have);
  // The new rows come from rotary_tables itself, so they are bit-identical to it.
  RotaryTables t =
      rotary_tables(arange(have, want, 1, DType::I32).reshape({1, want - have}), head_size_, base_, dtype_, device_);
  Tensor c = t.cos.squeeze(0), sn = t.sin.squeeze(0);
  cos_ = have == 0 ? c : concat({cos_, c}, 0);
  sin_ = have == 0 ? sn : concat({sin_, sn}, 0);
  if (device_ == Device::CPU) {  // the transposed copies (cos_cols), rebuilt at each doubling
    cos_t_ = cos_.transpose(0, 1).contiguous();
    sin_t_ = sin_.transpose(0, 1).contiguous();
  }
}

RotaryTables RotaryCache::tables(const std::vector<int32_t>& positions) {
  int32_t hi = 0;
  for (int32_t p : positions) {
    LM_CHECK(p >= 0, "RotaryCache: negative position " << p << " (use rotary_tables)");
    hi = std::max(hi, p);
  }
  grow(static_cast<int64_t>(hi) + 1);
  const int64_t n = static_cast<int64_t>(positions.size());
  Tensor idx = from_vector(positions, {n}, device_);
  return RotaryTables{embedding(cos_, idx).unsqueeze(0), embedding(sin_, idx).unsqueeze(0)};
}

RotaryTables RotaryCache::range(int64_t start, int64_t n) {
  LM_CHECK(start >= 0 && n >= 0, "RotaryCache: bad range start " << start << " n " << n);
  grow(start + n);
  return RotaryTables{cos_.narrow(0, start, n).unsqueeze(0), sin_.narrow(0, start, n).unsqueeze(0)};
}

}  // namespace lm
