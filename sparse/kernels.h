// sparse/kernels.h: declarations of sparse/'s device kernels (kernel_list.inc), joining the other
// kernels in lm::cpu and lm::cuda so LM_KERNEL dispatches them.
#pragma once

#include "tensor/tensor.h"

namespace lm {
namespace cpu {
#include "sparse/kernel_list.inc"
}  // namespace cpu
namespace cuda {
#include "sparse/kernel_list.inc"
}  // namespace cuda
}  // namespace lm
