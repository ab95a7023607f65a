// nn/cpu/adamw.cpp: the fused AdamW update (formula in nn/kernel_list.inc). One pass over the
// parameter instead of the dozen temporaries a composition of tensor ops would allocate. The
// per-element update is nnmath::adamw_element (nn/nn_math.h), shared with the CUDA twin
// nn/cuda/adamw.cu; reference: the PyTorch fixture test (tests/test_gpt_parity.cpp).
#include "nn/kernels.h"
#include "nn/nn_math.h"
#include "tensor/cpu/parallel.h"

namespace lm {
namespace cpu {

void adamw_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, double bc1, double bc2) {
  const int64_t n = p.numel();
  LM_DISPATCH_FLOAT(p.dtype(), "adamw_step", {
    scalar_t *pp = p.data<scalar_t>(), *pm = m.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t* pg = g.data<scalar_t>();
    const nnmath::AdamWCoeffs<scalar_t> c =
        nnmath::adamw_coeffs<scalar_t>(lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    parallel_for(n, 8, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) nnmath::adamw_element(pp[i], pm[i], pv[i], pg[i], c);
    });
  });
}

}  // namespace cpu
}  // namespace lm
