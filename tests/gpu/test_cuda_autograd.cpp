// test_cuda_autograd.cpp: one end-to-end check that the graph runs on CUDA as on the CPU: a small
// composed function (embedding -> matmul + bias -> gelu -> layer norm -> cross-entropy, plus a
// max and a softmax term) is evaluated and differentiated on both devices from the same
// parameters, and every gradient is compared. Per-op checks live in test_cuda_ops.cpp and
// test_cuda_layers.cpp; finite-difference checks of each backward are in the CPU suite.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/functions.h"
#include "gpu_compare.h"

using namespace lm;
using namespace lm::gputest;

namespace {
// idx (N) i32, targets (N) i32; params E (V, C), W (C, V), b (V), gamma (V), beta (V) -> scalar.
Var composed_loss(const std::vector<Var>& p, const Tensor& idx, const Tensor& targets) {
  Var h = embedding(p[0], idx);                   // (N, C)
  h = add(matmul(h, p[1]), p[2]);                 // (N, V)
  h = gelu(h);
  h = layernorm(h, p[3], p[4]);                   // (N, V)
  Var ce = cross_entropy(h, targets);             // ()
  Var peak = mean(max(h, -1));                    // () first-max routing of the gradient
  Var soft = sum(mul(softmax(h), h));             // () softmax backward through a product
  return add(add(ce, mul(peak, 0.1)), mul(soft, 0.01));
}
}  // namespace

TEST_CASE("cuda: gradients of a composed function equal the CPU's", "[cuda][autograd]") {
  const int64_t N = 6, C = 5, V = 7;
  // f64 on both devices, so the only differences are summation orders and libm ulps.
  std::vector<Tensor> init = {randn({V, C}, DType::F64), randn({C, V}, DType::F64), randn({V}, DType::F64),
                              add(randn({V}, DType::F64), 1.0), randn({V}, DType::F64)};
  Tensor idx = from_vector(std::vector<int32_t>{0, 3, 3, 6, 1, 0}, {N});
  Tensor targets = from_vector(std::vector<int32_t>{2, -100, 6, 0, 4, 4}, {N});

  auto run = [&](Device dev, std::vector<Var>& params) {
    params.clear();
    for (const Tensor& t : init) params.emplace_back(t.to(dev), true);
    Var loss = composed_loss(params, idx.to(dev), targets.to(dev));
    loss.backward();
    return loss;
  };
  std::vector<Var> pc, pg;
  Var lc = run(Device::CPU, pc), lg = run(kGpu, pg);
  require_close(lc.value(), lg.value(), 1e-12, 1e-12, "loss");
  const char* names[] = {"dE", "dW", "db", "dgamma", "dbeta"};
  for (size_t i = 0; i < pc.size(); ++i) {
    REQUIRE(pc[i].grad().defined());
    REQUIRE(pg[i].grad().defined());
    // f64 throughout; a handful of reductions of O(1) values: 1e-10 leaves room for ulps.
    require_close(pc[i].grad(), pg[i].grad(), 1e-10, 1e-12, names[i]);
  }
}
