// cpu/elementwise.cpp: CPU kernels for copies, fills, random draws and elementwise ops.
// The per-element math is in tensor/elementwise_math.h (shared with CUDA); this file only loops.
// Twin: tensor/cuda/elementwise.cu.
#include "tensor/cpu/parallel.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace lm {
namespace cpu {

void copy_strided(const Tensor& dst, const Tensor& src) {
  LM_DISPATCH_ALL(dst.dtype(), "copy", {
    scalar_t* d = dst.data<scalar_t>();
    const scalar_t* s = src.data<scalar_t>();
    strided_apply<2>(dst.shape(), {&dst.strides(), &src.strides()},
                     [&](const int64_t* off, int64_t len, const int64_t* st) {
                       scalar_t* dp = d + off[0];
                       const scalar_t* sp = s + off[1];
                       if (st[0] == 1 && st[1] == 1) {
                         for (int64_t i = 0; i < len; ++i) dp[i] = sp[i];
                       } else {
                         for (int64_t i = 0; i < len; ++i) dp[i * st[0]] = sp[i * st[1]];
                       }
                     });
  });
}

void cast(const Tensor& dst, const Tensor& src) {
  int64_t n = dst.numel();
  LM_DISPATCH_ALL_AS(dst.dtype(), out_t, "cast", {
    out_t* d = dst.data<out_t>();
    LM_DISPATCH_ALL(src.dtype(), "cast", {
      const scalar_t* s = src.data<scalar_t>();
      parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = static_cast<out_t>(s[i]);
      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  int64_t n = dst.numel();
  LM_DISPATCH_ALL(dst.dtype(), "fill", {
    scalar_t* d = dst.data<scalar_t>();
    scalar_t v = static_cast<scalar_t>(value);
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = v;
    });
  });
}

void arange(const Tensor& out, double start, double step) {
  int64_t n = out.numel();
  LM_DISPATCH_ALL(out.dtype(), "arange", {
    scalar_t* d = out.data<scalar_t>();
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = static_cast<scalar_t>(start + static_cast<double>(i) * step);
    });
  });
}

void rand_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  int64_t n = out.numel();
  LM_DISPATCH_FLOAT(out.dtype(), "rand", {
    scalar_t* d = out.data<scalar_t>();
    parallel_for(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        Philox4 r = philox::block(offset + i, static_cast<uint32_t>(RngStream::Uniform), seed);
        d[i] = static_cast<scalar_t>(lo + (hi - lo) * uniform_from<scalar_t>(r));
      }
    });
  });
}

void rand_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
  int64_t n = out.numel();
  LM_DISPATCH_FLOAT(out.dtype(), "randn", {
    scalar_t* d = out.data<scalar_t>();
    parallel_for(n, 32, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        Philox4 r = philox::block(offset + i, static_cast<uint32_t>(RngStream::Normal), seed);
        d[i] = static_cast<scalar_t>(mean + std * normal_from<double>(r));
      }
    });
  });
}

namespace {
// x, y (n) contiguous: y = op(x).
template <UnaryOp OP, class Scalar>
void unary_loop(const Scalar* x, Scalar* y, int64_t n) {
  parallel_for(n, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = math::unary<OP>(x[i]);
  });
}

// out = op(a, b); a and b are views expanded to out's shape (strides may be 0).
template <BinaryOp OP, class Scalar>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Scalar* pa = a.data<Scalar>();
  const Scalar* pb = b.data<Scalar>();
  Scalar* po = out.data<Scalar>();
  strided_apply<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                   [&](const int64_t* off, int64_t len, const int64_t* st) {
                     Scalar* o = po + off[0];
                     const Scalar* x = pa + off[1];
                     const Scalar* y = pb + off[2];
                     // The common layouts get loops the compiler can vectorise.
                     if (st[1] == 1 && st[2] == 1) {
                       for (int64_t i = 0; i < len; ++i) o[i] = math::binary<OP>(x[i], y[i]);
                     } else if (st[1] == 1 && st[2] == 0) {
                       const Scalar yv = *y;
                       for (int64_t i = 0; i < len; ++i) o[i] = math::binary<OP>(x[i], yv);
                     } else if (st[1] == 0 && st[2] == 1) {
                       const Scalar xv = *x;
                       for (int64_t i = 0; i < len; ++i) o[i] = math::binary<OP>(xv, y[i]);
                     } else {
                       for (int64_t i = 0; i < len; ++i) o[i] = math::binary<OP>(x[i * st[1]], y[i * st[2]]);
                     }
                   });
}
}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  int64_t n = x.numel();
  LM_DISPATCH_ALL(x.dtype(), "unary", {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* py = out.data<scalar_t>();
    LM_SWITCH_UNARY(op, unary_loop<OPV, scalar_t>(px, py, n));
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  LM_DISPATCH_ALL(out.dtype(), "binary", { LM_SWITCH_BINARY(op, binary_loop<OPV, scalar_t>(a, b, out)); });
}

void binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_left, const Tensor& out) {
  int64_t n = x.numel();
  LM_DISPATCH_ALL(x.dtype(), "binary_scalar", {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    const scalar_t sv = static_cast<scalar_t>(s);
    LM_SWITCH_BINARY(op, {
      parallel_for(n, 2, [&](int64_t b, int64_t e) {
        if (scalar_left)
          for (int64_t i = b; i < e; ++i) po[i] = math::binary<OPV>(sv, px[i]);
        else
          for (int64_t i = b; i < e; ++i) po[i] = math::binary<OPV>(px[i], sv);
      });
    });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  LM_DISPATCH_ALL_AS(out.dtype(), value_t, "where", {
    const value_t* pa = a.data<value_t>();
    const value_t* pb = b.data<value_t>();
    value_t* po = out.data<value_t>();
    LM_DISPATCH_ALL(cond.dtype(), "where", {
      const scalar_t* pc = cond.data<scalar_t>();
      strided_apply<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
                       [&](const int64_t* off, int64_t len, const int64_t* st) {
                         for (int64_t i = 0; i < len; ++i)
                           po[off[0] + i * st[0]] =
                               pc[off[1] + i * st[1]] != scalar_t(0) ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
                       });
    });
  });
}

}  // namespace cpu
}  // namespace lm
