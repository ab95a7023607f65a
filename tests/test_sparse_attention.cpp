// test_sparse_attention.cpp: top-k landmark attention (sparse/attention.h, training with the
// cache) against the dense fused op (K at or above the blocks: the same op), its composed naive
// twin (random layouts, K from 1 up), f64 finite differences, a selection written here with a
// full sort, and the dense op's weights for the left-out share.
#include <algorithm>
#include <numeric>
#include <random>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "landmark/attention.h"
#include "sparse/attention.h"
#include "tensor/rng.h"
#include "tests/helpers.h"

using namespace lm;
using namespace lm::test;

namespace {
// A random layout row: blocks of 1..max_len regular tokens, each closed by a landmark, the last
// block left open or closed at random; position 0 is never a landmark.
std::vector<int32_t> random_kinds_row(int64_t T, int max_len, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> k(T, kRegular);
  int64_t t = 0;
  while (true) {
    t += 1 + static_cast<int64_t>(gen() % static_cast<uint64_t>(max_len));
    if (t >= T) break;
    k[t] = kLandmark;
    ++t;
  }
  return k;
}
Tensor kinds_of(const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> all;
  for (auto& r : rows) all.insert(all.end(), r.begin(), r.end());
  return from_vector(all, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}
SparseOptions opts(int64_t K, SparseGates g) {
  SparseOptions o;
  o.top_k = K;
  o.gates = g;
  return o;
}
struct Grads {
  Tensor y, dq, dk, dv;
};
template <class Fn>
Grads run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, Fn f) {
  Var qv(q, true), kv(k, true), vv(v, true);
  Var y = f(qv, kv, vv);
  y.backward(g);
  return {y.value(), qv.grad(), kv.grad(), vv.grad()};
}
void check_close(const Grads& a, const Grads& b, double tol_y, double tol_g) {
  CHECK(max_abs_diff(a.y, b.y) < tol_y);
  CHECK(max_abs_diff(a.dq, b.dq) < tol_g);
  CHECK(max_abs_diff(a.dk, b.dk) < tol_g);
  CHECK(max_abs_diff(a.dv, b.dv) < tol_g);
}
}  // namespace

TEST_CASE("sparse attention: K at or above the earlier blocks is the dense fused op, both gate variants", "[sparse]") {
  // Every row has at most 5 earlier blocks (landmarks at 4, 9, 14, 19, 24 of T 30); K 5 and K 9
  // choose them all, so both variants are the dense grouped softmax, forward and backward. f64: the
  // two kernels sum the same terms in different orders, so they agree to rounding (1e-12).
  manual_seed(301);
  const int64_t B = 2, NH = 2, T = 30, HS = 8;
  std::vector<int32_t> row0(T, kRegular), row1 = random_kinds_row(T, 6, 7);
  for (int p : {4, 9, 14, 19, 24}) row0[p] = kLandmark;
  Tensor kinds = kinds_of({row0, row1});
  LandmarkLayout L = make_layout(kinds);
  Tensor q = randn({B, NH, T, HS}, DType::F64), k = randn({B, NH, T, HS}, DType::F64),
         v = randn({B, NH, T, HS}, DType::F64), g = randn({B, NH, T, HS}, DType::F64);
  Grads dense =
      run(q, k, v, g, [&](const Var& a, const Var& b, const Var& c) { return landmark_attention(a, b, c, L); });
  const int64_t most = std::max<int64_t>(5, std::count(row1.begin(), row1.end(), kLandmark));
  for (SparseGates gates : {SparseGates::Chosen, SparseGates::All})
    for (int64_t K : {most, most + 4}) {
      INFO("gates " << sparse_gates_name(gates) << ", K " << K);
      Grads sp = run(q, k, v, g, [&](const Var& a, const Var& b, const Var& c) {
        return sparse_landmark_attention(a, b, c, L, opts(K, gates));
      });
      check_close(sp, dense, 1e-12, 1e-12);
    }
  // In f32 against the dense f32 op: sums of ~30 O(1) terms in a different order, ~1e-7 each.
  Tensor q32 = q.to(DType::F32), k32 = k.to(DType::F32), v32 = v.to(DType::F32), g32 = g.to(DType::F32);
  Grads dense32 =
      run(q32, k32, v32, g32, [&](const Var& a, const Var& b, const Var& c) { return landmark_attention(a, b, c, L); });
  Grads sp32 = run(q32, k32, v32, g32, [&](const Var& a, const Var& b, const Var& c) {
    return sparse_landmark_attention(a, b, c, L, opts(most, SparseGates::All));
  });
  check_close(sp32, dense32, 2e-6, 1e-5);
}

