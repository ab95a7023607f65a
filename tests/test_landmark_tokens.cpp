// test_landmark_tokens.cpp: landmark insertion (one-shot vs chunked), targets, the augmented index
// map, selecting regular positions, and the landmark training windows (train/landmark_batch.cpp).
#include "tests/helpers.h"

#include <set>

#include "landmark/tokens.h"
#include "tensor/rng.h"
#include "train/landmark_batch.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("landmark insertion: one-shot equals chunked with a carried phase, block edges end with a landmark",
          "[landmark][tokens]") {
  const int32_t L = 999;
  std::vector<int32_t> raw(103);
  for (int i = 0; i < 103; ++i) raw[i] = i;
  std::vector<int32_t> once = insert_landmarks(raw, 10, L);
  CHECK(once.size() == 103 + 10);
  CHECK(once[10] == L);  // after raw tokens 0..9
  CHECK(once[21] == L);
  CHECK(once[9] == 9);
  CHECK(once[11] == 10);
  manual_seed(91);
  for (int trial = 0; trial < 20; ++trial) {
    LandmarkInserter ins(10, L);
    std::vector<int32_t> out, kinds;
    size_t at = 0;
    while (at < raw.size()) {
      size_t n = std::min(raw.size() - at, static_cast<size_t>(rand({1}).item() * 25));
      ins.push(std::vector<int32_t>(raw.begin() + at, raw.begin() + at + n), out, &kinds);
      at += n;
    }
    CHECK(out == once);
    CHECK(ins.phase() == 3);  // 103 = 10 * 10 + 3
    for (size_t i = 0; i < out.size(); ++i) CHECK((kinds[i] == kLandmark) == (out[i] == L));
  }
  std::vector<int32_t> edge = insert_landmarks(std::vector<int32_t>(20, 1), 10, L);
  CHECK(edge.back() == L);
  CHECK_THROWS_AS(LandmarkInserter(0, L), Error);
  CHECK_THROWS_AS(LandmarkInserter(10, L, 10), Error);
}

TEST_CASE("landmark targets: next regular token, landmarks carry no loss", "[landmark][tokens]") {
  // tokens:  5  6  L  7  8  L  9   (F = 2)
  std::vector<int32_t> tokens = {5, 6, 99, 7, 8, 99, 9};
  std::vector<int32_t> kinds = {0, 0, 1, 0, 0, 1, 0};
  std::vector<int32_t> y = landmark_targets(tokens, kinds, 10);
  CHECK(y == std::vector<int32_t>{6, 7, kIgnoreIndex, 8, 9, kIgnoreIndex, 10});
}

TEST_CASE("augmented index maps agree with insert_landmarks", "[landmark][tokens]") {
  std::vector<int32_t> raw(200);
  for (int i = 0; i < 200; ++i) raw[i] = i;
  std::vector<int32_t> aug_seq = insert_landmarks(raw, 7, -1);
  AugmentedIndex A{7};
  for (int64_t a = 0; a < static_cast<int64_t>(aug_seq.size()); ++a) {
    CHECK(A.is_landmark(a) == (aug_seq[a] == -1));
    if (!A.is_landmark(a)) CHECK(A.raw_index(a) == aug_seq[a]);
  }
  for (int64_t r = 0; r < 200; ++r) CHECK(aug_seq[A.augmented_index(r)] == r);
}

TEST_CASE("select_regular keeps the rows of regular positions", "[landmark][tokens]") {
  Tensor x = arange(0, 12, 1, DType::F32).reshape({2, 3, 2});
  Tensor kinds = from_vector(std::vector<int32_t>{0, 1, 0, 1, 0, 0}, {2, 3});
  CHECK(values(select_regular(x, kinds)) == std::vector<double>{0, 1, 4, 5, 8, 9, 10, 11});
  CHECK_THROWS_WITH(select_regular(x, from_vector(std::vector<int32_t>{0, 1, 0, 0, 0, 0}, {2, 3})),
                    Catch::Contains("different numbers"));
}

namespace {
// Tokens 0..N-1, so a token's value is its raw index.
TokenFile identity_file(int64_t N, int64_t vocab) {
  std::vector<int32_t> t(N);
  for (int64_t i = 0; i < N; ++i) t[i] = static_cast<int32_t>(i % (vocab - 2));
  return TokenFile::from_tokens(t, vocab);
}
}  // namespace

