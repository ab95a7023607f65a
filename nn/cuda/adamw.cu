// nn/cuda/adamw.cu: the fused AdamW step on CUDA, one thread per parameter element in a
// grid-stride loop, in place. The update is nnmath::adamw_element (nn/nn_math.h) with constants
// from nnmath::adamw_coeffs, exactly as in the CPU twin nn/cpu/adamw.cpp, so both devices give
// the same bits. Not a multi-tensor kernel: one launch per parameter, like the CPU's loop.
#include "nn/kernels.h"
#include "nn/nn_math.h"
#include "tensor/cuda/common.cuh"

namespace lm {
namespace cuda {

namespace {

// p, g, m, v (n) contiguous; p, m, v updated in place.
template <class Scalar>
__global__ void adamw_kernel(Scalar* p, const Scalar* g, Scalar* m, Scalar* v, nnmath::AdamWCoeffs<Scalar> c,
                             int64_t n) {
  LM_CUDA_FOR(i, n) nnmath::adamw_element(p[i], m[i], v[i], g[i], c);
}

}  // namespace

void adamw_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, double bc1, double bc2) {
  const int64_t n = p.numel();
  if (n == 0) return;
  LM_DISPATCH_FLOAT(p.dtype(), "adamw_step", {
    const nnmath::AdamWCoeffs<scalar_t> c =
        nnmath::adamw_coeffs<scalar_t>(lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    adamw_kernel<scalar_t><<<blocks_for(n), kThreads>>>(p.data<scalar_t>(), g.data<scalar_t>(), m.data<scalar_t>(),
                                                        v.data<scalar_t>(), c, n);
    LM_CUDA_CHECK_LAUNCH("adamw_kernel");
  });
}

}  // namespace cuda
}  // namespace lm
