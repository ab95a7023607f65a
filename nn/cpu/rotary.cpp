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

}  // namespace cpu
}  // namespace lm
