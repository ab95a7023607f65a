// test_autograd_graph.cpp: the semantics of the graph in autograd/var.h, each against a gradient
// worked out by hand: shared nodes (diamond, two consumers), a 100000-op chain (no recursion in
// building, backward or destruction), accumulation across backward() calls, grad mode, detach,
// error messages, leaves vs non-leaves, and broadcasting. Per-op derivatives are checked by finite
// differences in test_gradcheck.cpp, not here.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <cmath>
#include <exception>
#include <functional>
#include <vector>

#include "autograd/functions.h"
#include "autograd/var.h"
#include "tensor/create.h"
#include "tensor/ops.h"

using namespace lm;

namespace {
using Vec = std::vector<double>;

Var leaf(const Vec& values, const Shape& shape, bool requires_grad = true) {
  return Var(from_vector(values, shape), requires_grad);
}
Vec grad_of(const Var& v) {
  REQUIRE(v.grad().defined());
  return v.grad().to_vector<double>();
}
}  // namespace

// ---- shared nodes ----

TEST_CASE("graph: diamond b = a + a, c = b + b gives dc/da = 4", "[autograd][graph]") {
  Var a = leaf({1, -2, 3}, {3});
  Var b = a + a;  // a reaches b twice
  Var c = b + b;  // b reaches c twice
  c.backward(ones({3}, DType::F64));
  // dc/db = 2 (both uses of b), db/da = 2 (both uses of a): 2 * 2 = 4 for every element. An
  // engine that overwrites instead of summing gives 1; one where b passes on its running sum
  // each time a share arrives gives 2 + 4 = 6.
  CHECK(grad_of(a) == Vec{4, 4, 4});  // exact: sums of small integers
  CHECK(c.value().to_vector<double>() == Vec{4, -8, 12});
}

TEST_CASE("graph: a node with two consumers collects both gradients before passing them on",
          "[autograd][graph]") {
  // Leaf with two consumers: L = sum((3x) * (x x)) = sum(3 x^3)  ->  dL/dx = 9 x^2.
  Var x = leaf({1, 2, -1}, {3});
  Var L = sum(mul(x * 3.0, x * x));
  L.backward();
  CHECK(grad_of(x) == Vec{9, 36, 9});  // exact: products of small integers
  CHECK(L.item() == 3 + 24 - 3);

  // Intermediate node with two consumers: h = exp(t); L2 = sum(2h + h h)
  //   dL2/dh = 2 + 2h,  dh/dt = h  ->  dL2/dt = 2 e^t + 2 e^{2t}.
  const Vec tv = {0.0, 0.5, -1.0};
  Var t = leaf(tv, {3});
  Var h = exp(t);
  Var L2 = sum(add(mul(h, 2.0), mul(h, h)));
  L2.backward();
  Vec g = grad_of(t);
  for (int i = 0; i < 3; ++i) {
    const double want = 2 * std::exp(tv[i]) + 2 * std::exp(2 * tv[i]);
    // a handful of f64 roundings in exp, mul and add: relative 1e-14 is ~50 ulps of slack
    CHECK(g[i] == Approx(want).epsilon(1e-14));
  }
}

// ---- depth: 100000 ops, no recursion anywhere ----

namespace {
// Runs `body` on a thread with a 1 MiB stack. A recursion over 100000 nodes needs ~8 MiB even at
// ~80 bytes a frame (a recursive shared_ptr release measures about that at -O2), so on the usual
// 8 MiB main stack it may pass by luck; on 1 MiB it crashes the test. Exceptions come back here.
void run_on_small_stack(const std::function<void()>& body) {
  struct Job {
    const std::function<void()>* body;
    std::exception_ptr error;
  } job{&body, nullptr};
  void* (*entry)(void*) = [](void* p) -> void* {
    Job* j = static_cast<Job*>(p);
    try {
      (*j->body)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 20);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, entry, &job);
  pthread_attr_destroy(&attr);
  REQUIRE(rc == 0);
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}
}  // namespace

