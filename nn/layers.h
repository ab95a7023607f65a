// layers.h: the small layers a GPT is made of, each a Module with named parameters:
// Linear (y = x W^T [+ b], W (out, in) like PyTorch), Embedding (rows of W (V, C)) and LayerNorm
// (fused op with a closed-form backward, tensor/cpu/nn.cpp). GELU and dropout are functions
// (autograd/functions.h, nn/functional.h).
#pragma once

#include "nn/module.h"

namespace lm {

class Linear : public Module {
 public:
  // weight ~ normal(0, init_std); bias (when enabled) starts at 0.
  Linear(int64_t in_features, int64_t out_features, bool bias = false, double init_std = 0.02,
         DType dtype = DType::F32);
  Var forward(const Var& x) const;  // x (..., in) -> (..., out)
  Var weight, bias;                 // bias undefined when disabled
  int64_t in_features, out_features;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, double init_std = 0.02, DType dtype = DType::F32);
  Var forward(const Tensor& idx) const;  // idx i32 (...) -> (..., dim)
  Var weight;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::F32);
  Var forward(const Var& x) const;  // normalises the last dim
  Var weight, bias;
  double eps;
};

}  // namespace lm