TEST_CASE("sparse attention: fused equals its naive twin on random layouts, K from 1 up, forward and backward",
          "[sparse]") {
  // The twin (sparse/reference.cpp) masks the dense composed op and makes its own choice with a
  // full sort in f64. T 70 spans two of the kernel's 64-row blocks. f64: 1e-12.
  manual_seed(302);
  const int64_t B = 2, NH = 2, T = 70, HS = 6;
  for (uint64_t seed : {11u, 12u, 13u}) {
    Tensor kinds = kinds_of({random_kinds_row(T, 7, seed), random_kinds_row(T, 4, seed + 100)});
    LandmarkLayout L = make_layout(kinds);
    Tensor q = randn({B, NH, T, HS}, DType::F64), k = randn({B, NH, T, HS}, DType::F64),
           v = randn({B, NH, T, HS}, DType::F64), g = randn({B, NH, T, HS}, DType::F64);
    for (SparseGates gates : {SparseGates::Chosen, SparseGates::All})
      for (int64_t K : {1, 2, 3, 5}) {
        INFO("layout seed " << seed << ", gates " << sparse_gates_name(gates) << ", K " << K);
        Grads fused = run(q, k, v, g, [&](const Var& a, const Var& b, const Var& c) {
          return sparse_landmark_attention(a, b, c, L, opts(K, gates));
        });
        Grads twin = run(q, k, v, g, [&](const Var& a, const Var& b, const Var& c) {
          return sparse_landmark_reference(a, b, c, kinds, opts(K, gates));
        });
        check_close(fused, twin, 1e-12, 1e-12);
      }
  }
}

TEST_CASE("sparse attention: the f32 op equals the f64 twin given the same choice", "[sparse]") {
  // Inputs rounded to f32 first; the twin takes the f32 op's choice (near ties may rank
  // differently in f32 and f64), so the comparison is of the arithmetic alone: O(1) sums of up
  // to ~40 terms, 2e-6 forward and 1e-5 backward as for the dense op.
  manual_seed(303);
  const int64_t B = 2, NH = 2, T = 70, HS = 8, K = 2;
  Tensor kinds = kinds_of({random_kinds_row(T, 9, 21), random_kinds_row(T, 5, 22)});
  LandmarkLayout L = make_layout(kinds);
  auto r32 = [](const Tensor& t) { return t.to(DType::F32).to(DType::F64); };
  Tensor q = r32(randn({B, NH, T, HS}, DType::F64)), k = r32(randn({B, NH, T, HS}, DType::F64)),
         v = r32(randn({B, NH, T, HS}, DType::F64)), g = r32(randn({B, NH, T, HS}, DType::F64));
  for (SparseGates gates : {SparseGates::Chosen, SparseGates::All}) {
    INFO("gates " << sparse_gates_name(gates));
    Tensor chosen = sparse_landmark_choice(q.to(DType::F32), k.to(DType::F32), L, K);
    Grads f32 = run(q.to(DType::F32), k.to(DType::F32), v.to(DType::F32), g.to(DType::F32),
                    [&](const Var& a, const Var& b, const Var& c) {
                      return sparse_landmark_attention(a, b, c, L, opts(K, gates));
                    });
    Grads twin = run(q, k, v, g, [&](const Var& a, const Var& b, const Var& c) {
      return sparse_landmark_reference(a, b, c, kinds, opts(K, gates), chosen);
    });
    check_close(f32, twin, 2e-6, 1e-5);
  }
}

TEST_CASE("sparse attention: f64 gradcheck, both gate variants, random layouts", "[sparse][gradcheck]") {
  manual_seed(304);
  const int64_t T = 16;
  for (uint64_t seed : {31u, 32u})
    for (SparseGates gates : {SparseGates::Chosen, SparseGates::All})
      for (int64_t K : {1, 2}) {
        INFO("layout seed " << seed << ", gates " << sparse_gates_name(gates) << ", K " << K);
        LandmarkLayout L = make_layout(kinds_of({random_kinds_row(T, 3, seed)}));
        GradcheckResult r = gradcheck(
            [&](const std::vector<Var>& x) { return sparse_landmark_attention(x[0], x[1], x[2], L, opts(K, gates)); },
            {randn({1, 2, T, 4}, DType::F64), randn({1, 2, T, 4}, DType::F64), randn({1, 2, T, 4}, DType::F64)});
        INFO(r.summary());
        CHECK(r.ok);
      }
}

