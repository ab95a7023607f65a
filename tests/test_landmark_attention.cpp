// test_landmark_attention.cpp: the grouped softmax and fused landmark attention against the
// paper's worked example, an explicit per-query loop, the composed reference, finite
// differences, and the invariances the definition implies.
#include "tests/helpers.h"

#include <functional>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "landmark/attention.h"
#include "landmark/grouped_softmax.h"
#include "nn/functional.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::test;

namespace {
// Kinds for one row: landmarks at the given positions, an optional CMT at 0, controlled
// landmarks where listed.
std::vector<int32_t> kinds_row(int64_t T, std::vector<int> landmarks, bool cmt = false, std::vector<int> controlled = {}) {
  std::vector<int32_t> k(T, kRegular);
  for (int p : landmarks) k[p] = kLandmark;
  for (int p : controlled) k[p] = kControlledLandmark;
  if (cmt) k[0] = kContextMiss;
  return k;
}
Tensor kinds_tensor(const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> all;
  for (auto& r : rows) all.insert(all.end(), r.begin(), r.end());
  return from_vector(all, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

// The weights of row i written straight from the paper's AttWeight (Section 3.1, Appendix D), one query at a time.
std::vector<double> weights_by_definition(const std::vector<int32_t>& kind, const std::vector<double>& s, int64_t i) {
  const int64_t T = static_cast<int64_t>(kind.size());
  std::vector<double> w(T, 0.0);
  if (kind[i] == kContextMiss) return w;
  auto is_lm = [&](int64_t j) { return kind[j] == kLandmark || kind[j] == kControlledLandmark; };
  // blocks: [start, landmark]; find i's block start and the closed blocks before it
  std::vector<std::pair<int64_t, int64_t>> blocks;  // (first regular, landmark position)
  int64_t start = kind[0] == kContextMiss ? 1 : 0, own_start = start;
  for (int64_t j = start; j < T; ++j)
    if (is_lm(j)) {
      if (j < i || (j == i)) {
        if (j < i) blocks.push_back({start, j});
      }
      if (j >= i) break;
      start = j + 1;
      own_start = start;
    }
  if (is_lm(i)) {  // i is its own block's landmark: its block started after the previous landmark
    own_start = blocks.empty() ? (kind[0] == kContextMiss ? 1 : 0) : blocks.back().second + 1;
  }
  const bool has_cmt = kind[0] == kContextMiss;
  // top group
  std::vector<int64_t> top;
  for (int64_t j = own_start; j <= i; ++j)
    if (kind[j] == kRegular) top.push_back(j);
  for (auto& bl : blocks)
    if (kind[bl.second] == kLandmark) top.push_back(bl.second);
  if (has_cmt) top.push_back(0);
  auto softmax_over = [&](const std::vector<int64_t>& idx) {
    double m = -INFINITY, z = 0;
    for (int64_t j : idx) m = std::max(m, s[j]);
    for (int64_t j : idx) z += std::exp(s[j] - m);
    std::vector<double> p(T, 0.0);
    for (int64_t j : idx) p[j] = std::exp(s[j] - m) / z;
    return p;
  };
  std::vector<double> pt = softmax_over(top);
  std::vector<int64_t> ctrl;
  for (auto& bl : blocks)
    if (kind[bl.second] == kControlledLandmark) ctrl.push_back(bl.second);
  std::vector<double> pc = softmax_over(ctrl);
  for (int64_t j = own_start; j <= i; ++j)
    if (kind[j] == kRegular) w[j] = pt[j];
  for (auto& bl : blocks) {
    std::vector<int64_t> members;
    for (int64_t j = bl.first; j < bl.second; ++j) members.push_back(j);
    std::vector<double> pg = softmax_over(members);
    double gate = kind[bl.second] == kLandmark ? pt[bl.second] : pt[0] * pc[bl.second];
    for (int64_t j : members) w[j] = gate * pg[j];
  }
  return w;
}
}  // namespace

TEST_CASE("landmark attention: Appendix A's worked example (landmarks 2, 5, 8, query 6, equal scores)", "[landmark]") {
  const int64_t T = 9, HS = 4;
  Tensor kinds = kinds_tensor({kinds_row(T, {2, 5, 8})});
  // Every key is the same vector, so every score of every query is equal.
  Tensor q = randn({1, 1, T, HS}, DType::F64), k = ones({1, 1, T, HS}, DType::F64);
  Tensor W = landmark_attention_weights(q, k, make_layout(kinds));
  // Query 6 (block 2): top group {6, landmark 2, landmark 5} -> 1/3 each; blocks 0 and 1 split
  // their landmark's third between two tokens -> 1/6 each; landmarks get 0; 7 and 8 are future.
  std::vector<double> row6 = values(W.select(2, 6).flatten());
  std::vector<double> expect = {1.0 / 6, 1.0 / 6, 0, 1.0 / 6, 1.0 / 6, 0, 1.0 / 3, 0, 0};
  for (int j = 0; j < T; ++j) CHECK(std::fabs(row6[j] - expect[j]) < 1e-15);
  // Query 5 is block 1's landmark: its own landmark is ignored; top group = {3, 4, landmark 2}.
  std::vector<double> row5 = values(W.select(2, 5).flatten());
  std::vector<double> expect5 = {1.0 / 6, 1.0 / 6, 0, 1.0 / 3, 1.0 / 3, 0, 0, 0, 0};
  for (int j = 0; j < T; ++j) CHECK(std::fabs(row5[j] - expect5[j]) < 1e-15);
}

TEST_CASE("landmark attention: weights equal an explicit per-query loop, rows sum to 1, landmark columns 0",
          "[landmark]") {
  manual_seed(81);
  const int64_t T = 23, HS = 8, NH = 2;
  std::vector<std::vector<int32_t>> rows = {kinds_row(T, {3, 7, 12, 18}), kinds_row(T, {4, 9, 22}), kinds_row(T, {}),
                                            kinds_row(T, {1, 3, 5, 7, 9})};
  Tensor kinds = kinds_tensor(rows);
  const int64_t B = static_cast<int64_t>(rows.size());
  Tensor q = randn({B, NH, T, HS}, DType::F64), k = randn({B, NH, T, HS}, DType::F64);
  Tensor W = landmark_attention_weights(q, k, make_layout(kinds));
  Tensor S = mul(matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(HS)));
  std::vector<double> wv = values(W), sv = values(S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double* srow = sv.data() + ((b * NH + h) * T + i) * T;
        std::vector<double> expect = weights_by_definition(rows[b], std::vector<double>(srow, srow + T), i);
        double total = 0;
        for (int64_t j = 0; j < T; ++j) {
          const double w = wv[((b * NH + h) * T + i) * T + j];
          CHECK(std::fabs(w - expect[j]) < 1e-14);  // same formula, different operation order
          if (rows[b][j] != kRegular || j > i) CHECK(w == 0.0);  // landmark columns and the future: exactly 0
          total += w;
        }
        CHECK(std::fabs(total - 1.0) < 1e-13);
      }
}

TEST_CASE("landmark attention: no landmarks is causal attention, landmark values do not matter", "[landmark]") {
  manual_seed(82);
  const int64_t B = 2, NH = 2, T = 70, HS = 8;  // 70 rows: two row blocks in the fused kernel
  Tensor q = randn({B, NH, T, HS}, DType::F64), k = randn({B, NH, T, HS}, DType::F64), v = randn({B, NH, T, HS}, DType::F64);
  Tensor plain = kinds_tensor({kinds_row(T, {}), kinds_row(T, {})});
  Tensor y = landmark_attention(Var(q), Var(k), Var(v), make_layout(plain)).value();
  CHECK(max_abs_diff(y, causal_attention(Var(q), Var(k), Var(v)).value()) < 1e-13);
  Tensor kinds = kinds_tensor({kinds_row(T, {10, 21, 32, 43, 54, 65}), kinds_row(T, {5, 50})});
  LandmarkLayout L = make_layout(kinds);
  Tensor y1 = landmark_attention(Var(q), Var(k), Var(v), L).value();
  Tensor v2 = v.clone();
  for (int p : {10, 21, 32, 43, 54, 65}) v2.select(0, 0).narrow(1, p, 1).fill_(1e6);
  for (int p : {5, 50}) v2.select(0, 1).narrow(1, p, 1).fill_(-1e6);
  CHECK(max_abs_diff(landmark_attention(Var(q), Var(k), Var(v2), L).value(), y1) == 0);
}

TEST_CASE("landmark attention: shifting a row's scores, or one earlier block's regular scores, changes nothing",
          "[landmark]") {
  manual_seed(83);
  const int64_t T = 30, HS = 8;
  Tensor kinds = kinds_tensor({kinds_row(T, {5, 11, 17, 23})});
  LandmarkLayout L = make_layout(kinds);
  // Feature 0 of every key is 1 and feature 1 of every query is 1, so adding c to q_i[0] shifts
  // row i by c/sqrt(HS), and adding c to k_j[1] shifts column j by c/sqrt(HS) for every row.
  Tensor q = randn({1, 1, T, HS}, DType::F64), k = randn({1, 1, T, HS}, DType::F64), v = randn({1, 1, T, HS}, DType::F64);
  k.narrow(3, 0, 1).fill_(1.0);
  k.narrow(3, 1, 1).fill_(0.0);  // so that setting k_j[1] = c below adds c
  q.narrow(3, 1, 1).fill_(1.0);
  Tensor y = landmark_attention(Var(q), Var(k), Var(v), L).value();
  Tensor q2 = q.clone();
  q2.narrow(2, 20, 1).narrow(3, 0, 1).fill_(7.0);  // row 20 shifted as a whole
  CHECK(max_abs_diff(landmark_attention(Var(q2), Var(k), Var(v), L).value(), y) < 1e-14);
  Tensor k2 = k.clone();
  k2.narrow(2, 6, 5).narrow(3, 1, 1).fill_(5.0);  // block 1's regular tokens (6..10), not its landmark 11
  Tensor y2 = landmark_attention(Var(q), Var(k2), Var(v), L).value();
  CHECK(max_abs_diff(y2.narrow(2, 12, T - 12), y.narrow(2, 12, T - 12)) < 1e-14);  // every query after block 1
  CHECK(max_abs_diff(y2.narrow(2, 6, 5), y.narrow(2, 6, 5)) > 1e-6);                // its own queries do change
}

TEST_CASE("landmark attention: fused equals the composed reference, forward and backward (with CMT)", "[landmark]") {
  manual_seed(84);
  const int64_t T = 17, HS = 4, NH = 2;
  std::vector<std::vector<int32_t>> rows = {kinds_row(T, {3, 8, 12}), kinds_row(T, {5, 16}),
                                            kinds_row(T, {4, 8, 12}, true, {8}), kinds_row(T, {}, true, {3, 6, 10})};
  Tensor kinds = kinds_tensor(rows);
  const int64_t B = 4;
  Tensor qv = randn({B, NH, T, HS}, DType::F64), kv = randn({B, NH, T, HS}, DType::F64), vv = randn({B, NH, T, HS}, DType::F64);
  Tensor g = randn({B, NH, T, HS}, DType::F64);
  Var q1(qv, true), k1(kv, true), v1(vv, true), q2(qv, true), k2(kv, true), v2(vv, true);
  Var y1 = landmark_attention(q1, k1, v1, make_layout(kinds)), y2 = landmark_attention_reference(q2, k2, v2, kinds);
  CHECK(max_abs_diff(y1.value(), y2.value()) < 1e-13);
  y1.backward(g);
  y2.backward(g);
  CHECK(max_abs_diff(q1.grad(), q2.grad()) < 1e-12);
  CHECK(max_abs_diff(k1.grad(), k2.grad()) < 1e-12);
  CHECK(max_abs_diff(v1.grad(), v2.grad()) < 1e-12);
}

TEST_CASE("landmark attention: the fused op in f32 equals the f64 reference, forward and backward", "[landmark]") {
  // The composed reference in f64 is the answer; the fused kernel runs in f32 on the same inputs
  // rounded to f32. T 70 spans two row blocks of the kernel; one row has a CMT with controlled
  // landmarks.
  manual_seed(88);
  const int64_t B = 2, NH = 2, T = 70, HS = 8;
  Tensor kinds = kinds_tensor({kinds_row(T, {10, 21, 32, 43, 54, 65}), kinds_row(T, {12, 30, 47}, true, {12, 47})});
  Tensor q64 = randn({B, NH, T, HS}, DType::F64), k64 = randn({B, NH, T, HS}, DType::F64), v64 = randn({B, NH, T, HS}, DType::F64);
  Tensor g64 = randn({B, NH, T, HS}, DType::F64);
  // Round the inputs to f32 first, so both sides see the same numbers.
  q64 = q64.to(DType::F32).to(DType::F64);
  k64 = k64.to(DType::F32).to(DType::F64);
  v64 = v64.to(DType::F32).to(DType::F64);
  g64 = g64.to(DType::F32).to(DType::F64);
  Var q1(q64.to(DType::F32), true), k1(k64.to(DType::F32), true), v1(v64.to(DType::F32), true);
  Var q2(q64, true), k2(k64, true), v2(v64, true);
  Var y1 = landmark_attention(q1, k1, v1, make_layout(kinds)), y2 = landmark_attention_reference(q2, k2, v2, kinds);
  // Outputs and gradients are O(1) sums of up to 70 terms: f32 keeps ~1e-7 relative per step.
  CHECK(max_abs_diff(y1.value(), y2.value()) < 2e-6);
  y1.backward(g64.to(DType::F32));
  y2.backward(g64);
  CHECK(max_abs_diff(q1.grad(), q2.grad()) < 1e-5);
  CHECK(max_abs_diff(k1.grad(), k2.grad()) < 1e-5);
  CHECK(max_abs_diff(v1.grad(), v2.grad()) < 1e-5);
}

TEST_CASE("landmark attention: the CMT drop rate on a hand-worked case (equal scores)", "[landmark]") {
  // q = 0: every score is 0, so S(CMT) = 1 / (size of the query's top group). Kinds:
  //   0 CMT | 1 r, 2 r, 3 controlled landmark | 4 r, 5 r, 6 r
  // top groups: q1 {1, C}: 1/2; q2 {1, 2, C}: 1/3; q3 (a landmark: its own block without itself)
  // {1, 2, C}: 1/3; q4 {4, C} (landmark 3 is controlled, not in the top group): 1/2; q5: 1/3; q6: 1/4.
  const int64_t T = 7, NH = 2;
  Tensor kinds = kinds_tensor({kinds_row(T, {}, true, {3})});
  Tensor q = zeros({1, NH, T, 4}, DType::F64), k = randn({1, NH, T, 4}, DType::F64);
  struct Case {
    double cutoff;
    int64_t dropped;  // of the 6 queries, per head
  };
  for (Case c : {Case{0.0, 0}, Case{0.3, 1}, Case{0.34, 4}, Case{0.5, 4}, Case{0.51, 6}}) {
    INFO("cutoff " << c.cutoff);
    LandmarkLayout L = make_layout(kinds);
    L.cmt_cutoff = c.cutoff;
    L.cmt_stats = std::make_shared<CmtStats>();
    NoGradGuard ng;
    landmark_attention(Var(q), Var(k), Var(k), L);
    CHECK(L.cmt_stats->rows == NH * 6);
    CHECK(L.cmt_stats->dropped == NH * c.dropped);
    CHECK(L.cmt_stats->drop_rate() == static_cast<double>(c.dropped) / 6.0);
  }
}

TEST_CASE("landmark attention: f64 gradcheck of the fused op, plain and with the CMT", "[landmark][gradcheck]") {
  manual_seed(85);
  for (bool cmt : {false, true}) {
    INFO("cmt " << cmt);
    const int64_t T = 12;
    Tensor kinds = cmt ? kinds_tensor({kinds_row(T, {4, 7, 10}, true, {7})}) : kinds_tensor({kinds_row(T, {3, 6, 9})});
    LandmarkLayout L = make_layout(kinds);
    GradcheckResult r = gradcheck([&](const std::vector<Var>& x) { return landmark_attention(x[0], x[1], x[2], L); },
                                  {randn({1, 2, T, 4}, DType::F64), randn({1, 2, T, 4}, DType::F64), randn({1, 2, T, 4}, DType::F64)});
    INFO(r.summary());
    CHECK(r.ok);
  }
}

TEST_CASE("landmark attention: CMT rows sum as Appendix D says", "[landmark]") {
  manual_seed(86);
  const int64_t T = 16, HS = 4;
  // Row 0: a controlled landmark at 5 is visible from queries after it: rows sum to 1. Row 1: a
  // CMT but only free landmarks: the CMT's top-group share has nowhere to go (sum = 1 - P_cmt).
  Tensor kinds = kinds_tensor({kinds_row(T, {10}, true, {5}), kinds_row(T, {5, 10}, true)});
  Tensor q = randn({2, 1, T, HS}, DType::F64), k = randn({2, 1, T, HS}, DType::F64);
  Tensor W = landmark_attention_weights(q, k, make_layout(kinds));
  Tensor sums = sum(W, -1);
  std::vector<double> s0 = values(sums.select(0, 0).flatten()), s1 = values(sums.select(0, 1).flatten());
  CHECK(s0[0] == 0.0);  // the CMT query attends to nothing
  for (int64_t i = 6; i < T; ++i) CHECK(std::fabs(s0[i] - 1.0) < 1e-14);
  for (int64_t i = 1; i < T; ++i) CHECK(s1[i] < 1.0 - 1e-6);
  CHECK(max_abs_diff(sum(W.select(3, 0)), {0.0}) == 0);  // the CMT column itself gets weight 0
}

TEST_CASE("landmark layout rejects windows that start with a landmark, misplaced CMTs, unknown kinds", "[landmark]") {
  CHECK_THROWS_WITH(make_layout(kinds_tensor({kinds_row(6, {0, 3})})), Catch::Contains("no regular token"));
  CHECK_THROWS_WITH(make_layout(from_vector(std::vector<int32_t>{0, 3, 0, 0}, {1, 4})), Catch::Contains("position 0"));
  CHECK_THROWS_WITH(make_layout(from_vector(std::vector<int32_t>{0, 7, 0, 0}, {1, 4})), Catch::Contains("unknown token kind 7"));
  Tensor q = zeros({1, 1, 5, 4});
  CHECK_THROWS_WITH(landmark_attention(Var(q), Var(q), Var(q), make_layout(kinds_tensor({kinds_row(6, {3})}))),
                    Catch::Contains("layout"));
}

#include "landmark/groups_plot.h"
#include <filesystem>

TEST_CASE("landmark groups picture: categories of Appendix A's example", "[landmark]") {
  const std::string png = (std::filesystem::temp_directory_path() / "lm_test_groups.png").string();
  std::vector<int> cat = plot_groups(kinds_row(9, {2, 5, 8}), png, "test");
  auto at = [&](int i, int j) { return cat[i * 9 + j]; };
  CHECK(at(6, 0) == 5);   // block 0's own softmax
  CHECK(at(6, 2) == 1);   // landmark 2 gates block 0 from the top group
  CHECK(at(6, 3) == 6);   // block 1
  CHECK(at(6, 5) == 1);
  CHECK(at(6, 6) == 0);   // own block, top group
  CHECK(at(6, 7) == -1);  // the future is masked
  CHECK(at(5, 5) == 3);   // a landmark ignores itself
  CHECK(at(5, 3) == 0);   // ... and attends to its own block in the top group
  CHECK(std::filesystem::file_size(png) > 1000);
}

TEST_CASE("landmark attention: the CMT cutoff drops controlled blocks where P(CMT) is small, drop rate", "[landmark]") {
  manual_seed(87);
  const int64_t T = 20, HS = 4, NH = 2;
  // CMT at 0; landmarks at 5 (controlled), 10 (free), 15 (controlled).
  std::vector<int32_t> kr = kinds_row(T, {10}, true, {5, 15});
  Tensor kinds = kinds_tensor({kr});
  Tensor q = randn({1, NH, T, HS}, DType::F64), k = randn({1, NH, T, HS}, DType::F64), v = randn({1, NH, T, HS}, DType::F64);
  std::vector<double> sv = values(mul(matmul(q, k, false, true), 0.5));  // scale 1/sqrt(4)
  for (double cutoff : {0.0, 0.05, 0.2, 1.0}) {
    INFO("cutoff " << cutoff);
    LandmarkLayout L = make_layout(kinds);
    L.cmt_cutoff = cutoff;
    L.cmt_stats = std::make_shared<CmtStats>();
    std::vector<double> w = values(landmark_attention_weights(q, k, L));
    {
      NoGradGuard ng;
      landmark_attention(Var(q), Var(k), Var(v), L);  // fills the statistic
    }
    int64_t dropped = 0;
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 1; i < T; ++i) {
        const double* srow = sv.data() + (h * T + i) * T;
        std::vector<double> expect = weights_by_definition(kr, std::vector<double>(srow, srow + T), i);
        // P(CMT) by definition: its share of the top group (own tokens, free landmarks, the CMT).
        // Blocks: 1..5, 6..10, 11..15, 16..19 (a landmark closes each of the first three).
        const int64_t own_begin = i <= 5 ? 1 : i <= 10 ? 6 : i <= 15 ? 11 : 16;
        double z = std::exp(srow[0]);
        for (int64_t j = own_begin; j <= i; ++j)
          if (kr[j] == kRegular) z += std::exp(srow[j]);
        if (i > 10) z += std::exp(srow[10]);  // the free landmark, from queries after block 1
        const double p_cmt = std::exp(srow[0]) / z;
        const bool drop = p_cmt < cutoff;
        dropped += drop;
        for (int64_t j = 0; j <= i; ++j) {
          const bool controlled_block = (j >= 1 && j <= 4 && i > 5) || (j >= 11 && j <= 14 && i > 15);
          const double e = drop && controlled_block ? 0.0 : expect[j];
          CHECK(std::fabs(w[(h * T + i) * T + j] - e) < 1e-14);
        }
      }
    CHECK(L.cmt_stats->rows == NH * (T - 1));
    CHECK(L.cmt_stats->dropped == dropped);
    if (cutoff == 0.0) CHECK(dropped == 0);
    if (cutoff == 1.0) CHECK(dropped == NH * (T - 1));
  }
}