TEST_CASE("graph: 100000-op chain x + 1 builds, backpropagates and is destroyed without recursion",
          "[autograd][graph][deep]") {
  const int n = 100000;
  Var x = leaf({0.5, -2.0}, {2});
  Vec value, grad;
  run_on_small_stack([&] {
    Var y = x;
    for (int i = 0; i < n; ++i) y = y + 1.0;  // y's node owns the whole chain back to x
    value = y.value().to_vector<double>();
    sum(y).backward();  // topological sort with an explicit stack: a recursive one overflows here
    if (x.grad().defined()) grad = x.grad().to_vector<double>();  // Catch macros stay on the main thread
  });  // y left scope inside the thread: 100000 nodes released by Node::~Node's worklist
  // Adding 1.0 to 0.5 or -2 is exact in f64 (far below 2^53), so the value is exactly x + n.
  CHECK(value == Vec{0.5 + n, -2.0 + n});
  // dy/dx = 1 through every step; a gradient of 1 passed on unchanged stays exactly 1.
  CHECK(grad == Vec{1, 1});
  CHECK(x.is_leaf());  // x survived its consumers
}

TEST_CASE("graph: 100000-op chain x * 1.0001 gives the product of the local derivatives",
          "[autograd][graph][deep]") {
  const int n = 100000;
  const double s = 1.0001;
  Var x = leaf({1.0, -3.0}, {2});
  Vec grad;
  bool released = false;
  run_on_small_stack([&] {
    Var y = x;
    for (int i = 0; i < n; ++i) y = y * s;
    sum(y).backward();
    if (x.grad().defined()) grad = x.grad().to_vector<double>();
    // Destroying a chain that has never seen backward() must not recurse either.
    Var z = x;
    for (int i = 0; i < n; ++i) z = z * s;
    z = Var();  // releases the 100000-node chain here, on the small stack
    released = !z.defined();
  });
  // Hand-worked answer: dy/dx = s^n. The backward multiplies its incoming 1 by s, n times, in
  // f64, which is exactly what this loop does, so the comparison is exact.
  double want = 1.0;
  for (int i = 0; i < n; ++i) want *= s;
  CHECK(grad == Vec{want, want});
  // And that loop is s^n = e^(n ln s) ~ 22015 up to accumulated rounding (~n ulps ~ 1e-11 rel).
  CHECK(want == Approx(std::pow(s, n)).epsilon(1e-9));
  CHECK(released);
}

// ---- accumulation, grad mode, detach ----

TEST_CASE("graph: two backward() calls accumulate twice the gradient, zero_grad resets",
          "[autograd][graph]") {
  Var x = leaf({1, 2, 3}, {3});
  Var L = sum(x * x);  // dL/dx = 2x = {2, 4, 6}
  L.backward();
  CHECK(grad_of(x) == Vec{2, 4, 6});
  L.backward();  // the graph is kept: backward functions hold only tensors
  CHECK(grad_of(x) == Vec{4, 8, 12});  // exact: small integers
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());  // "no gradient yet", not a tensor of zeros
  L.backward();
  CHECK(grad_of(x) == Vec{2, 4, 6});
}

TEST_CASE("graph: NoGradGuard records nothing and restores the previous mode", "[autograd][graph]") {
  Var x = leaf({1, 2}, {2});
  REQUIRE(grad_enabled());
  {
    NoGradGuard guard;
    CHECK_FALSE(grad_enabled());
    Var y = exp(x * 2.0);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.node()->parents.empty());  // nothing recorded: x's node is not kept alive by y
    CHECK(y.is_leaf());
    CHECK(y.value().to_vector<double>() == Vec{std::exp(2.0), std::exp(4.0)});  // value still computed
    {
      NoGradGuard nested;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());  // the inner guard restores "off", not "on"
    CHECK_THROWS_AS(sum(y).backward(), Error);
  }
  CHECK(grad_enabled());
  Var z = x * 2.0;
  CHECK(z.requires_grad());
  CHECK_FALSE(z.is_leaf());
}

