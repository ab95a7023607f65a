// ops_index.cpp: fronts for embedding (gather), its scatter-add backward, and concat.
#include "tensor/dispatch.h"
#include "tensor/ops.h"

namespace lm {

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  LM_CHECK(weight.defined() && weight.dim() == 2, "embedding: weight must be (V, C), got " << describe(weight));
  LM_CHECK(idx.defined() && idx.dtype() == DType::I32, "embedding: indices must be i32, got " << describe(idx));
  LM_CHECK(idx.device() == weight.device(),
           "embedding: weight " << describe(weight) << " and indices " << describe(idx) << " are on different devices");
  LM_CHECK(is_floating(weight.dtype()), "embedding: weight must be f32 or f64, got " << describe(weight));
  Shape out_shape = idx.shape();
  out_shape.push_back(weight.size(1));
  Tensor out(out_shape, weight.dtype(), weight.device());
  if (idx.numel() == 0) return out;
  Tensor ic = idx.contiguous();
  int64_t bad = LM_KERNEL(weight.device(), embedding, weight.contiguous(), ic, out);
  if (bad >= 0) {
    int32_t v = ic.reshape({ic.numel()}).narrow(0, bad, 1).to_vector<int32_t>()[0];
    LM_FAIL("embedding: index " << v << " at position " << bad << " is out of range [0, " << weight.size(0)
                                << ") for weight " << describe(weight));
  }
  return out;
}

Tensor embedding_backward(const Tensor& gout, const Tensor& idx, int64_t num_embeddings) {
  LM_CHECK(idx.defined() && idx.dtype() == DType::I32,
           "embedding_backward: indices must be i32, got " << describe(idx));
  LM_CHECK(gout.defined() && gout.dim() == idx.dim() + 1, "embedding_backward: gradient "
                                                              << describe(gout) << " must have the index shape "
                                                              << shape_str(idx.shape()) << " plus a channel dim");
  for (int64_t i = 0; i < idx.dim(); ++i)
    LM_CHECK(gout.size(i) == idx.size(i),
             "embedding_backward: gradient " << describe(gout) << " does not match indices " << describe(idx));
  LM_CHECK(gout.device() == idx.device(), "embedding_backward: gradient and indices are on different devices");
  LM_CHECK(num_embeddings > 0, "embedding_backward: num_embeddings must be positive, got " << num_embeddings);
  Tensor dw({num_embeddings, gout.size(-1)}, gout.dtype(), gout.device());
  if (idx.numel() == 0 || dw.numel() == 0) {
    dw.zero_();
    return dw;
  }
  LM_KERNEL(gout.device(), embedding_backward, gout.contiguous(), idx.contiguous(), dw);
  return dw;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  LM_CHECK(!xs.empty(), "concat: no tensors given");
  const Tensor& first = xs[0];
  LM_CHECK(first.defined() && first.dim() >= 1, "concat: inputs must be at least 1-d, got " << describe(first));
  const int64_t d = normalize_dim(dim, first.dim(), "concat");
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    LM_CHECK(x.defined() && x.dim() == first.dim() && x.dtype() == first.dtype() && x.device() == first.device(),
             "concat: input " << i << " (" << describe(x) << ") does not match input 0 (" << describe(first) << ")");
    for (int64_t k = 0; k < x.dim(); ++k)
      LM_CHECK(k == d || x.size(k) == first.size(k), "concat: input " << i << " " << describe(x)
                                                                      << " differs from input 0 " << describe(first)
                                                                      << " in dim " << k);
    total += x.size(d);
  }
  Shape shape = first.shape();
  shape[d] = total;
  Tensor out(shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    if (x.size(d) > 0) out.narrow(d, at, x.size(d)).copy_(x);
    at += x.size(d);
  }
  return out;
}

}  // namespace lm
