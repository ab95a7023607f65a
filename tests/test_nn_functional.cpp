// test_nn_functional.cpp: rotary embedding, fused causal attention (vs its composed reference and
// finite differences), dropout, and the fused AdamW step (vs the formula written out).
#include "tests/helpers.h"

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "nn/functional.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("rotary tables: angles pos * base^(-2i/HS) in f64", "[nn][rotary]") {
  RotaryTables t = rotary_tables(from_vector(std::vector<int32_t>{0, 1, 7}, {1, 3}), 4, 10000.0, DType::F64, Device::CPU);
  REQUIRE(t.cos.shape() == Shape{1, 3, 2});
  // HS = 4: inverse frequencies 1 and 10000^(-1/2) = 0.01.
  std::vector<double> c = values(t.cos), s = values(t.sin);
  CHECK(c[0] == 1.0);
  CHECK(s[0] == 0.0);
  CHECK(std::fabs(c[2] - std::cos(1.0)) < 1e-16);
  CHECK(std::fabs(s[3] - std::sin(0.01)) < 1e-16);
  CHECK(std::fabs(s[4] - std::sin(7.0)) < 1e-15);
  CHECK(std::fabs(c[5] - std::cos(0.07)) < 1e-15);
  CHECK_THROWS_AS(rotary_tables(zeros({1, 3}, DType::I32), 3, 10000.0, DType::F32, Device::CPU), Error);
}

TEST_CASE("rotary rotates interleaved pairs, inverse undoes it, dot products depend on offsets only",
          "[nn][rotary]") {
  manual_seed(51);
  const int64_t B = 2, NH = 3, T = 5, HS = 8;
  Tensor x = randn({B, NH, T, HS}, DType::F64);
  RotaryTables t = rotary_tables(T, HS, 10000.0, DType::F64, Device::CPU);
  Tensor y = rotary(x, t);
  // Hand rotation of one pair: (b=1, h=2, t=3, i=1) -> dims 2, 3.
  std::vector<double> xv = values(x), yv = values(y), c = values(t.cos), s = values(t.sin);
  int64_t base = ((1 * NH + 2) * T + 3) * HS;
  double ci = c[3 * 4 + 1], si = s[3 * 4 + 1];
  CHECK(std::fabs(yv[base + 2] - (xv[base + 2] * ci - xv[base + 3] * si)) < 1e-15);
  CHECK(std::fabs(yv[base + 3] - (xv[base + 2] * si + xv[base + 3] * ci)) < 1e-15);
  CHECK(max_abs_diff(rotary(y, t, true), x) < 1e-14);
  // The reason rotary works: <R(m) q, R(n) k> depends only on m - n. Shift both positions by 3.
  RotaryTables shifted = rotary_tables(arange(3, 3 + T, 1, DType::I32).reshape({1, T}), HS, 10000.0, DType::F64, Device::CPU);
  Tensor q = randn({1, 1, T, HS}, DType::F64), k = randn({1, 1, T, HS}, DType::F64);
  Tensor d0 = matmul(rotary(q, t), rotary(k, t), false, true), d1 = matmul(rotary(q, shifted), rotary(k, shifted), false, true);
  CHECK(max_abs_diff(d0, d1) < 1e-13);
  // Per-batch positions (PB = B) select the right row.
  RotaryTables pb = rotary_tables(from_vector(std::vector<int32_t>{0, 1, 2, 3, 4, 3, 4, 5, 6, 7}, {2, T}), HS, 10000.0,
                                  DType::F64, Device::CPU);
  CHECK(max_abs_diff(rotary(x, pb).narrow(0, 1, 1), rotary(x.narrow(0, 1, 1), shifted)) < 1e-15);
}

TEST_CASE("rotary backward passes gradcheck", "[nn][rotary][gradcheck]") {
  manual_seed(52);
  RotaryTables t = rotary_tables(4, 6, 10000.0, DType::F64, Device::CPU);
  GradcheckResult r = gradcheck([&](const std::vector<Var>& v) { return rotary(v[0], t); }, {randn({2, 2, 4, 6}, DType::F64)});
  INFO(r.summary());
  CHECK(r.ok);
  CHECK(r.max_abs_err < 1e-8);  // a linear map: central differences are exact up to rounding
}