TEST_CASE("graph: detach cuts the graph but keeps the value", "[autograd][graph]") {
  Var x = leaf({1, 2, 3}, {3});
  Var y = x * 2.0;
  Var d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.value().to_vector<double>() == Vec{2, 4, 6});
  // Through d, L = sum(d * x) sees d as a constant: dL/dx = d = 2x = {2, 4, 6}.
  // Without the detach, L = sum(2x * x) would give 4x = {4, 8, 12}.
  sum(mul(d, x)).backward();
  CHECK(grad_of(x) == Vec{2, 4, 6});
  CHECK_FALSE(d.grad().defined());
}

// ---- errors: loud, and saying what to do ----

TEST_CASE("graph: backward() misuse throws lm::Error with a helpful message", "[autograd][graph][errors]") {
  Var x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Var y = x * 2.0;

  // Non-scalar without a gradient: the message names the shape and the remedy.
  CHECK_THROWS_AS(y.backward(), Error);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("[2, 3]") && Catch::Contains("gradient"));

  // Explicit gradient of the wrong shape, dtype or rank.
  CHECK_THROWS_AS(y.backward(ones({3, 2}, DType::F64)), Error);
  CHECK_THROWS_AS(y.backward(ones({6}, DType::F64)), Error);
  CHECK_THROWS_AS(y.backward(ones({2, 3}, DType::F32)), Error);
  CHECK_THROWS_WITH(y.backward(ones({3, 2}, DType::F64)), Catch::Contains("[3, 2]") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_AS(y.backward(Tensor()), Error);
  CHECK_FALSE(x.grad().defined());  // failed calls leave no partial gradient behind

  // Nothing requires grad: there is no graph to walk.
  Var c = leaf({1, 2}, {2}, false);
  Var s = sum(c * 3.0);
  CHECK_FALSE(s.requires_grad());
  CHECK_THROWS_AS(s.backward(), Error);
  CHECK_THROWS_WITH(s.backward(), Catch::Contains("does not require grad"));

  // A single element of any rank gets the implicit gradient 1.
  Var one = leaf({5}, {1, 1});
  (one * 3.0).backward();
  CHECK(grad_of(one) == Vec{3});

  CHECK_THROWS_AS(Var().backward(), Error);
}

TEST_CASE("graph: only float leaves can require grad", "[autograd][graph][errors]") {
  Tensor idx = from_vector(std::vector<int32_t>{0, 1, 2}, {3});
  Var i(idx);
  CHECK_THROWS_AS(i.set_requires_grad(true), Error);
  CHECK_THROWS_WITH(i.set_requires_grad(true), Catch::Contains("i32"));
  CHECK_NOTHROW(i.set_requires_grad(false));
  CHECK_THROWS_AS(Var(idx, true), Error);

  Var f = leaf({1, 2}, {2}, false);
  f.set_requires_grad(true);
  CHECK(f.requires_grad());
  Var g = f * 2.0;
  CHECK_THROWS_AS(g.set_requires_grad(false), Error);  // non-leaves follow their inputs
  CHECK_THROWS_WITH(g.set_requires_grad(false), Catch::Contains("mul_scalar"));
}

// ---- leaves, non-leaves, inputs without grad ----

TEST_CASE("graph: leaves get .grad, non-leaves do not keep theirs", "[autograd][graph]") {
  Var x = leaf({1, 2}, {2});
  Var h = x * 3.0;
  Var L = sum(h * h);  // L = sum(9 x^2)  ->  dL/dx = 18 x
  CHECK(x.is_leaf());
  CHECK(x.op() == "leaf");
  CHECK_FALSE(h.is_leaf());
  CHECK(h.op() == "mul_scalar");
  CHECK(h.requires_grad());
  L.backward();
  CHECK(grad_of(x) == Vec{18, 36});
  // dL/dh = 2h passed through h but was not stored on it: only leaves keep gradients.
  CHECK_FALSE(h.grad().defined());
  CHECK_FALSE(L.grad().defined());

  // backward() straight from a leaf stores a copy of the seed, not an alias of it.
  Var w = leaf({1, 2}, {2});
  Tensor seed = from_vector(Vec{7, 8}, {2});
  w.backward(seed);
  seed.fill_(0.0);
  CHECK(grad_of(w) == Vec{7, 8});
}

