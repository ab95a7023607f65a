// dispatch.h: how op fronts pick the kernel for a tensor's device. Without CUDA support compiled
// in, asking for a CUDA kernel is an error that says how to get one.
#pragma once

#include "tensor/kernels.h"

namespace lm {
namespace detail {
[[noreturn]] void no_cuda(const char* kernel);
}  // namespace detail
}  // namespace lm

#ifdef LANDMARK_WITH_CUDA
#define LM_KERNEL(device, name, ...) \
  ((device) == ::lm::Device::CPU ? ::lm::cpu::name(__VA_ARGS__) : ::lm::cuda::name(__VA_ARGS__))
#else
#define LM_KERNEL(device, name, ...)                            \
  ((device) == ::lm::Device::CPU ? ::lm::cpu::name(__VA_ARGS__) \
                                 : (::lm::detail::no_cuda(#name), ::lm::cpu::name(__VA_ARGS__)))
#endif