TEST_CASE("sparse attention: the chosen blocks equal a selection by full sort, ties to the older block", "[sparse]") {
  manual_seed(305);
  const int64_t NH = 2, T = 40, HS = 4, K = 3;
  std::vector<int32_t> row = random_kinds_row(T, 4, 41);
  LandmarkLayout L = make_layout(kinds_of({row}));
  std::vector<int64_t> lm;
  for (int64_t t = 0; t < T; ++t)
    if (row[t] == kLandmark) lm.push_back(t);
  Tensor q = randn({1, NH, T, HS}, DType::F64), k = randn({1, NH, T, HS}, DType::F64);
  // Ties: landmarks 1 and 3 get the key of landmark 0 in head 0, so three blocks tie there.
  std::vector<double> kv = k.to_double_vector();
  for (int64_t e = 0; e < HS; ++e) kv[lm[1] * HS + e] = kv[lm[3] * HS + e] = kv[lm[0] * HS + e];
  k = from_vector(kv, k.shape());
  const std::vector<int32_t> got = sparse_landmark_choice(q, k, L, K).to_vector<int32_t>();
  const std::vector<double> qv = q.to_double_vector();
  int64_t ties_seen = 0;
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t i = 0; i < T; ++i) {
      int64_t b = 0;  // earlier blocks: landmarks before i
      while (b < static_cast<int64_t>(lm.size()) && lm[b] < i) ++b;
      std::vector<std::pair<double, int32_t>> s;  // (-score, block): sorting puts ties older first
      for (int64_t g = 0; g < b; ++g) {
        double d = 0;
        for (int64_t e = 0; e < HS; ++e) d += qv[(h * T + i) * HS + e] * kv[(h * T + lm[g]) * HS + e];
        s.push_back({-d, static_cast<int32_t>(g)});
      }
      std::sort(s.begin(), s.end());
      std::vector<int32_t> want;
      for (int64_t c = 0; c < std::min<int64_t>(K, b); ++c) want.push_back(s[c].second);
      std::sort(want.begin(), want.end());
      want.resize(K, -1);
      std::vector<int32_t> row_got(got.begin() + (h * T + i) * K, got.begin() + (h * T + i + 1) * K);
      INFO("head " << h << ", row " << i);
      CHECK(row_got == want);
      if (h == 0 && b > 3) ++ties_seen;
    }
  CHECK(ties_seen > 0);  // the tie case was exercised
}

TEST_CASE("sparse attention: under All the left-out share is the dense row's mass on the dropped blocks", "[sparse]") {
  // All keeps every landmark in the top group, so P'[lm_g] is the dense op's and the dense row puts
  // exactly that mass on block g's tokens; the sparse op's M_i must equal the dense weights summed
  // over the blocks it left out (f64, 1e-12). Under Chosen M is 0.
  manual_seed(306);
  const int64_t NH = 2, T = 50, HS = 4, K = 2;
  std::vector<int32_t> row = random_kinds_row(T, 5, 61);
  Tensor kinds = kinds_of({row});
  LandmarkLayout L = make_layout(kinds);
  Tensor q = randn({1, NH, T, HS}, DType::F64), k = randn({1, NH, T, HS}, DType::F64);
  Tensor m_all, m_chosen;
  {
    NoGradGuard ng;
    sparse_landmark_attention(Var(q), Var(k), Var(k), L, opts(K, SparseGates::All), &m_all);
    sparse_landmark_attention(Var(q), Var(k), Var(k), L, opts(K, SparseGates::Chosen), &m_chosen);
  }
  const std::vector<double> W = landmark_attention_weights(q, k, L).to_double_vector(), M = m_all.to_double_vector();
  const std::vector<int32_t> ch = sparse_landmark_choice(q, k, L, K).to_vector<int32_t>();
  std::vector<int32_t> block(T, 0);
  for (int64_t t = 0, b = 0; t < T; ++t) {
    block[t] = static_cast<int32_t>(b);
    if (row[t] == kLandmark) ++b;
  }
  double most = 0;
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t i = 0; i < T; ++i) {
      double dropped = 0;
      for (int64_t j = 0; j < i; ++j) {
        const int32_t g = block[j];
        const int32_t* c = ch.data() + (h * T + i) * K;
        if (row[j] == kRegular && g < block[i] && std::find(c, c + K, g) == c + K) dropped += W[(h * T + i) * T + j];
      }
      INFO("head " << h << ", row " << i);
      CHECK(std::abs(M[h * T + i] - dropped) < 1e-12);
      most = std::max(most, dropped);
    }
  CHECK(most > 0.05);  // some row really lost mass
  CHECK(max_abs_diff(m_chosen, zeros({1, NH, T}, DType::F64)) == 0);
}

