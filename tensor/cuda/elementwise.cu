// cuda/elementwise.cu: CUDA kernels for copies, casts, fills, random draws and elementwise ops:
// one thread per output element in grid-stride loops. The per-element math comes from
// tensor/elementwise_math.h and tensor/rng.h (shared with the CPU); this file only indexes.
// Not fused or vectorised: clarity first. Twin: tensor/cpu/elementwise.cpp.
#include <type_traits>

#include "tensor/cuda/common.cuh"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace lm {
namespace cuda {

namespace {

// ---------------------------------------------------------------- copies, fills, draws
// dst, src: any strided views of n elements (StridedPack operands 0 = dst, 1 = src).
template <class Scalar>
__global__ void copy_strided_kernel(Scalar* dst, const Scalar* src, StridedPack<2> p, int64_t n) {
  LM_CUDA_FOR(i, n) {
    int64_t off[2];
    p.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

// dst (n) = src (n) converted; both contiguous.
template <class To, class From>
__global__ void cast_kernel(To* dst, const From* src, int64_t n) {
  LM_CUDA_FOR(i, n) dst[i] = static_cast<To>(src[i]);
}

// dst (n) contiguous, every element set to value.
template <class Scalar>
__global__ void fill_kernel(Scalar* dst, Scalar value, int64_t n) {
  LM_CUDA_FOR(i, n) dst[i] = value;
}

// dst (n) contiguous: dst[i] = start + i * step.
// The _rn intrinsics are never fused into an FMA: `start + i * step` rounded twice, exactly as
// written. (gcc may contract the CPU twin into one FMA on FMA hardware; with an inexact step the
// two then differ by an ulp. Building the CPU side with -ffp-contract=off makes them bit-equal.)
template <class Scalar>
__global__ void arange_kernel(Scalar* dst, double start, double step, int64_t n) {
  LM_CUDA_FOR(i, n) dst[i] = static_cast<Scalar>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), step)));
}

// dst (n) contiguous, uniform in [lo, lo + span).
// Element i uses Philox counter offset + i on the Uniform stream, as cpu/elementwise.cpp does:
// integer Philox and exact scaling give the CPU's u bit for bit; lo + span * u is then rounded
// as written, unfused (see arange_kernel about the CPU compiler's contraction).
template <class Scalar>
__global__ void rand_uniform_kernel(Scalar* dst, uint64_t seed, uint64_t offset, double lo, double span, int64_t n) {
  LM_CUDA_FOR(i, n) {
    Philox4 r = philox::block(offset + static_cast<uint64_t>(i), static_cast<uint32_t>(RngStream::Uniform), seed);
    dst[i] = static_cast<Scalar>(__dadd_rn(lo, __dmul_rn(span, static_cast<double>(uniform_from<Scalar>(r)))));
  }
}

// dst (n) contiguous, normal(mean, std).
// Box-Muller in f64 as on the CPU. CUDA's log and cos may differ from glibc's by an ulp, so
// normal draws agree with the CPU to ~1e-15 relative (f64) and almost always exactly in f32.
template <class Scalar>
__global__ void rand_normal_kernel(Scalar* dst, uint64_t seed, uint64_t offset, double mean, double std, int64_t n) {
  LM_CUDA_FOR(i, n) {
    Philox4 r = philox::block(offset + static_cast<uint64_t>(i), static_cast<uint32_t>(RngStream::Normal), seed);
    dst[i] = static_cast<Scalar>(__dadd_rn(mean, __dmul_rn(std, normal_from<double>(r))));
  }
}

// ---------------------------------------------------------------- elementwise math
// The ops the fronts allow on i32 (float_only in ops_elementwise.cpp). The others are not even
// instantiated for i32: exp, erf, ... have no integer overloads on the device.
template <UnaryOp OP, class Scalar>
constexpr bool unary_supported() {
  return !std::is_integral<Scalar>::value || OP == UnaryOp::Neg || OP == UnaryOp::Relu;
}
template <BinaryOp OP, class Scalar>
constexpr bool binary_supported() {
  return !std::is_integral<Scalar>::value || (OP != BinaryOp::Div && OP != BinaryOp::GeluBackward);
}

// x, y (n) contiguous: y = op(x).
template <UnaryOp OP, class Scalar>
__global__ void unary_kernel(const Scalar* x, Scalar* y, int64_t n) {
  LM_CUDA_FOR(i, n) y[i] = math::unary<OP>(x[i]);
}

// out (n) = op(a, b); a, b, out any strided views of n elements (StridedPack operands 0 = out,
// 1 = a, 2 = b).
template <BinaryOp OP, class Scalar>
__global__ void binary_kernel(const Scalar* a, const Scalar* b, Scalar* out, StridedPack<3> p, int64_t n) {
  LM_CUDA_FOR(i, n) {
    int64_t off[3];
    p.offsets(i, off);
    out[off[0]] = math::binary<OP>(a[off[1]], b[off[2]]);
  }
}

// x, out (n) contiguous: out = op(x, s), or op(s, x) when scalar_left.
template <BinaryOp OP, class Scalar>
__global__ void binary_scalar_kernel(const Scalar* x, Scalar s, bool scalar_left, Scalar* out, int64_t n) {
  LM_CUDA_FOR(i, n) out[i] = scalar_left ? math::binary<OP>(s, x[i]) : math::binary<OP>(x[i], s);
}

// out (n) = cond != 0 ? a : b; all strided views of n elements (StridedPack operands 0 = out,
// 1 = cond, 2 = a, 3 = b).
template <class Value, class Cond>
__global__ void where_kernel(const Cond* cond, const Value* a, const Value* b, Value* out, StridedPack<4> p,
                             int64_t n) {
  LM_CUDA_FOR(i, n) {
    int64_t off[4];
    p.offsets(i, off);
    out[off[0]] = cond[off[1]] != Cond(0) ? a[off[2]] : b[off[3]];
  }
}

