// gradcheck.cpp: central differences in f64 against backward(). See gradcheck.h.
#include "autograd/gradcheck.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "autograd/functions.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

namespace lm {

std::string GradcheckResult::summary() const {
  std::ostringstream os;
  os << (ok ? "gradcheck ok" : "gradcheck FAILED") << ": checked " << checked << " elements, max abs err "
     << max_abs_err << ", max rel err " << max_rel_err;
  if (worst_input >= 0)
    os << "; worst at input " << worst_input << " element " << worst_index << " (analytic " << worst_analytic
       << ", numeric " << worst_numeric << ")";
  return os.str();
}

GradcheckResult gradcheck(const VarFunction& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  LM_CHECK(!inputs.empty(), "gradcheck: no inputs");
  LM_CHECK(opts.eps > 0, "gradcheck: eps must be positive, got " << opts.eps);
  // f64 CPU copies of the inputs; float ones are the variables we differentiate.
  std::vector<Tensor> xs;
  for (const Tensor& t : inputs) {
    LM_CHECK(t.defined(), "gradcheck: undefined input");
    Tensor c = t.to(Device::CPU);
    xs.push_back(is_floating(c.dtype()) ? c.to(DType::F64).clone() : c.clone());
  }
  auto make_vars = [&]() {
    std::vector<Var> vs;
    for (const Tensor& x : xs) vs.emplace_back(x, is_floating(x.dtype()));
    return vs;
  };

  // Projection weights w (fixed by opts.seed, independent of the global generator's state).
  Tensor w;
  auto loss_of = [&](const Var& y) -> Var {
    LM_CHECK(y.dtype() == DType::F64,
             "gradcheck: the function returned " << describe(y.value()) << "; it must keep f64 inputs in f64");
    if (y.numel() == 1) return reshape(y, {});
    if (!w.defined()) {
      RngState saved = global_rng();
      manual_seed(opts.seed);
      w = randn(y.shape(), DType::F64);
      global_rng() = saved;
    }
    return sum(mul(y, Var(w)));
  };

  // Analytic gradients.
  std::vector<Var> vars = make_vars();
  Var L = loss_of(fn(vars));
  LM_CHECK(L.requires_grad(), "gradcheck: the output does not depend on any float input");
  L.backward();

  GradcheckResult res;
  double worst_ratio = -1;  // largest err / tolerance seen; > 1 fails
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!is_floating(xs[i].dtype())) continue;
    Tensor analytic = vars[i].grad().defined() ? vars[i].grad() : zeros(xs[i].shape(), DType::F64);
    std::vector<double> an = analytic.to_vector<double>();
    double* p = xs[i].data<double>();
    for (int64_t k = 0; k < xs[i].numel(); ++k) {
      const double orig = p[k];
      double lp, lm;
      {
        NoGradGuard ng;
        p[k] = orig + opts.eps;
        lp = loss_of(fn(make_vars())).item();
        p[k] = orig - opts.eps;
        lm = loss_of(fn(make_vars())).item();
        p[k] = orig;
      }
      const double numeric = (lp - lm) / (2 * opts.eps);
      const double err = std::fabs(an[k] - numeric);
      const double rel = err / std::max(std::fabs(numeric), 1e-8);
      // A NaN compares false with everything, so it is handled explicitly: it fails the check,
      // ranks as the worst element and stays visible in the maxima.
      res.max_abs_err = std::isnan(err) ? err : std::max(res.max_abs_err, err);
      res.max_rel_err = std::isnan(err) ? err : std::max(res.max_rel_err, std::min(rel, err / 1e-8));
      // How close this element is to failing: its error over its tolerance (> 1 fails). The
      // worst element is the one closest to failing, which is also the one to report when all pass.
      double ratio = err / (opts.atol + opts.rtol * std::fabs(numeric));
      if (std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();
      if (ratio > 1) res.ok = false;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        res.worst_input = static_cast<int>(i);
        res.worst_index = k;
        res.worst_analytic = an[k];
        res.worst_numeric = numeric;
      }
      ++res.checked;
    }
  }
  return res;
}

}  // namespace lm
