// tensor.h: an n-d array = shared Storage + shape + strides + offset (all in elements).
// Views (view, transpose, permute, narrow, expand, ...) share storage and only change the
// metadata; contiguous() copies when the layout is not row-major. No gradients here: autograd/
// wraps Tensors in Vars. Ops live in tensor/ops.h; creation in tensor/create.h.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <vector>

#include "tensor/check.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace lm {

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (defined() == false), used for "no gradient"
  // Fresh contiguous tensor; contents uninitialised (use zeros()/full() for values).
  Tensor(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return lm::numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Pointer to element 0 of this view. Scalar must match dtype() (checked).
  template <class Scalar>
  Scalar* data() const;
  void* raw_data() const;

  // --- views: share storage ---
  Tensor view(const Shape& shape) const;     // needs is_contiguous(); one size may be -1
  Tensor reshape(const Shape& shape) const;  // view when possible, else a contiguous copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // narrow + drop the dim
  Tensor expand(const Shape& shape) const;          // size-1 dims broadcast with stride 0
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;  // dim must have size 1
  Tensor flatten() const { return reshape({numel()}); }

  // --- copies ---
  Tensor contiguous() const;  // self when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;   // value conversion (f32 <-> f64 <-> i32, truncating to int)
  void copy_(const Tensor& src);  // same shape (src may broadcast), same dtype and device
  void fill_(double value);
  void zero_() { fill_(0.0); }

  // --- reading values (copies to the host when needed) ---
  double item() const;  // numel() must be 1
  template <class Scalar>
  std::vector<Scalar> to_vector() const;         // row-major; Scalar must match dtype()
  std::vector<double> to_double_vector() const;  // any dtype, converted

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_, strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;

  Tensor with_layout(Shape shape, Shape strides, int64_t offset) const;
  friend Tensor make_view(const Tensor&, Shape, Shape, int64_t);
};

// Build a view over `base`'s storage with explicit layout (checked to stay inside the storage).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

std::ostream& operator<<(std::ostream& os, const Tensor& t);  // readable, summarised print
std::string describe(const Tensor& t);                        // "f32 cpu [2, 3]", used in error messages

}  // namespace lm
