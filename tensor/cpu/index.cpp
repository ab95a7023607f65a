// cpu/index.cpp: embedding gather and its scatter-add backward. The backward splits the work
// by channel, not by position, so no two threads ever add into the same element and the sum
// order is always position order (deterministic, no atomics). Twin: cuda/index.cu.
#include <cstring>

#include "tensor/cpu/parallel.h"
#include "tensor/kernels.h"

namespace lm {
namespace cpu {

int64_t embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  const int64_t V = weight.size(0), C = weight.size(1), N = idx.numel();
  const int32_t* ix = idx.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    if (ix[n] < 0 || ix[n] >= V) return n;
  LM_DISPATCH_FLOAT(weight.dtype(), "embedding", {
    const scalar_t* w = weight.data<scalar_t>();
    scalar_t* o = out.data<scalar_t>();
    parallel_for(N, C, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) std::memcpy(o + n * C, w + static_cast<int64_t>(ix[n]) * C, C * sizeof(scalar_t));
    });
  });
  return -1;
}

void embedding_backward(const Tensor& gout, const Tensor& idx, const Tensor& dweight) {
  const int64_t V = dweight.size(0), C = dweight.size(1), N = idx.numel();
  const int32_t* ix = idx.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)  // a bad index would scatter outside dweight
    LM_CHECK(ix[n] >= 0 && ix[n] < V,
             "embedding_backward: index " << ix[n] << " at position " << n << " is out of range [0, " << V << ")");
  LM_DISPATCH_FLOAT(dweight.dtype(), "embedding_backward", {
    const scalar_t* g = gout.data<scalar_t>();
    scalar_t* d = dweight.data<scalar_t>();
    std::memset(d, 0, static_cast<size_t>(V * C) * sizeof(scalar_t));
    parallel_for(C, N, [&](int64_t c0, int64_t c1) {
      for (int64_t n = 0; n < N; ++n) {
        scalar_t* row = d + static_cast<int64_t>(ix[n]) * C;
        const scalar_t* gr = g + n * C;
        for (int64_t c = c0; c < c1; ++c) row[c] += gr[c];
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
