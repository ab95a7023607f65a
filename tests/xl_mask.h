// xl_mask.h: the Transformer-XL reading written as one explicit mask over a whole sequence, for
// the tests of the XL option (tests/test_gpt.cpp, tests/test_infer_tools.cpp). It uses nothing of
// GPT::forward_xl or prefix_attention: an attention core of composed ops for GPT::forward.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "nn/gpt.h"
#include "tensor/create.h"

namespace lm {
namespace test {

// Query t, in piece w = t / T, sees the keys j with max(0, w T - M) <= j <= t: the M positions
// before its piece (fewer at the start) and its piece up to itself.
inline AttentionFn xl_mask_core(int64_t T, int64_t M) {
  return [T, M](const Var& q, const Var& k, const Var& v) {
    const int64_t N = q.size(2), HS = q.size(3);
    std::vector<double> visible(static_cast<size_t>(N * N), 0.0);
    for (int64_t t = 0; t < N; ++t)
      for (int64_t j = std::max<int64_t>(0, t / T * T - M); j <= t; ++j) visible[static_cast<size_t>(t * N + j)] = 1.0;
    Var scores = mul(matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(HS)));
    Var masked = where(from_vector(visible, {N, N}), scores, Var(full({}, -INFINITY, q.dtype(), q.device())));
    return matmul(softmax(masked), v);
  };
}

}  // namespace test
}  // namespace lm
