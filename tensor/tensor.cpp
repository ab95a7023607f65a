// tensor.cpp: Tensor metadata, views and copies. Views only rewrite shape/strides/offset; the
// copying paths (contiguous, clone, to, copy_) call the copy kernels through LM_KERNEL.
#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "tensor/dispatch.h"
#ifdef LANDMARK_WITH_CUDA
#include "tensor/cuda/runtime.h"
#endif

namespace lm {

namespace detail {
void no_cuda(const char* kernel) {
  LM_FAIL("kernel '" << kernel
                     << "' was asked to run on cuda, but this build has no CUDA "
                        "support (configure with -DLANDMARK_CUDA=ON)");
}
}  // namespace detail

Tensor::Tensor(const Shape& shape, DType dtype, Device device)
    : shape_(shape), strides_(contiguous_strides(shape)), dtype_(dtype), device_(device) {
  for (int64_t d : shape) LM_CHECK(d >= 0, "Tensor: negative size in shape " << shape_str(shape));
  const int64_t n = lm::numel(shape);
  const size_t elem = dtype_size(dtype);
  LM_CHECK(static_cast<uint64_t>(n) <= std::numeric_limits<size_t>::max() / 2 / elem,
           "Tensor: shape " << shape_str(shape) << " needs " << n << " elements of " << elem
                            << " bytes, more than any machine can hold");
  storage_ = std::make_shared<Storage>(static_cast<size_t>(n) * elem, device);
}

int64_t Tensor::size(int64_t d) const { return shape_[normalize_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides_[normalize_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides_[i] != expected) return numel() == 0;
    expected *= shape_[i];
  }
  return true;
}

template <class Scalar>
Scalar* Tensor::data() const {
  LM_CHECK(defined(), "data(): tensor is undefined");
  LM_CHECK(dtype_of<Scalar>() == dtype_,
           "data<" << dtype_name(dtype_of<Scalar>()) << ">() called on a " << dtype_name(dtype_) << " tensor");
  return static_cast<Scalar*>(storage_->data()) + offset_;
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int32_t* Tensor::data<int32_t>() const;

void* Tensor::raw_data() const {
  LM_CHECK(defined(), "raw_data(): tensor is undefined");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

Tensor Tensor::with_layout(Shape shape, Shape strides, int64_t offset) const {
  Tensor t;
  t.storage_ = storage_;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  t.dtype_ = dtype_;
  t.device_ = device_;
  return t;
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  LM_CHECK(shape.size() == strides.size(),
           "make_view: shape " << shape_str(shape) << " and strides " << shape_str(strides) << " differ in length");
  // The furthest element reachable must lie inside the storage.
  int64_t hi = offset, lo = offset;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    LM_CHECK(shape[i] >= 0, "make_view: negative size in " << shape_str(shape));
    if (shape[i] == 0)
      empty = true;
    else if (strides[i] >= 0)
      hi += (shape[i] - 1) * strides[i];
    else
      lo += (shape[i] - 1) * strides[i];
  }
  int64_t capacity = static_cast<int64_t>(base.storage()->nbytes() / dtype_size(base.dtype()));
  LM_CHECK(empty || (lo >= 0 && hi < capacity),
           "make_view: view " << shape_str(shape) << " with strides " << shape_str(strides) << " at offset " << offset
                              << " exceeds storage of " << capacity << " elements");
  return base.with_layout(std::move(shape), std::move(strides), offset);
}

Tensor Tensor::view(const Shape& shape) const {
  LM_CHECK(is_contiguous(), "view: tensor with shape " << shape_str(shape_) << " and strides " << shape_str(strides_)
                                                       << " is not contiguous; use reshape() or contiguous()");
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      LM_CHECK(infer < 0, "view: more than one -1 in " << shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      LM_CHECK(s[i] >= 0, "view: invalid size " << s[i] << " in " << shape_str(shape));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    LM_CHECK(known != 0 && numel() % known == 0,
             "view: cannot infer -1 in " << shape_str(shape) << " for " << numel() << " elements");
    s[infer] = numel() / known;
  }
  LM_CHECK(lm::numel(s) == numel(), "view: shape " << shape_str(shape) << " has " << lm::numel(s)
                                                   << " elements but the tensor " << shape_str(shape_) << " has "
                                                   << numel());
  return with_layout(s, contiguous_strides(s), offset_);
}

Tensor Tensor::reshape(const Shape& shape) const { return is_contiguous() ? view(shape) : contiguous().view(shape); }

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = normalize_dim(d0, dim(), "transpose");
  d1 = normalize_dim(d1, dim(), "transpose");
  Shape s = shape_, st = strides_;
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return with_layout(s, st, offset_);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  LM_CHECK(static_cast<int64_t>(dims.size()) == dim(),
           "permute: got " << dims.size() << " dims for a " << dim() << "-d tensor");
  Shape s(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = normalize_dim(dims[i], dim(), "permute");
    LM_CHECK(!seen[d], "permute: dim " << d << " appears twice in " << shape_str(dims));
    seen[d] = true;
    s[i] = shape_[d];
    st[i] = strides_[d];
  }
  return with_layout(s, st, offset_);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = normalize_dim(d, dim(), "narrow");
  LM_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d],
           "narrow: range [" << start << ", " << start + length << ") is outside dim " << d << " of size " << shape_[d]
                             << " (shape " << shape_str(shape_) << ")");
  Shape s = shape_;
  s[d] = length;
  return with_layout(s, strides_, offset_ + start * strides_[d]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = normalize_dim(d, dim(), "select");
  if (index < 0) index += shape_[d];
  LM_CHECK(index >= 0 && index < shape_[d],
           "select: index " << index << " out of range for dim " << d << " of size " << shape_[d]);
  Tensor t = narrow(d, index, 1);
  return t.squeeze(d);
}

