// create.h: tensors made from nothing (zeros, ones, full, arange), from host data (from_vector),
// or from the project RNG (rand, randn; see rng.h). Every creator takes dtype and device last.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace lm {

Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
Tensor full(const Shape& shape, double value, DType dtype = DType::F32, Device device = Device::CPU);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar_tensor(double value, DType dtype = DType::F32, Device device = Device::CPU);  // 0-d

// [start, end) in steps of step, like Python's range; length ceil((end - start) / step).
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::I32, Device device = Device::CPU);
Tensor arange(int64_t n, DType dtype = DType::I32, Device device = Device::CPU);

// Copies host values; values.size() must equal numel(shape). The element type picks the dtype.
Tensor from_vector(const std::vector<float>& values, const Shape& shape, Device device = Device::CPU);
Tensor from_vector(const std::vector<double>& values, const Shape& shape, Device device = Device::CPU);
Tensor from_vector(const std::vector<int32_t>& values, const Shape& shape, Device device = Device::CPU);

// Random tensors from the global generator (rng.h). Same seed + same sequence of calls = same
// numbers, on CPU and CUDA alike.
Tensor rand(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU, double lo = 0.0,
            double hi = 1.0);
Tensor randn(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU, double mean = 0.0,
             double std = 1.0);

}  // namespace lm