TEST_CASE("fused causal attention equals the composed reference, forward and backward", "[nn][attention]") {
  manual_seed(53);
  for (int64_t T : {1, 7, 64, 150}) {  // 150 spans three 64-row blocks of the fused kernel
    INFO("T = " << T);
    const int64_t B = 2, NH = 3, HS = 16;
    Tensor qv = randn({B, NH, T, HS}, DType::F64), kv = randn({B, NH, T, HS}, DType::F64), vv = randn({B, NH, T, HS}, DType::F64);
    Tensor g = randn({B, NH, T, HS}, DType::F64);
    Var q1(qv, true), k1(kv, true), v1(vv, true), q2(qv, true), k2(kv, true), v2(vv, true);
    Var y1 = causal_attention(q1, k1, v1), y2 = causal_attention_reference(q2, k2, v2);
    CHECK(max_abs_diff(y1.value(), y2.value()) < 1e-13);  // f64: same math, different summation order
    y1.backward(g);
    y2.backward(g);
    CHECK(max_abs_diff(q1.grad(), q2.grad()) < 1e-12);
    CHECK(max_abs_diff(k1.grad(), k2.grad()) < 1e-12);
    CHECK(max_abs_diff(v1.grad(), v2.grad()) < 1e-12);
  }
}

TEST_CASE("fused causal attention: f32 matches f64, and gradcheck passes", "[nn][attention][gradcheck]") {
  manual_seed(54);
  Tensor q = randn({1, 2, 70, 8}, DType::F64), k = randn({1, 2, 70, 8}, DType::F64), v = randn({1, 2, 70, 8}, DType::F64);
  Tensor y64 = causal_attention(Var(q), Var(k), Var(v)).value();
  Tensor y32 = causal_attention(Var(q.to(DType::F32)), Var(k.to(DType::F32)), Var(v.to(DType::F32))).value();
  CHECK(max_abs_diff(y32.to(DType::F64), y64) < 1e-5);  // f32 rounding through two GEMMs and a softmax
  // First query sees only itself: output row 0 equals v row 0.
  CHECK(max_abs_diff(y64.narrow(2, 0, 1), v.narrow(2, 0, 1)) < 1e-15);
  GradcheckResult r = gradcheck([](const std::vector<Var>& x) { return causal_attention(x[0], x[1], x[2]); },
                                {randn({1, 2, 5, 4}, DType::F64), randn({1, 2, 5, 4}, DType::F64), randn({1, 2, 5, 4}, DType::F64)});
  INFO(r.summary());
  CHECK(r.ok);
}

// The packed path (qkv_heads + causal_attention_packed) against the spelled-out split that the
// model used before it: the same kernels see the same numbers, so values and gradients must be
// the same bits, in f32 and f64, with shared and per-batch rotary positions.
TEST_CASE("packed q/k/v heads and attention give the split path's bits, forward and backward", "[nn][attention]") {
  manual_seed(57);
  const int64_t B = 2, NH = 3, HS = 8, C = NH * HS;
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t T : {1, 9, 140})
      for (bool per_batch : {false, true}) {
        INFO("dtype " << dtype_name(dt) << ", T " << T << ", per-batch positions " << per_batch);
        std::vector<int32_t> p;  // batch row 1 starts at position 5 when per_batch
        for (int64_t r = 0; r < (per_batch ? B : 1); ++r)
          for (int64_t t = 0; t < T; ++t) p.push_back(static_cast<int32_t>(t + 5 * r));
        Tensor pos = from_vector(p, {per_batch ? B : 1, T});
        RotaryTables rot = rotary_tables(pos, HS, 10000.0, dt, Device::CPU);
        Tensor x = randn({B, T, 3 * C}, dt), g = randn({B, NH, T, HS}, dt);
        Var a(x, true), b(x, true);
        Var ya = causal_attention_packed(qkv_heads(a, NH, rot));
        auto heads = [&](int64_t part) { return transpose(reshape(narrow(b, 2, part * C, C), {B, T, NH, HS}), 1, 2); };
        Var yb = causal_attention(rotary(contiguous(heads(0)), rot), rotary(contiguous(heads(1)), rot), heads(2));
        CHECK(max_abs_diff(ya.value(), yb.value()) == 0);
        ya.backward(g);
        yb.backward(g);
        CHECK(max_abs_diff(a.grad(), b.grad()) == 0);
        // Independent check that the packing itself is right: part 2 is v, at columns [2C, 3C).
        Tensor packed = qkv_heads(Var(x), NH, rot).value();
        CHECK(max_abs_diff(packed.select(0, 2), x.narrow(2, 2 * C, C).reshape({B, T, NH, HS}).transpose(1, 2)) == 0);
      }
  CHECK_THROWS_AS(qkv_heads(Var(zeros({2, 3, 10})), 3, rotary_tables(3, 2, 10000.0, DType::F32, Device::CPU)), Error);
  CHECK_THROWS_AS(causal_attention_packed(Var(zeros({2, 1, 1, 3, 4}))), Error);
  // Tables for another length (4, not 3) are refused, naming the op.
  CHECK_THROWS_WITH(qkv_heads(Var(zeros({2, 3, 12})), 2, rotary_tables(4, 2, 10000.0, DType::F32, Device::CPU)),
                    Catch::Contains("qkv_heads: tables"));
}