TEST_CASE("graph: an input that does not require grad gets no gradient", "[autograd][graph]") {
  Var a = leaf({1, 2, 3}, {3});
  Var b = leaf({4, 5, 6}, {3}, false);
  Var y = mul(a, b);
  CHECK(y.node()->parents.size() == 1);  // b is not part of the graph
  sum(y).backward();
  CHECK(grad_of(a) == Vec{4, 5, 6});  // d(sum a b)/da = b
  CHECK_FALSE(b.grad().defined());
}

// ---- broadcasting ----

TEST_CASE("graph: broadcasting add sums the gradient back to each input's shape", "[autograd][graph]") {
  Var a = leaf({0, 0, 0, 0, 0, 0}, {2, 3});
  Var row = leaf({0, 0, 0}, {3});      // broadcast over rows
  Var col = leaf({0, 0}, {2, 1});      // broadcast over columns
  Var s = leaf({0}, {});               // 0-d: broadcast everywhere
  Var y = add(add(add(a, row), col), s);
  REQUIRE(y.shape() == Shape{2, 3});
  // g = [[1, 2, 3], [4, 5, 6]]; by hand:
  //   da = g; drow = column sums {5, 7, 9}; dcol = row sums {{6}, {15}}; ds = total 21.
  y.backward(from_vector(Vec{1, 2, 3, 4, 5, 6}, {2, 3}));
  CHECK(grad_of(a) == Vec{1, 2, 3, 4, 5, 6});
  CHECK(grad_of(row) == Vec{5, 7, 9});
  CHECK(col.grad().shape() == Shape{2, 1});
  CHECK(grad_of(col) == Vec{6, 15});
  CHECK(s.grad().shape() == Shape{});
  CHECK(grad_of(s) == Vec{21});

  // The same through mul: y = a3 * b3 with b3 (3) broadcast over 2 rows.
  //   dL/db3[j] = sum_i g[i][j] a3[i][j] with g = 1: column sums of a3 = {5, 7, 9}.
  Var a3 = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Var b3 = leaf({1, 1, 1}, {3});
  sum(mul(a3, b3)).backward();
  CHECK(grad_of(b3) == Vec{5, 7, 9});
  CHECK(grad_of(a3) == Vec{1, 1, 1, 1, 1, 1});
}

TEST_CASE("op profile: counts each op's calls, charges forward and backward time, off by default", "[autograd]") {
  Var a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Var b = leaf({1, 1, 1}, {3});
  sum(mul(a, b)).backward();  // profiling off: nothing recorded
  CHECK(op_profile().empty());

  set_op_profiling(true);
  Var y = mul(a, b);   // 1 mul
  Var z = mul(y, y);   // 2 muls
  Var s = sum(add(z, a));  // 1 add, 1 sum
  s.backward();
  set_op_profiling(false);
  Var ignored = mul(a, b);  // after switching off: not counted
  std::vector<OpTotals> ops = op_profile();
  auto find = [&](const std::string& name) -> const OpTotals* {
    for (const OpTotals& o : ops)
      if (o.op == name) return &o;
    return nullptr;
  };
  REQUIRE(find("mul") != nullptr);
  CHECK(find("mul")->calls == 2);
  REQUIRE(find("add") != nullptr);
  CHECK(find("add")->calls == 1);
  REQUIRE(find("sum") != nullptr);
  CHECK(find("sum")->calls == 1);
  REQUIRE(find("leaf") != nullptr);  // a and b received gradients
  CHECK(find("leaf")->calls == 0);
  for (const OpTotals& o : ops) {
    CHECK(o.forward_s >= 0);
    CHECK(o.backward_s >= 0);
  }
  // Sorted by forward + backward, largest first.
  for (size_t i = 1; i < ops.size(); ++i)
    CHECK(ops[i - 1].forward_s + ops[i - 1].backward_s >= ops[i].forward_s + ops[i].backward_s);
  // Turning it on again starts a fresh profile.
  set_op_profiling(true);
  set_op_profiling(false);
  CHECK(op_profile().empty());
}
