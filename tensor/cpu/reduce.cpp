// cpu/reduce.cpp: reductions over one dim (sum, mean, max, argmax) and the row-wise softmax
// family with its backward. Every output element is reduced by one thread in index order, so
// results never depend on the thread count. f32 sums accumulate in f64. Twin: cuda/reduce.cu.
#include <cmath>
#include <limits>

#include "tensor/cpu/parallel.h"
#include "tensor/kernels.h"

namespace lm {
namespace cpu {

namespace {
template <class Scalar>
struct Acc {
  using type = double;
};
template <>
struct Acc<int32_t> {
  using type = int64_t;
};

// x (outer, n, inner) -> out (outer, inner), reducing over n in order.
template <class Scalar>
void reduce_impl(ReduceOp op, const Scalar* x, int64_t outer, int64_t n, int64_t inner, const Tensor& out) {
  using acc_t = typename Acc<Scalar>::type;
  if (op == ReduceOp::Argmax) {
    int32_t* o = out.data<int32_t>();
    parallel_for(outer * inner, n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const Scalar* p = x + (r / inner) * n * inner + r % inner;
        int64_t best = 0;
        Scalar bv = p[0];
        for (int64_t j = 1; j < n; ++j) {
          Scalar v = p[j * inner];
          // NaN counts as the maximum, like PyTorch; the first occurrence wins ties.
          if (v > bv || (v != v && bv == bv)) {
            bv = v;
            best = j;
          }
        }
        o[r] = static_cast<int32_t>(best);
      }
    });
    return;
  }
  Scalar* o = out.data<Scalar>();
  parallel_for(outer * inner, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const Scalar* p = x + (r / inner) * n * inner + r % inner;
      if (op == ReduceOp::Max) {
        Scalar m = p[0];
        for (int64_t j = 1; j < n; ++j) {
          Scalar v = p[j * inner];
          if (v > m || v != v) m = v;  // NaN propagates
        }
        o[r] = m;
      } else {
        acc_t s = 0;
        for (int64_t j = 0; j < n; ++j) s += static_cast<acc_t>(p[j * inner]);
        if (op == ReduceOp::Mean) s = static_cast<acc_t>(static_cast<double>(s) / static_cast<double>(n));
        o[r] = static_cast<Scalar>(s);
      }
    }
  });
}
}  // namespace

void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& out) {
  LM_DISPATCH_ALL(x.dtype(), "reduce", { reduce_impl<scalar_t>(op, x.data<scalar_t>(), outer, n, inner, out); });
}

void softmax(const Tensor& x, const Tensor& out, bool log) {
  int64_t cols = x.size(-1), rows = x.numel() / cols;
  LM_DISPATCH_FLOAT(x.dtype(), "softmax", {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    parallel_for(rows, 4 * cols, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const scalar_t* xr = px + r * cols;
        scalar_t* yr = po + r * cols;
        scalar_t m = -std::numeric_limits<scalar_t>::infinity();
        for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
        if (m == -std::numeric_limits<scalar_t>::infinity()) m = 0;  // all -inf: avoid inf - inf
        scalar_t s = 0;
        if (log) {
          for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
          scalar_t lse = m + std::log(s);
          for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] - lse;
        } else {
          for (int64_t j = 0; j < cols; ++j) {
            yr[j] = std::exp(xr[j] - m);
            s += yr[j];
          }
          scalar_t inv = scalar_t(1) / s;
          for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
        }
      }
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& g, const Tensor& dx, bool log) {
  int64_t cols = y.size(-1), rows = y.numel() / cols;
  LM_DISPATCH_FLOAT(y.dtype(), "softmax_backward", {
    const scalar_t* py = y.data<scalar_t>();
    const scalar_t* pg = g.data<scalar_t>();
    scalar_t* pd = dx.data<scalar_t>();
    parallel_for(rows, 3 * cols, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const scalar_t* yr = py + r * cols;
        const scalar_t* gr = pg + r * cols;
        scalar_t* dr = pd + r * cols;
        scalar_t s = 0;
        if (log) {
          for (int64_t j = 0; j < cols; ++j) s += gr[j];
          for (int64_t j = 0; j < cols; ++j) dr[j] = gr[j] - std::exp(yr[j]) * s;
        } else {
          for (int64_t j = 0; j < cols; ++j) s += gr[j] * yr[j];
          for (int64_t j = 0; j < cols; ++j) dr[j] = yr[j] * (gr[j] - s);
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
