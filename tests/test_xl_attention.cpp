// test_xl_attention.cpp: causal attention after a constant prefix (nn/xl_attention.h), the
// attention of the Transformer-XL cache: the fused op against its composed reference (forward and
// gradients), against the plain fused causal attention over the concatenated sequence (an
// independent kernel), against finite differences in f64, and with an empty cache against
// causal_attention bit for bit.
#include "tests/helpers.h"

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "nn/functional.h"
#include "nn/xl_attention.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("prefix attention: fused equals the composed reference, forward and backward", "[nn][xl]") {
  manual_seed(301);
  // (T, M): one row, a cache only, small, one full row block, three row blocks, a cache longer
  // than the window (a Transformer-XL cache of M > T positions).
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 0}, {1, 3}, {7, 5}, {64, 64}, {150, 40}, {20, 70}};
  for (auto [T, M] : shapes) {
    INFO("T = " << T << ", M = " << M);
    const int64_t B = 2, NH = 3, HS = 16;
    Tensor qv = randn({B, NH, T, HS}, DType::F64), kv = randn({B, NH, T, HS}, DType::F64),
           vv = randn({B, NH, T, HS}, DType::F64), g = randn({B, NH, T, HS}, DType::F64);
    Tensor ck = randn({B, NH, M, HS}, DType::F64), cv = randn({B, NH, M, HS}, DType::F64);
    Var q1(qv, true), k1(kv, true), v1(vv, true), q2(qv, true), k2(kv, true), v2(vv, true);
    Var y1 = prefix_attention(q1, k1, v1, ck, cv), y2 = prefix_attention_reference(q2, k2, v2, ck, cv);
    // f64, the same math in different summation orders (the fused kernel sums the cache and the
    // window in two GEMMs, row block by row block): the tolerances of the causal attention test.
    CHECK(max_abs_diff(y1.value(), y2.value()) < 1e-13);
    y1.backward(g);
    y2.backward(g);
    CHECK(max_abs_diff(q1.grad(), q2.grad()) < 1e-12);
    CHECK(max_abs_diff(k1.grad(), k2.grad()) < 1e-12);
    CHECK(max_abs_diff(v1.grad(), v2.grad()) < 1e-12);
  }
}

TEST_CASE("prefix attention equals causal attention over [cache | window], restricted to the window", "[nn][xl]") {
  // Query i of the window sits at position M + i of the concatenated sequence, where causal
  // attention lets it see keys 0..M+i: the M cached ones and the window's up to itself. So the
  // last T output rows of causal_attention (nn/cpu/attention.cpp, another kernel) over
  // [any queries | q], [ck | k], [cv | v] are the prefix attention's output, and with an upstream
  // gradient only on those rows its dq, dk, dv there are the prefix attention's (the first M
  // queries get no gradient, and keys at M.. are seen by window queries only).
  manual_seed(302);
  for (auto [T, M] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {70, 90}}) {
    INFO("T = " << T << ", M = " << M);
    const int64_t B = 1, NH = 2, HS = 8;
    Tensor qv = randn({B, NH, T, HS}, DType::F64), kv = randn({B, NH, T, HS}, DType::F64),
           vv = randn({B, NH, T, HS}, DType::F64), g = randn({B, NH, T, HS}, DType::F64);
    Tensor cq = randn({B, NH, M, HS}, DType::F64), ck = randn({B, NH, M, HS}, DType::F64), cv = randn({B, NH, M, HS}, DType::F64);
    Var q(qv, true), k(kv, true), v(vv, true);
    Var y = prefix_attention(q, k, v, ck, cv);
    auto cat = [](const Tensor& a, const Tensor& b) { return concat(std::vector<Tensor>{a, b}, 2); };
    Var qa(cat(cq, qv), true), ka(cat(ck, kv), true), va(cat(cv, vv), true);
    Var ya = causal_attention(qa, ka, va);
    CHECK(max_abs_diff(y.value(), ya.value().narrow(2, M, T)) < 1e-13);  // f64, different summation orders
    y.backward(g);
    ya.backward(cat(zeros({B, NH, M, HS}, DType::F64), g));
    CHECK(max_abs_diff(q.grad(), qa.grad().narrow(2, M, T)) < 1e-12);
    CHECK(max_abs_diff(k.grad(), ka.grad().narrow(2, M, T)) < 1e-12);
    CHECK(max_abs_diff(v.grad(), va.grad().narrow(2, M, T)) < 1e-12);
    // And the cache matters: another cache gives another output (every query sees it).
    Tensor y_other = prefix_attention(Var(qv), Var(kv), Var(vv), ck, randn({B, NH, M, HS}, DType::F64)).value();
    CHECK(max_abs_diff(y.value().narrow(2, 0, 1), y_other.narrow(2, 0, 1)) > 1e-3);
  }
}

