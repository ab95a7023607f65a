// rotary_cache.cpp: RotaryCache (rotary_cache.h).
#include "infer/rotary_cache.h"

#include <algorithm>

#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

RotaryCache::RotaryCache(int64_t head_size, double base, DType dtype, Device device)
    : head_size_(head_size), base_(base), dtype_(dtype), device_(device) {}

RotaryTables RotaryCache::compute_rows(int64_t lo, int64_t hi) const {
  // rotary_tables itself, so every row is bit-identical to it (each row depends on its position only).
  RotaryTables t =
      rotary_tables(arange(lo, hi, 1, DType::I32).reshape({1, hi - lo}), head_size_, base_, dtype_, device_);
  return RotaryTables{t.cos.squeeze(0), t.sin.squeeze(0)};
}

void RotaryCache::cover(int64_t lo, int64_t hi) {
  LM_CHECK(lo >= 0 && lo <= hi,
           "RotaryCache: bad positions [" << lo << ", " << hi << ") (negative ones: use rotary_tables)");
  if (lo == hi || (lo >= lo_ && hi <= hi_)) return;
  const int64_t size = rows_held();
  if (size == 0) {  // the first rows: exactly those asked for
    const RotaryTables t = compute_rows(lo, hi);
    cos_ = t.cos;
    sin_ = t.sin;
    lo_ = lo;
    hi_ = hi;
  } else {
    // Grown by at least its own size on each side that must grow (the amortising doubling),
    // never below position 0; the rows held are kept and the new ones computed around them.
    const int64_t new_lo = lo >= lo_ ? lo_ : std::max<int64_t>(0, std::min(lo, lo_ - size));
    const int64_t new_hi = hi <= hi_ ? hi_ : std::max(hi, hi_ + size);
    std::vector<Tensor> c, s;
    if (new_lo < lo_) {
      const RotaryTables below = compute_rows(new_lo, lo_);
      c.push_back(below.cos);
      s.push_back(below.sin);
    }
    c.push_back(cos_);
    s.push_back(sin_);
    if (new_hi > hi_) {
      const RotaryTables above = compute_rows(hi_, new_hi);
      c.push_back(above.cos);
      s.push_back(above.sin);
    }
    cos_ = concat(c, 0);
    sin_ = concat(s, 0);
    lo_ = new_lo;
    hi_ = new_hi;
  }
  if (device_ == Device::CPU) {  // the transposed copies (columns), rebuilt at each growth
    cos_t_ = cos_.transpose(0, 1).contiguous();
    sin_t_ = sin_.transpose(0, 1).contiguous();
  }
}

RotaryTables RotaryCache::tables(const std::vector<int32_t>& positions) {
  const int64_t n = static_cast<int64_t>(positions.size());
  if (n == 0)
    return RotaryTables{Tensor({1, 0, head_size_ / 2}, dtype_, device_),
                        Tensor({1, 0, head_size_ / 2}, dtype_, device_)};
  int32_t lo = positions[0], hi = positions[0];
  for (int32_t p : positions) {
    LM_CHECK(p >= 0, "RotaryCache: negative position " << p << " (use rotary_tables)");
    lo = std::min(lo, p);
    hi = std::max(hi, p);
  }
  cover(lo, static_cast<int64_t>(hi) + 1);
  std::vector<int32_t> rows(positions.size());  // the positions as rows of the window
  for (size_t j = 0; j < positions.size(); ++j) rows[j] = static_cast<int32_t>(positions[j] - lo_);
  Tensor idx = from_vector(rows, {n}, device_);
  return RotaryTables{embedding(cos_, idx).unsqueeze(0), embedding(sin_, idx).unsqueeze(0)};
}

RotaryTables RotaryCache::range(int64_t start, int64_t n) {
  LM_CHECK(start >= 0 && n >= 0, "RotaryCache: bad range start " << start << " n " << n);
  if (n == 0) return tables({});
  cover(start, start + n);
  return RotaryTables{cos_.narrow(0, start - lo_, n).unsqueeze(0), sin_.narrow(0, start - lo_, n).unsqueeze(0)};
}

RotaryTables RotaryCache::at(int64_t position) {
  LM_CHECK(position >= 0, "RotaryCache: negative position " << position << " (use rotary_tables)");
  if (position >= lo_ && position < hi_) return range(position, 1);
  const RotaryTables t = compute_rows(position, position + 1);
  return RotaryTables{t.cos.unsqueeze(0), t.sin.unsqueeze(0)};
}

}  // namespace lm