[[noreturn]] void float_only(const char* opname, DType dt) {
  LM_FAIL(opname << " on cuda: dtype " << dtype_name(dt) << " is not supported (expected f32 or f64)");
}

template <UnaryOp OP, class Scalar>
void launch_unary(const Tensor& x, const Tensor& out) {
  if constexpr (unary_supported<OP, Scalar>()) {
    const int64_t n = x.numel();
    unary_kernel<OP, Scalar><<<blocks_for(n), kThreads>>>(x.data<Scalar>(), out.data<Scalar>(), n);
    LM_CUDA_CHECK_LAUNCH("unary_kernel");
  } else {
    float_only(unary_op_name(OP), x.dtype());
  }
}

template <BinaryOp OP, class Scalar>
void launch_binary(const Tensor& a, const Tensor& b, const Tensor& out) {
  if constexpr (binary_supported<OP, Scalar>()) {
    const int64_t n = out.numel();
    StridedPack<3> p =
        make_strided_pack<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, binary_op_name(OP));
    binary_kernel<OP, Scalar>
        <<<blocks_for(n), kThreads>>>(a.data<Scalar>(), b.data<Scalar>(), out.data<Scalar>(), p, n);
    LM_CUDA_CHECK_LAUNCH("binary_kernel");
  } else {
    float_only(binary_op_name(OP), out.dtype());
  }
}

template <BinaryOp OP, class Scalar>
void launch_binary_scalar(const Tensor& x, double s, bool scalar_left, const Tensor& out) {
  if constexpr (binary_supported<OP, Scalar>()) {
    const int64_t n = x.numel();
    binary_scalar_kernel<OP, Scalar>
        <<<blocks_for(n), kThreads>>>(x.data<Scalar>(), static_cast<Scalar>(s), scalar_left, out.data<Scalar>(), n);
    LM_CUDA_CHECK_LAUNCH("binary_scalar_kernel");
  } else {
    float_only(binary_op_name(OP), x.dtype());
  }
}

}  // namespace

void copy_strided(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  StridedPack<2> p = make_strided_pack<2>(dst.shape(), {&dst.strides(), &src.strides()}, "copy");
  LM_DISPATCH_ALL(dst.dtype(), "copy", {
    copy_strided_kernel<scalar_t><<<blocks_for(n), kThreads>>>(dst.data<scalar_t>(), src.data<scalar_t>(), p, n);
    LM_CUDA_CHECK_LAUNCH("copy_strided_kernel");
  });
}

void cast(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  LM_DISPATCH_ALL_AS(dst.dtype(), out_t, "cast", {
    LM_DISPATCH_ALL(src.dtype(), "cast", {
      cast_kernel<out_t, scalar_t><<<blocks_for(n), kThreads>>>(dst.data<out_t>(), src.data<scalar_t>(), n);
      LM_CUDA_CHECK_LAUNCH("cast_kernel");
    });
  });
}

void fill(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  LM_DISPATCH_ALL(dst.dtype(), "fill", {
    fill_kernel<scalar_t><<<blocks_for(n), kThreads>>>(dst.data<scalar_t>(), static_cast<scalar_t>(value), n);
    LM_CUDA_CHECK_LAUNCH("fill_kernel");
  });
}

void arange(const Tensor& out, double start, double step) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LM_DISPATCH_ALL(out.dtype(), "arange", {
    arange_kernel<scalar_t><<<blocks_for(n), kThreads>>>(out.data<scalar_t>(), start, step, n);
    LM_CUDA_CHECK_LAUNCH("arange_kernel");
  });
}

void rand_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LM_DISPATCH_FLOAT(out.dtype(), "rand", {
    rand_uniform_kernel<scalar_t><<<blocks_for(n), kThreads>>>(out.data<scalar_t>(), seed, offset, lo, hi - lo, n);
    LM_CUDA_CHECK_LAUNCH("rand_uniform_kernel");
  });
}

void rand_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LM_DISPATCH_FLOAT(out.dtype(), "randn", {
    rand_normal_kernel<scalar_t><<<blocks_for(n), kThreads>>>(out.data<scalar_t>(), seed, offset, mean, std, n);
    LM_CUDA_CHECK_LAUNCH("rand_normal_kernel");
  });
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  if (x.numel() == 0) return;
  LM_DISPATCH_ALL(x.dtype(), "unary", { LM_SWITCH_UNARY(op, launch_unary<OPV, scalar_t>(x, out)); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (out.numel() == 0) return;
  LM_DISPATCH_ALL(out.dtype(), "binary", { LM_SWITCH_BINARY(op, launch_binary<OPV, scalar_t>(a, b, out)); });
}

void binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_left, const Tensor& out) {
  if (x.numel() == 0) return;
  LM_DISPATCH_ALL(x.dtype(), "binary_scalar",
                  { LM_SWITCH_BINARY(op, launch_binary_scalar<OPV, scalar_t>(x, s, scalar_left, out)); });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  StridedPack<4> p =
      make_strided_pack<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()}, "where");
  LM_DISPATCH_ALL_AS(out.dtype(), value_t, "where", {
    LM_DISPATCH_ALL(cond.dtype(), "where", {
      where_kernel<value_t, scalar_t><<<blocks_for(n), kThreads>>>(cond.data<scalar_t>(), a.data<value_t>(),
                                                                   b.data<value_t>(), out.data<value_t>(), p, n);
      LM_CUDA_CHECK_LAUNCH("where_kernel");
    });
  });
}

}  // namespace cuda
}  // namespace lm
