// nn/cpu/adamw.cpp: the fused AdamW update (formula in nn/kernel_list.inc). One pass over the
// parameter instead of the dozen temporaries a composition of tensor ops would allocate.
// CUDA twin: nn/cuda/adamw.cu; reference: the PyTorch fixture test (tests/test_gpt_parity.cpp).
#include <cmath>

#include "nn/kernels.h"
#include "tensor/cpu/parallel.h"

namespace lm {
namespace cpu {

void adamw_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double lr, double beta1,
                double beta2, double eps, double weight_decay, double bc1, double bc2) {
  const int64_t n = p.numel();
  LM_DISPATCH_FLOAT(p.dtype(), "adamw_step", {
    scalar_t *pp = p.data<scalar_t>(), *pm = m.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t* pg = g.data<scalar_t>();
    const scalar_t b1 = static_cast<scalar_t>(beta1), b2 = static_cast<scalar_t>(beta2);
    const scalar_t decay = static_cast<scalar_t>(1.0 - lr * weight_decay);
    const scalar_t step = static_cast<scalar_t>(lr / bc1), inv_sqrt_bc2 = static_cast<scalar_t>(1.0 / std::sqrt(bc2));
    const scalar_t e = static_cast<scalar_t>(eps);
    parallel_for(n, 8, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        const scalar_t gi = pg[i];
        pm[i] = b1 * pm[i] + (scalar_t(1) - b1) * gi;
        pv[i] = b2 * pv[i] + (scalar_t(1) - b2) * gi * gi;
        pp[i] = pp[i] * decay - step * pm[i] / (std::sqrt(pv[i]) * inv_sqrt_bc2 + e);
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