TEST_CASE("landmark attention: a cutoff of 1 drops even a CMT probability of exactly 1", "[landmark]") {
  // f32, the CMT's score 200 above every other (q = k_cmt = (20, 0, 0, 0), scale 1/2): exp(-200)
  // underflows to 0, so P(CMT) is exactly 1 in every row. "Below the cutoff" would keep those rows
  // at cutoff 1; a cutoff of 1 means no retrieval at all, so gsm::cmt_dropped drops them.
  CHECK(gsm::cmt_dropped(1.0f, 1.0));
  CHECK_FALSE(gsm::cmt_dropped(0.5f, 0.5));
  CHECK(gsm::cmt_dropped(0.49f, 0.5));
  CHECK_FALSE(gsm::cmt_dropped(0.0f, 0.0));
  const int64_t T = 5;
  Tensor kinds = kinds_tensor({kinds_row(T, {}, true, {2})});  // CMT r CL r r
  Tensor q = zeros({1, 1, T, 4}), k = zeros({1, 1, T, 4});
  q.narrow(3, 0, 1).fill_(20.0);
  k.narrow(2, 0, 1).narrow(3, 0, 1).fill_(20.0);
  for (double cutoff : {0.999, 1.0}) {
    INFO("cutoff " << cutoff);
    LandmarkLayout L = make_layout(kinds);
    L.cmt_cutoff = cutoff;
    L.cmt_stats = std::make_shared<CmtStats>();
    NoGradGuard ng;
    landmark_attention(Var(q), Var(k), Var(k), L);
    CHECK(L.cmt_stats->rows == T - 1);
    CHECK(L.cmt_stats->dropped == (cutoff >= 1.0 ? T - 1 : 0));
  }
}

TEST_CASE("landmark attention: the CMT cutoff is evaluation-only", "[landmark]") {
  Tensor kinds = kinds_tensor({kinds_row(8, {3}, true, {3})});
  LandmarkLayout L = make_layout(kinds);
  L.cmt_cutoff = 0.1;
  Var q(zeros({1, 1, 8, 2}, DType::F64), true);
  CHECK_THROWS_WITH(landmark_attention(q, q, q, L), Catch::Contains("evaluation only"));
}