Tensor Tensor::expand(const Shape& shape) const {
  LM_CHECK(shape.size() >= shape_.size(),
           "expand: cannot expand " << shape_str(shape_) << " to fewer dims " << shape_str(shape));
  size_t lead = shape.size() - shape_.size();
  Shape s(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      LM_CHECK(shape[i] >= 0, "expand: invalid size " << shape[i] << " in " << shape_str(shape));
      s[i] = shape[i];
      st[i] = 0;
      continue;
    }
    int64_t have = shape_[i - lead], want = shape[i] == -1 ? have : shape[i];
    LM_CHECK(have == want || have == 1, "expand: cannot expand " << shape_str(shape_) << " to " << shape_str(shape)
                                                                 << " (dim " << i << ": " << have << " vs " << want
                                                                 << ")");
    s[i] = want;
    st[i] = have == want ? strides_[i - lead] : 0;
  }
  return with_layout(s, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  LM_CHECK(d >= -dim() - 1 && d <= dim(), "unsqueeze: dim " << d << " out of range for " << dim() << "-d tensor");
  if (d < 0) d += dim() + 1;
  Shape s = shape_, st = strides_;
  int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return with_layout(s, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = normalize_dim(d, dim(), "squeeze");
  LM_CHECK(shape_[d] == 1,
           "squeeze: dim " << d << " has size " << shape_[d] << ", not 1 (shape " << shape_str(shape_) << ")");
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return with_layout(s, st, offset_);
}

Tensor Tensor::contiguous() const {
  LM_CHECK(defined(), "contiguous(): tensor is undefined");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  LM_CHECK(defined(), "clone(): tensor is undefined");
  Tensor out(shape_, dtype_, device_);
  if (numel() > 0) LM_KERNEL(device_, copy_strided, out, *this);
  return out;
}

Tensor Tensor::to(Device device) const {
  LM_CHECK(defined(), "to(device): tensor is undefined");
  if (device == device_) return *this;
#ifdef LANDMARK_WITH_CUDA
  Tensor src = contiguous();
  Tensor out(shape_, dtype_, device);
  size_t nbytes = static_cast<size_t>(numel()) * dtype_size(dtype_);
  if (nbytes == 0) return out;
  if (device == Device::CUDA)
    cuda::memcpy_h2d(out.raw_data(), src.raw_data(), nbytes);
  else
    cuda::memcpy_d2h(out.raw_data(), src.raw_data(), nbytes);
  return out;
#else
  LM_FAIL("to(" << device_name(device) << "): this build has no CUDA support (configure with -DLANDMARK_CUDA=ON)");
#endif
}

Tensor Tensor::to(DType dtype) const {
  LM_CHECK(defined(), "to(dtype): tensor is undefined");
  if (dtype == dtype_) return *this;
  Tensor src = contiguous();
  Tensor out(shape_, dtype, device_);
  if (numel() > 0) LM_KERNEL(device_, cast, out, src);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  LM_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  LM_CHECK(src.dtype() == dtype_, "copy_: dtype " << dtype_name(src.dtype()) << " into " << dtype_name(dtype_)
                                                  << " (convert with to(dtype) first)");
  Tensor s = src.device() == device_ ? src : src.to(device_);
  Tensor expanded = s.shape() == shape_ ? s : s.expand(shape_);
  if (numel() > 0) LM_KERNEL(device_, copy_strided, *this, expanded);
}

void Tensor::fill_(double value) {
  LM_CHECK(defined(), "fill_: tensor is undefined");
  if (numel() == 0) return;
  if (is_contiguous()) {
    LM_KERNEL(device_, fill, *this, value);
  } else {
    Tensor one({1}, dtype_, device_);
    LM_KERNEL(device_, fill, one, value);
    LM_KERNEL(device_, copy_strided, *this, one.expand(shape_));
  }
}

double Tensor::item() const {
  LM_CHECK(defined() && numel() == 1, "item(): needs exactly one element, tensor has shape " << shape_str(shape_));
  return to_double_vector()[0];
}

template <class Scalar>
std::vector<Scalar> Tensor::to_vector() const {
  LM_CHECK(dtype_of<Scalar>() == dtype_,
           "to_vector<" << dtype_name(dtype_of<Scalar>()) << ">() on a " << dtype_name(dtype_) << " tensor");
  Tensor c = contiguous().to(Device::CPU);
  std::vector<Scalar> v(static_cast<size_t>(numel()));
  if (!v.empty()) std::memcpy(v.data(), c.data<Scalar>(), v.size() * sizeof(Scalar));
  return v;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;

std::vector<double> Tensor::to_double_vector() const {
  std::vector<double> out;
  LM_DISPATCH_ALL(dtype_, "to_double_vector", {
    std::vector<scalar_t> v = to_vector<scalar_t>();
    out.assign(v.begin(), v.end());
  });
  return out;
}

}  // namespace lm
