// nn/cpu/rotary.cpp: rotary position embedding, interleaved pairs. The cos/sin tables come from
// rotary_tables() (nn/functional.cpp), computed in f64 and rounded once. The pair rotation is
// nnmath::rotate_pair (nn/nn_math.h), shared with the CUDA twin nn/cuda/rotary.cu.
#include "nn/kernels.h"
#include "nn/nn_math.h"
#include "tensor/cpu/parallel.h"

namespace lm {
namespace cpu {

void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  const int64_t B = x.size(0), NH = x.size(1), T = x.size(2), HS = x.size(3), half = HS / 2;
  const int64_t PB = cos.size(0);
  LM_DISPATCH_FLOAT(x.dtype(), "rotary", {
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pc = cos.data<scalar_t>();
    const scalar_t* ps = sin.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    const scalar_t sign = inverse ? scalar_t(-1) : scalar_t(1);
    parallel_for(B * NH * T, HS, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r % T, b = r / (NH * T);
        const scalar_t* c = pc + ((PB == 1 ? 0 : b) * T + t) * half;
        const scalar_t* s = ps + ((PB == 1 ? 0 : b) * T + t) * half;
        const scalar_t* xr = px + r * HS;
        scalar_t* yr = po + r * HS;
        for (int64_t i = 0; i < half; ++i) {
          nnmath::rotate_pair(xr[2 * i], xr[2 * i + 1], c[i], sign * s[i], yr[2 * i], yr[2 * i + 1]);
        }
      }
    });
  });
}

namespace {
// Row r of the packed (3, B, NH, T, HS) tensor is (part, b, h, t); its HS values sit in the
// (B, T, 3, NH, HS) projection at ((b T + t) 3 + part) C + h HS. `to_packed` copies projection ->
// packed, else packed -> projection; parts 0 and 1 rotate by the table angle times `sign`.
template <class Scalar>
void move_heads(const Scalar* src, const Scalar* pc, const Scalar* ps, Scalar sign, bool to_packed, int64_t B,
                int64_t NH, int64_t T, int64_t HS, int64_t PB, Scalar* dst) {
  const int64_t half = HS / 2, C = NH * HS;
  parallel_for(3 * B * NH * T, HS, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % T, h = r / T % NH, b = r / (T * NH) % B, part = r / (T * NH * B);
      const int64_t at = ((b * T + t) * 3 + part) * C + h * HS;
      const Scalar* x = to_packed ? src + at : src + r * HS;
      Scalar* y = to_packed ? dst + r * HS : dst + at;
      if (part == 2) {
        for (int64_t i = 0; i < HS; ++i) y[i] = x[i];
        continue;
      }
      const Scalar* c = pc + ((PB == 1 ? 0 : b) * T + t) * half;
      const Scalar* s = ps + ((PB == 1 ? 0 : b) * T + t) * half;
      for (int64_t i = 0; i < half; ++i)
        nnmath::rotate_pair(x[2 * i], x[2 * i + 1], c[i], sign * s[i], y[2 * i], y[2 * i + 1]);
    }
  });
}
}  // namespace

void qkv_heads(const Tensor& qkv, const Tensor& cos, const Tensor& sin, int64_t NH, const Tensor& out) {
  const int64_t B = out.size(1), T = out.size(3), HS = out.size(4);
  LM_DISPATCH_FLOAT(qkv.dtype(), "qkv_heads", {
    move_heads<scalar_t>(qkv.data<scalar_t>(), cos.data<scalar_t>(), sin.data<scalar_t>(), scalar_t(1), true, B, NH, T,
                         HS, cos.size(0), out.data<scalar_t>());
  });
}

void qkv_heads_backward(const Tensor& g, const Tensor& cos, const Tensor& sin, int64_t NH, const Tensor& dqkv) {
  const int64_t B = g.size(1), T = g.size(3), HS = g.size(4);
  LM_DISPATCH_FLOAT(g.dtype(), "qkv_heads_backward", {
    move_heads<scalar_t>(g.data<scalar_t>(), cos.data<scalar_t>(), sin.data<scalar_t>(), scalar_t(-1), false, B, NH, T,
                         HS, cos.size(0), dqkv.data<scalar_t>());
  });
}

}  // namespace cpu
}  // namespace lm