TEST_CASE("packed q/k/v heads and attention pass gradcheck", "[nn][attention][gradcheck]") {
  manual_seed(58);
  RotaryTables rot = rotary_tables(5, 4, 10000.0, DType::F64, Device::CPU);
  GradcheckResult r = gradcheck(
      [&](const std::vector<Var>& x) { return causal_attention_packed(qkv_heads(x[0], 2, rot)); },
      {randn({2, 5, 24}, DType::F64)});
  INFO(r.summary());
  CHECK(r.ok);
}

TEST_CASE("dropout keeps expectation, zeroes about p, identity in eval", "[nn][dropout]") {
  manual_seed(55);
  Var x(ones({100000}), true);
  Var y = dropout(x, 0.25, true);
  std::vector<double> yv = values(y.value());
  int64_t zeros_n = 0;
  double total = 0;
  for (double v : yv) {
    zeros_n += v == 0;
    total += v;
    CHECK((v == 0 || std::fabs(v - 1 / 0.75) < 1e-6));
  }
  CHECK(std::fabs(zeros_n / 100000.0 - 0.25) < 0.01);  // binomial std ~ 0.0014
  CHECK(std::fabs(total / 100000.0 - 1.0) < 0.01);
  sum(y).backward();
  CHECK(max_abs_diff(x.grad(), y.value()) < 1e-6);  // same mask scales the gradient
  Var e = dropout(x, 0.25, false);
  CHECK(e.node() == x.node());
  CHECK_THROWS_AS(dropout(x, 1.0, true), Error);
}

TEST_CASE("adamw_update matches the PyTorch AdamW formula written out", "[nn][adamw]") {
  manual_seed(56);
  Tensor p = randn({50}, DType::F64), m = zeros({50}, DType::F64), v = zeros({50}, DType::F64);
  std::vector<double> P = values(p), M(50, 0), V(50, 0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  for (int64_t step = 1; step <= 3; ++step) {
    Tensor g = randn({50}, DType::F64);
    std::vector<double> G = values(g);
    adamw_update(p, g, m, v, lr, b1, b2, eps, wd, step);
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    for (int i = 0; i < 50; ++i) {
      M[i] = b1 * M[i] + (1 - b1) * G[i];
      V[i] = b2 * V[i] + (1 - b2) * G[i] * G[i];
      P[i] *= 1 - lr * wd;
      P[i] -= lr / bc1 * M[i] / (std::sqrt(V[i]) / std::sqrt(bc2) + eps);
    }
  }
  CHECK(max_abs_diff(p, P) < 1e-15);
  CHECK(max_abs_diff(m, M) < 1e-15);
  CHECK(max_abs_diff(v, V) < 1e-15);
  CHECK_THROWS_AS(adamw_update(p, zeros({49}, DType::F64), m, v, lr, b1, b2, eps, wd, 1), Error);
  CHECK_THROWS_AS(adamw_update(p, p, m, v, lr, b1, b2, eps, wd, 0), Error);
}