TEST_CASE("prefix attention with an empty cache is causal attention, bit for bit", "[nn][xl]") {
  // With M = 0 the fused kernel makes the causal kernel's GEMM calls with the same shapes, in the
  // same order, and the same softmax loops: not close, equal (tolerance 0), forward and backward,
  // in f32 (where summation order would show) and over three row blocks.
  manual_seed(303);
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t T : {7, 150}) {
      INFO("T = " << T << ", " << dtype_name(dt));
      const int64_t B = 2, NH = 2, HS = 16;
      Tensor qv = randn({B, NH, T, HS}, dt), kv = randn({B, NH, T, HS}, dt), vv = randn({B, NH, T, HS}, dt),
             g = randn({B, NH, T, HS}, dt);
      Var q1(qv, true), k1(kv, true), v1(vv, true), q2(qv, true), k2(kv, true), v2(vv, true);
      Var y1 = prefix_attention(q1, k1, v1, zeros({B, NH, 0, HS}, dt), zeros({B, NH, 0, HS}, dt)), y2 = causal_attention(q2, k2, v2);
      CHECK(max_abs_diff(y1.value(), y2.value()) == 0);
      y1.backward(g);
      y2.backward(g);
      CHECK(max_abs_diff(q1.grad(), q2.grad()) == 0);
      CHECK(max_abs_diff(k1.grad(), k2.grad()) == 0);
      CHECK(max_abs_diff(v1.grad(), v2.grad()) == 0);
      // Undefined cache tensors mean the same empty cache.
      CHECK(max_abs_diff(prefix_attention(Var(qv), Var(kv), Var(vv), Tensor(), Tensor()).value(), y2.value()) == 0);
    }
}

TEST_CASE("prefix attention: gradcheck in f64, and f32 close to f64", "[nn][xl][gradcheck]") {
  manual_seed(304);
  // The cache is a constant of the function: gradients are checked for q, k and v, and the
  // finite differences move only those, so an accidental dependence on a gradient of the cache
  // (or a missing cache term in dq) shows as a mismatch.
  Tensor ck = randn({1, 2, 3, 4}, DType::F64), cv = randn({1, 2, 3, 4}, DType::F64);
  GradcheckResult r = gradcheck([&](const std::vector<Var>& x) { return prefix_attention(x[0], x[1], x[2], ck, cv); },
                                {randn({1, 2, 5, 4}, DType::F64), randn({1, 2, 5, 4}, DType::F64), randn({1, 2, 5, 4}, DType::F64)});
  INFO(r.summary());
  CHECK(r.ok);
  // A cache longer than the window.
  Tensor ck2 = randn({2, 1, 6, 4}, DType::F64), cv2 = randn({2, 1, 6, 4}, DType::F64);
  GradcheckResult r2 = gradcheck([&](const std::vector<Var>& x) { return prefix_attention(x[0], x[1], x[2], ck2, cv2); },
                                 {randn({2, 1, 3, 4}, DType::F64), randn({2, 1, 3, 4}, DType::F64), randn({2, 1, 3, 4}, DType::F64)});
  INFO(r2.summary());
  CHECK(r2.ok);
  Tensor q = randn({1, 2, 70, 8}, DType::F64), k = randn({1, 2, 70, 8}, DType::F64), v = randn({1, 2, 70, 8}, DType::F64);
  Tensor c = randn({1, 2, 30, 8}, DType::F64), d = randn({1, 2, 30, 8}, DType::F64);
  Tensor y64 = prefix_attention(Var(q), Var(k), Var(v), c, d).value();
  Tensor y32 = prefix_attention(Var(q.to(DType::F32)), Var(k.to(DType::F32)), Var(v.to(DType::F32)), c.to(DType::F32),
                                d.to(DType::F32))
                   .value();
  CHECK(max_abs_diff(y32.to(DType::F64), y64) < 1e-5);  // f32 rounding through three GEMMs and a softmax
}

TEST_CASE("prefix attention refuses a cache that does not fit the window", "[nn][xl]") {
  Var q(zeros({1, 2, 4, 8}, DType::F64)), k(zeros({1, 2, 4, 8}, DType::F64)), v(zeros({1, 2, 4, 8}, DType::F64));
  CHECK_THROWS_WITH(prefix_attention(q, k, v, zeros({1, 3, 5, 8}, DType::F64), zeros({1, 3, 5, 8}, DType::F64)),
                    Catch::Contains("(B, NH, M, HS) = (1, 2, M, 8)"));
  CHECK_THROWS_WITH(prefix_attention(q, k, v, zeros({1, 2, 5, 8}, DType::F64), Tensor()), Catch::Contains("both"));
  CHECK_THROWS_WITH(prefix_attention(q, k, v, zeros({1, 2, 5, 8}, DType::F32), zeros({1, 2, 5, 8}, DType::F32)),
                    Catch::Contains("the cache"));
  CHECK_THROWS_AS(prefix_attention_reference(q, k, v, zeros({1, 2, 5, 8}, DType::F64), zeros({1, 2, 6, 8}, DType::F64)), Error);
}
