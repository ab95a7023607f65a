// gradcheck_your_function.cpp: check the gradient of your own differentiable function with
// gradcheck (autograd/gradcheck.h), in f64 on the CPU. It writes an op with its own backward
// (cube, and a copy with a planted bug that gradcheck must catch), composes it with library ops
// into f(x, w) = sum(cube(gelu(x @ w))), and checks one entry of df/dw by a hand finite difference.
// Not shown: fused kernels for a new op, or GPU gradients (docs/autograd.md section 7).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

using namespace lm;

namespace {
// y = x^3 with its own backward; `buggy` plants a wrong factor.
Var cube(const Var& x, bool buggy) {
  Tensor xv = x.value();
  return make_op_result("cube", mul(mul(xv, xv), xv), {x}, [xv, buggy](const Tensor& g) {
    // y = x^3  ->  dx = g * 3 x^2
    return std::vector<Tensor>{mul(g, mul(mul(xv, xv), buggy ? 2.0 : 3.0))};
  });
}

// Your function: library ops (matmul, gelu, sum) around your own op (cube); a scalar.
Var f(const Var& x, const Var& w) { return sum(cube(gelu(matmul(x, w)), false)); }

int failed(const char* why) {
  std::printf("FAILED: %s\n", why);
  return 1;
}
}  // namespace

int main() {
  // 1. The op alone. x is f32: gradcheck copies float inputs to f64 before differencing.
  manual_seed(0);
  const Tensor x0 = randn({2, 5});
  GradcheckResult good = gradcheck([](const std::vector<Var>& in) { return cube(in[0], false); }, {x0});
  GradcheckResult bad = gradcheck([](const std::vector<Var>& in) { return cube(in[0], true); }, {x0});
  std::printf("cube:         %s\ncube (buggy): %s\n", good.summary().c_str(), bad.summary().c_str());
  if (!good.ok) return failed("cube's backward disagrees with central differences");
  // The bug gives 2x^2 where 3x^2 is right: every element is off by a third of the true value,
  // up to the differences' own error (~1e-9 absolute).
  if (bad.ok || std::fabs(bad.max_rel_err - 1.0 / 3.0) > 1e-4) return failed("gradcheck missed the planted bug");

  // 2. The composed function, both inputs checked.
  const Tensor x = randn({3, 4}, DType::F64, Device::CPU, 0.0, 0.5), w = randn({4, 2}, DType::F64);
  GradcheckResult r = gradcheck([](const std::vector<Var>& in) { return f(in[0], in[1]); }, {x, w});
  std::printf("f(x, w):      %s\n", r.summary().c_str());
  if (!r.ok || r.checked != x.numel() + w.numel()) return failed("f's gradient disagrees with central differences");

  // 3. One entry by hand: df/dw[1][0] from backward() against (f(w + h) - f(w - h)) / 2h.
  const int64_t at = 1 * w.size(1) + 0;  // flat index of w[1][0]
  Var wv(w.clone(), true);
  f(Var(x), wv).backward();
  const double analytic = wv.grad().to_vector<double>()[at];
  const double h = 1e-6;
  auto f_moved = [&](double delta) {
    NoGradGuard no_graph;
    Tensor moved = w.clone();
    moved.data<double>()[at] += delta;
    return f(Var(x), Var(moved)).item();
  };
  const double numeric = (f_moved(h) - f_moved(-h)) / (2 * h);
  // Error budget: rounding ~ulp(f) / h ~ 1e-15 |f| / 1e-6, truncation h^2 |f'''| / 6 ~ 1e-12.
  const double tol = 1e-6 * std::max(1.0, std::fabs(numeric));
  std::printf("df/dw[1][0]:  backward %.10f, hand finite difference %.10f, |difference| %.2e (tolerance %.1e)\n",
              analytic, numeric, std::fabs(analytic - numeric), tol);
  if (!(std::fabs(analytic - numeric) <= tol)) return failed("backward and the hand finite difference disagree");
  std::printf("all gradient checks passed\n");
  return 0;
}
