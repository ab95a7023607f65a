// test_optim.cpp: learning-rate schedules against hand-computed points, gradient clipping, and
// AdamW's parameter selection (weight decay on Linear weights only).
#include "tests/helpers.h"

#include "autograd/functions.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("one-cycle schedule: lr/100 -> lr over 2% (cosine) -> lr/5", "[optim]") {
  const int64_t total = 1000;  // warm-up ends at step 0.02 * 1000 - 1 = 19
  const double lr = 2e-3;
  CHECK(std::fabs(lr_one_cycle(0, total, lr) - lr / 100) < 1e-18);
  CHECK(std::fabs(lr_one_cycle(19, total, lr) - lr) < 1e-18);
  // Halfway through the warm-up (step 9.5 would be exactly half): cosine midpoint formula.
  const double pct = 9.0 / 19.0, expect = lr + (lr / 100 - lr) / 2 * (std::cos(M_PI * pct) + 1);
  CHECK(std::fabs(lr_one_cycle(9, total, lr) - expect) < 1e-18);
  CHECK(std::fabs(lr_one_cycle(999, total, lr) - lr / 5) < 1e-18);
  for (int64_t s = 20; s < total; ++s) CHECK(lr_one_cycle(s, total, lr) <= lr_one_cycle(s - 1, total, lr) + 1e-18);
  CHECK_THROWS_AS(lr_one_cycle(total, total, lr), Error);
}

TEST_CASE("warmup + cosine schedule", "[optim]") {
  CHECK(lr_warmup_cosine(0, 100, 1.0, 10, 0.1) == 0.1);  // (0 + 1) / 10 of the way up
  CHECK(lr_warmup_cosine(9, 100, 1.0, 10, 0.1) == 1.0);
  CHECK(std::fabs(lr_warmup_cosine(10, 100, 1.0, 10, 0.1) - 1.0) < 1e-15);
  CHECK(std::fabs(lr_warmup_cosine(99, 100, 1.0, 10, 0.1) - 0.1) < 1e-15);
}

namespace {
struct TwoLayer : Module {
  Linear a{3, 4}, b{4, 2, true};
  TwoLayer() {
    register_module("a", a);
    register_module("b", b);
  }
};
}  // namespace

TEST_CASE("named parameters, decay flags and gradient clipping", "[optim]") {
  manual_seed(61);
  TwoLayer m;
  auto named = m.named_parameters();
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "a.weight");
  CHECK(named[2].first == "b.bias");
  CHECK(m.decays(&m.a.weight));
  CHECK_FALSE(m.decays(&m.b.bias));
  CHECK(m.num_parameters() == 12 + 8 + 2);
  Var x(randn({5, 3}));
  sum(m.b.forward(m.a.forward(x))).backward();
  double before = grad_norm(m);
  double expect = 0;
  for (Var* p : m.parameters())
    for (double g : values(p->grad())) expect += g * g;
  CHECK(std::fabs(before - std::sqrt(expect)) < 1e-4 * before);  // f32 squares summed in f64
  double reported = clip_grad_norm(m, before / 2);
  CHECK(reported == before);
  CHECK(std::fabs(grad_norm(m) - before / 2) < 1e-4 * before);
  m.zero_grad();
  CHECK_FALSE(m.a.weight.grad().defined());
}

TEST_CASE("AdamW decays Linear weights only and skips parameters without gradient", "[optim]") {
  manual_seed(62);
  TwoLayer m;
  Tensor w0 = m.a.weight.value().clone(), bias0 = m.b.bias.value().clone();
  AdamWConfig cfg;
  cfg.weight_decay = 0.5;
  AdamW opt(m, cfg);
  // Zero gradients: Adam's update is 0 / (0 + eps) = 0, so only the decay moves parameters.
  for (Var* p : m.parameters()) p->set_grad(zeros_like(p->value()));
  opt.step(0.1);
  CHECK(max_abs_diff(m.a.weight.value(), mul(w0, 1 - 0.1 * 0.5)) < 1e-7);
  CHECK(max_abs_diff(m.b.bias.value(), bias0) == 0);
  m.zero_grad();
  Tensor before = m.a.weight.value().clone();
  opt.step(0.1);  // no gradients at all: nothing moves
  CHECK(max_abs_diff(m.a.weight.value(), before) == 0);
  CHECK(opt.steps() == 2);
  CHECK(opt.named_state().size() == 6);
}