TEST_CASE("sparse attention: the core's per-layer left-out means", "[sparse]") {
  // Two calls of the core are two layers. Rows counted: regular rows with more than K blocks.
  manual_seed(307);
  const int64_t NH = 1, T = 24, HS = 4, K = 1;
  std::vector<int32_t> row(T, kRegular);
  for (int p : {3, 7, 11, 15, 19}) row[p] = kLandmark;
  LandmarkLayout L = make_layout(kinds_of({row}));
  auto stats = std::make_shared<LeftOutStats>();
  AttentionFn core = sparse_attention_core(L, opts(K, SparseGates::All), stats);
  Tensor q = randn({1, NH, T, HS}, DType::F64), k = randn({1, NH, T, HS}, DType::F64);
  Tensor m;
  {
    NoGradGuard ng;
    core(Var(q), Var(k), Var(k));
    core(Var(k), Var(q), Var(q));
    sparse_landmark_attention(Var(q), Var(k), Var(k), L, opts(K, SparseGates::All), &m);
  }
  REQUIRE(stats->rows.size() == 2);
  // Regular rows with >= 2 earlier blocks: positions 8-10, 12-14, 16-18, 20-23 = 13 rows.
  CHECK(stats->rows[0] == 13);
  const std::vector<double> mv = m.to_double_vector();
  double sum = 0;
  for (int64_t i = 0; i < T; ++i)
    if (row[i] == kRegular && i > 7) sum += mv[i];
  CHECK(std::abs(stats->mean(0) - sum / 13.0) < 1e-15);
  CHECK(stats->mean(1) != stats->mean(0));
}

TEST_CASE("sparse attention: bad options and a CMT are refused with a message", "[sparse]") {
  const int64_t T = 10;
  std::vector<int32_t> row(T, kRegular);
  row[4] = kLandmark;
  LandmarkLayout L = make_layout(kinds_of({row}));
  Tensor q = randn({1, 1, T, 4}, DType::F64);
  CHECK_THROWS_WITH(sparse_landmark_attention(Var(q), Var(q), Var(q), L, opts(0, SparseGates::All)),
                    Catch::Contains("must be >= 1"));
  std::vector<int32_t> cmt_row = row;
  cmt_row[0] = kContextMiss;
  LandmarkLayout Lc = make_layout(kinds_of({cmt_row}));
  CHECK_THROWS_WITH(sparse_landmark_attention(Var(q), Var(q), Var(q), Lc, opts(1, SparseGates::All)),
                    Catch::Contains("does not support --cmt"));
  CHECK_THROWS_WITH(parse_sparse_gates("some"), Catch::Contains("chosen or all"));
  CHECK(parse_sparse_gates("all") == SparseGates::All);
}

TEST_CASE("sparse attention: Appendix A's example with K 1 and equal scores, worked by hand", "[sparse]") {
  // Landmarks at 2, 5, 8; query 10 (block 3: tokens 9, 10); q = 0, so every score is 0 and the
  // three landmarks tie: K 1 takes the oldest, block 0 (tokens 0, 1). With v the identity, the
  // output row is the weight row (docs/train.md section 9 works the same numbers).
  //   chosen: top group {9, 10, lm 2}: 1/3 each; block 0's tokens 1/3 * 1/2 = 1/6 each.
  //   all:    top group {9, 10, lm 2, lm 5, lm 8}: 1/5 each; block 0's tokens 1/10 each;
  //           left out M = 2/5 (landmarks 5 and 8), the row sums to 3/5.
  const int64_t T = 11;
  std::vector<int32_t> row(T, kRegular);
  for (int p : {2, 5, 8}) row[p] = kLandmark;
  LandmarkLayout L = make_layout(kinds_of({row}));
  std::vector<double> eye(T * T, 0.0);
  for (int64_t t = 0; t < T; ++t) eye[t * T + t] = 1.0;
  Tensor q = zeros({1, 1, T, T}, DType::F64), k = randn({1, 1, T, T}, DType::F64), v = from_vector(eye, {1, 1, T, T});
  struct Case {
    SparseGates gates;
    std::vector<double> w;
    double m;
  };
  const double a = 1.0 / 3, b = 1.0 / 6, c = 0.2, d = 0.1;
  for (const Case& cs : {Case{SparseGates::Chosen, {b, b, 0, 0, 0, 0, 0, 0, 0, a, a}, 0.0},
                         Case{SparseGates::All, {d, d, 0, 0, 0, 0, 0, 0, 0, c, c}, 0.4}}) {
    INFO("gates " << sparse_gates_name(cs.gates));
    NoGradGuard ng;
    Tensor m;
    Var y = sparse_landmark_attention(Var(q), Var(k), Var(v), L, opts(1, cs.gates), &m);
    CHECK(max_abs_diff(y.value().narrow(2, 10, 1).contiguous().view({T}), cs.w) < 1e-15);
    CHECK(std::abs(m.to_double_vector()[10] - cs.m) < 1e-15);
  }
}
