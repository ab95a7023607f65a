// layers.cpp: Linear, Embedding, LayerNorm (layers.h).
#include "nn/layers.h"

#include "autograd/functions.h"
#include "tensor/create.h"

namespace lm {

Linear::Linear(int64_t in, int64_t out, bool use_bias, double init_std, DType dtype)
    : in_features(in), out_features(out) {
  LM_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in=" << in << " out=" << out);
  register_parameter("weight", weight, randn({out, in}, dtype, Device::CPU, 0.0, init_std), /*weight_decay=*/true);
  if (use_bias) register_parameter("bias", bias, zeros({out}, dtype));
}

// y = x W^T + b: the leading dims are folded into one (rows, in) matrix so forward and both
// backward products are single large GEMMs, with W used transposed in place (no copy).
Var Linear::forward(const Var& x) const {
  LM_CHECK(x.dim() >= 1 && x.size(-1) == in_features,
           "Linear: input " << describe(x.value()) << " does not end in in_features=" << in_features);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Var y = matmul(reshape(x, {-1, in_features}), weight, false, true);
  if (bias.defined()) y = add(y, bias);
  return reshape(y, out_shape);
}

Embedding::Embedding(int64_t num, int64_t dim, double init_std, DType dtype) {
  LM_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got " << num << " x " << dim);
  register_parameter("weight", weight, randn({num, dim}, dtype, Device::CPU, 0.0, init_std));
}

Var Embedding::forward(const Tensor& idx) const { return embedding(weight, idx); }

LayerNorm::LayerNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  register_parameter("weight", weight, ones({dim}, dtype));
  register_parameter("bias", bias, zeros({dim}, dtype));
}

Var LayerNorm::forward(const Var& x) const { return layernorm(x, weight, bias, eps); }

}  // namespace lm
