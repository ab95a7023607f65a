// shape.h: shapes and strides as plain vectors, plus the few rules every op shares:
// element counts, contiguous strides, broadcasting, and negative-dim normalisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lm {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);             // product of sizes; 1 for a 0-d shape
Shape contiguous_strides(const Shape& s);  // row-major strides in elements
std::string shape_str(const Shape& s);     // "[2, 3, 4]"
// PyTorch broadcasting: align from the right; sizes must match or be 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* opname);
// Maps d in [-ndim, ndim) to [0, ndim); throws naming `opname` otherwise.
int64_t normalize_dim(int64_t d, int64_t ndim, const char* opname);

}  // namespace lm
