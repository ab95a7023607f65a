// nn/kernels.h: declarations of nn/'s device kernels from the single list in kernel_list.inc.
// They join tensor/'s kernels in namespaces lm::cpu and lm::cuda (namespace = device, folder =
// layer), so fronts dispatch with the same LM_KERNEL macro (tensor/dispatch.h).
#pragma once

#include "tensor/tensor.h"

namespace lm {
namespace cpu {
#include "nn/kernel_list.inc"
}  // namespace cpu
namespace cuda {
#include "nn/kernel_list.inc"
}  // namespace cuda
}  // namespace lm
