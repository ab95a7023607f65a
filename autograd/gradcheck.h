// gradcheck.h: check any differentiable function's backward against central finite differences
// in f64. Give it a function of Vars and the input tensors; it converts float inputs to f64 on
// the CPU, reduces a non-scalar output to a scalar with fixed random weights (L = sum(w * y)),
// and compares dL/dx from backward() with (L(x + eps) - L(x - eps)) / (2 eps) element by element.
// i32 inputs (indices, targets) are passed through untouched and not differentiated.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/var.h"

namespace lm {

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step; error ~ eps^2 * f''' + rounding / eps
  double atol = 1e-6;  // pass when |analytic - numeric| <= atol + rtol * |numeric| everywhere
  double rtol = 1e-5;
  uint64_t seed = 1234;  // for the projection weights w
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_err = 0;  // max over all checked elements of |analytic - numeric|
  double max_rel_err = 0;  // max of |analytic - numeric| / max(|numeric|, 1e-8)... see gradcheck.cpp
  int worst_input = -1;    // input and flat element index of the element closest to failing
                           // (largest error / tolerance), whether or not the check passed
  int64_t worst_index = -1;
  double worst_analytic = 0, worst_numeric = 0;
  int64_t checked = 0;          // number of elements compared
  std::string summary() const;  // one line, for test messages and users
};

using VarFunction = std::function<Var(const std::vector<Var>&)>;

GradcheckResult gradcheck(const VarFunction& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opts = GradcheckOptions());

}  // namespace lm