TEST_CASE("landmark windows: global landmark grid, never starting on a landmark, next-regular targets",
          "[landmark][batch]") {
  const int64_t N = 5000, V = 6002, F = 7, T = 40, B = 16;
  TokenFile data = identity_file(N, V);
  LandmarkDataOptions o;
  o.every = F;
  o.landmark_id = 6000;
  LandmarkBatch b = sample_landmark_batch(data, B, T, o, 5, 0, true);
  std::vector<int32_t> x = b.x.to_vector<int32_t>(), y = b.y.to_vector<int32_t>(), k = b.kinds.to_vector<int32_t>(),
                       p = b.positions.to_vector<int32_t>();
  for (int64_t r = 0; r < B; ++r) {
    CHECK(k[r * T] == kRegular);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = r * T + t;
      CHECK(p[i] == t);  // no jumps by default
      if (k[i] == kLandmark) {
        CHECK(x[i] == 6000);
        CHECK(y[i] == kIgnoreIndex);
        CHECK((x[i - 1] + 1) % F == 0);  // a landmark follows raw token r with (r + 1) % F == 0
      } else {
        const int32_t expect = (x[i] + 1) % static_cast<int32_t>(V - 2);  // next raw token
        CHECK(y[i] == expect);
        const bool closes_block = (x[i] + 1) % F == 0;
        if (t + 1 < T) CHECK((k[i + 1] == kLandmark) == closes_block);
      }
    }
  }
  LandmarkBatch again = sample_landmark_batch(data, B, T, o, 5, 0, true);
  CHECK(values(again.x) == values(b.x));
  CHECK(values(sample_landmark_batch(data, B, T, o, 5, B, true).x) != values(b.x));
  // With document starts (here raw indices 100, 250, 1003, 4000), each window opens at one of
  // them (the token is its raw index), and all four turn up in 16 x 8 rows.
  const std::vector<int64_t> starts{100, 250, 1003, 4000};
  std::set<int32_t> firsts;
  for (uint64_t cursor = 0; cursor < 8 * B; cursor += B) {
    const std::vector<int32_t> xs = sample_landmark_batch(data, B, T, o, 5, cursor, true, &starts).x.to_vector<int32_t>();
    for (int64_t r = 0; r < B; ++r) firsts.insert(xs[r * T]);
  }
  CHECK(firsts == std::set<int32_t>{100, 250, 1003, 4000});
  const std::vector<int64_t> too_late{N - T - 2};
  CHECK_THROWS_WITH(sample_landmark_batch(data, B, T, o, 5, 0, true, &too_late), Catch::Contains("no room"));
}

TEST_CASE("landmark windows: positional jumps stay in 1..p_jump, only after landmarks, off at eval, CMT layout",
          "[landmark][batch]") {
  const int64_t N = 5000, V = 6002, F = 5, T = 60, B = 64;
  TokenFile data = identity_file(N, V);
  LandmarkDataOptions o;
  o.every = F;
  o.landmark_id = 6000;
  o.jump_max = 10;
  o.context_miss = true;
  o.cmt_id = 6001;
  o.cmt_prob = 0.5;
  LandmarkBatch b = sample_landmark_batch(data, B, T, o, 9, 0, true);
  std::vector<int32_t> k = b.kinds.to_vector<int32_t>(), p = b.positions.to_vector<int32_t>(), x = b.x.to_vector<int32_t>();
  int64_t controlled = 0, landmarks = 0, big_jumps = 0, steps_of_1 = 0, steps_of_10 = 0;
  for (int64_t r = 0; r < B; ++r) {
    CHECK(k[r * T] == kContextMiss);
    CHECK(x[r * T] == 6001);
    CHECK(p[r * T] == -1);
    CHECK(p[r * T + 1] == 0);
    for (int64_t t = 2; t < T; ++t) {
      const int64_t i = r * T + t, step = p[i] - p[i - 1];
      if (k[i - 1] == kLandmark || k[i - 1] == kControlledLandmark) {
        CHECK(step >= 1);
        CHECK(step <= 10);
        big_jumps += step > 1;
        steps_of_1 += step == 1;
        steps_of_10 += step == 10;
      } else {
        CHECK(step == 1);
      }
    }
    for (int64_t t = 1; t < T; ++t) {
      landmarks += k[r * T + t] == kLandmark || k[r * T + t] == kControlledLandmark;
      controlled += k[r * T + t] == kControlledLandmark;
    }
  }
  CHECK(big_jumps > 0);
  // Both ends of U{1..10} are drawn: ~700 landmarks, each end with probability 1/10, so ~70 of
  // each (missing one would take a 1-in-10^30 draw).
  CHECK(steps_of_1 > 20);
  CHECK(steps_of_10 > 20);
  // ~700 landmarks, each controlled with probability 1/2: binomial std ~ 0.019 of the fraction.
  CHECK(std::fabs(static_cast<double>(controlled) / static_cast<double>(landmarks) - 0.5) < 0.08);
  LandmarkBatch eval = sample_landmark_batch(data, B, T, o, 9, 0, false);
  std::vector<int32_t> pe = eval.positions.to_vector<int32_t>();
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 1; t < T; ++t) CHECK(pe[r * T + t] == t - 1);
  o.landmark_id = 7000;
  CHECK_THROWS_WITH(sample_landmark_batch(data, B, T, o, 9, 0, true), Catch::Contains("landmark id 7000"));
}
