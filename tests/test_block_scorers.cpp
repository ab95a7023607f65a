// Beyond the paper: the training-free block scorers (beyond/block_scorers.h) and a standard model
// read in blocks (beyond/standard_blocks.h), each against an answer computed here another way:
// direct f64 loops over the cached keys, a full softmax's block masses, the model's own full
// forward, and layer 0's queries and keys recomputed from the embeddings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "autograd/functions.h"
#include "beyond/block_scorers.h"
#include "infer/cpu_rows.h"
#include "beyond/explorer.h"
#include "beyond/session.h"
#include "beyond/standard_blocks.h"
#include "helpers.h"
#include "infer_fixtures.h"
#include "landmark/retrieval.h"
#include "landmark/tokens.h"
#include "nn/functional.h"
#include "tensor/create.h"
#include "tensor/ops.h"

using namespace lm;
using lm::test::max_abs_diff;

namespace {

std::vector<double> normal_values(int64_t count, uint64_t seed, double sd = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, sd);
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = nd(gen);
  return v;
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// The representatives by hand: token j's attention received from the block's causal queries, on
// average over the F - j of them that see it.
std::vector<int32_t> reps_by_hand(const double* q, const double* k, int64_t F, int64_t HS, double scale, int64_t r) {
  std::vector<double> got(static_cast<size_t>(F), 0.0);
  for (int64_t i = 0; i < F; ++i) {
    std::vector<double> e;
    double z = 0;
    for (int64_t j = 0; j <= i; ++j) e.push_back(std::exp(dot(q + i * HS, k + j * HS, HS) * scale));
    for (double x : e) z += x;
    for (int64_t j = 0; j <= i; ++j) got[static_cast<size_t>(j)] += e[static_cast<size_t>(j)] / z / (F - j);
  }
  std::vector<int32_t> idx(static_cast<size_t>(F));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return got[a] > got[b]; });
  idx.resize(static_cast<size_t>(r));
  return idx;  // any order: the score is a max
}

// The score of block b under scorer s for query q, by direct loops over its keys (head h).
double direct_score(BlockScorer s, const std::vector<double>& keys, const std::vector<double>& queries, int64_t h,
                    int64_t b, const double* q, int64_t NH, int64_t F, int64_t HS, int64_t r) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  const double* k = keys.data() + (b * NH + h) * F * HS;  // block b: (NH, F, HS)
  if (s == BlockScorer::Mean) {
    double v = 0;
    for (int64_t d = 0; d < HS; ++d) {
      double m = 0;
      for (int64_t t = 0; t < F; ++t) m += k[t * HS + d];
      v += q[d] * m / static_cast<double>(F);
    }
    return v * scale;
  }
  if (s == BlockScorer::Quest) {
    double v = 0;
    for (int64_t d = 0; d < HS; ++d) {
      double mn = k[d], mx = k[d];
      for (int64_t t = 0; t < F; ++t) mn = std::min(mn, k[t * HS + d]), mx = std::max(mx, k[t * HS + d]);
      v += std::max(q[d] * mn, q[d] * mx);
    }
    return v * scale;
  }
  if (s == BlockScorer::Reps) {
    const double* qb = queries.data() + (b * NH + h) * F * HS;
    double best = -1e300;
    for (int32_t t : reps_by_hand(qb, k, F, HS, scale, r)) best = std::max(best, dot(q, k + t * HS, HS) * scale);
    return best;
  }
  double z = 0;  // Oracle
  for (int64_t t = 0; t < F; ++t) z += std::exp(dot(q, k + t * HS, HS) * scale);
  return std::log(z);
}

template <class Scalar>
std::vector<Scalar> cast(const std::vector<double>& v) {
  return std::vector<Scalar>(v.begin(), v.end());
}

// Every scorer's scores against direct_score, for blocks [dropped, nb) after dropping the oldest.
template <class Scalar>
void check_scorers(double tol) {
  const int64_t NH = 2, F = 6, HS = 8, nb = 7, n = 3, r = 2;
  const std::vector<double> keys = normal_values(nb * NH * F * HS, 11), queries = normal_values(nb * NH * F * HS, 12),
                            q = normal_values(NH * n * HS, 13, 1.5);
  const std::vector<Scalar> qs = cast<Scalar>(q);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (BlockScorer s : {BlockScorer::Mean, BlockScorer::Quest, BlockScorer::Reps, BlockScorer::Oracle}) {
    BlockSummaries sum(s, NH, F, HS, r, false, dtype_of<Scalar>());
    for (int64_t b = 0; b < nb; ++b) {
      const std::vector<Scalar> kb = cast<Scalar>({keys.begin() + b * NH * F * HS, keys.begin() + (b + 1) * NH * F * HS});
      const std::vector<Scalar> qb =
          cast<Scalar>({queries.begin() + b * NH * F * HS, queries.begin() + (b + 1) * NH * F * HS});
      sum.append<Scalar>(kb.data(), qb.data());
    }
    for (int64_t dropped : {0, 2}) {
      sum.drop_oldest(dropped == 0 ? 0 : 2);
      const int64_t held = nb - dropped;
      REQUIRE(sum.blocks() == held);
      std::vector<Scalar> out(static_cast<size_t>(n * held));
      for (int64_t h = 0; h < NH; ++h) {
        const int64_t rows = score_blocks<Scalar>(sum, s, h, qs.data() + h * n * HS, n, scale, out.data());
        CHECK(rows == held * sum.rows_per_block(s));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t b = 0; b < held; ++b) {
            const double want =
                direct_score(s, keys, queries, h, b + dropped, q.data() + (h * n + i) * HS, NH, F, HS, r);
            INFO(block_scorer_name(s) << " head " << h << " query " << i << " block " << b + dropped);
            CHECK(std::abs(static_cast<double>(out[static_cast<size_t>(i * held + b)]) - want) <=
                  tol * (1 + std::abs(want)));
          }
      }
    }
  }
}

}  // namespace

TEST_CASE("each block scorer equals a direct f64 loop over the cached keys", "[scorers]") {
  // f64: the GEMM's sums in another order than the loop's: rounding at 1e-12. f32: summaries and
  // products in f32 over 8 features of size about 3: 1e-5 relative.
  check_scorers<double>(1e-12);
  check_scorers<float>(1e-5);
  // The representatives by hand, on a block where the answer is clear: keys 0 and 3 are large and
  // aligned with every query. Mean weight received: token 0 0.926 (1, 0.993, 0.987, 0.724 from
  // queries 0-3), token 3 0.266 (query 3 alone), tokens 1 and 2 under 0.01.
  const int64_t F = 4, HS = 2;
  const std::vector<double> k{5, 0, 0, 1, 0, -1, 4, 0}, q{1, 0, 1, 0, 1, 0, 1, 0};
  CHECK(representatives<double>(q.data(), k.data(), F, HS, 1.0, 2) == std::vector<int32_t>{0, 3});
  // Memory per block: mean one row, quest two, reps r rows and their token indices, oracle F rows.
  CHECK(BlockSummaries(BlockScorer::Mean, 2, 6, 8, 4, false, DType::F32).bytes_per_block() == 2 * 8 * 4);
  CHECK(BlockSummaries(BlockScorer::Quest, 2, 6, 8, 4, false, DType::F64).bytes_per_block() == 2 * 2 * 8 * 8);
  CHECK(BlockSummaries(BlockScorer::Reps, 2, 6, 8, 3, false, DType::F32).bytes_per_block() == 2 * 3 * (8 * 4 + 4));
  CHECK(BlockSummaries(BlockScorer::Oracle, 2, 6, 8, 4, false, DType::F32).bytes_per_block() == 2 * 6 * 8 * 4);
  // Keys kept for mass recall beside another scorer's summary are not the scorer's cost.
  CHECK(BlockSummaries(BlockScorer::Mean, 2, 6, 8, 4, true, DType::F32).bytes_per_block() == 2 * 8 * 4);
}

TEST_CASE("the oracle's blocks are the top k of a full attention's block mass", "[scorers]") {
  const int64_t NH = 1, F = 5, HS = 4, nb = 9, nloc = 7, k = 3;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  const std::vector<double> keys = normal_values(nb * F * HS, 21, 1.3), local = normal_values(nloc * HS, 22),
                            q = normal_values(HS, 23, 1.5);
  BlockSummaries sum(BlockScorer::Oracle, NH, F, HS, 1, false, DType::F64);
  for (int64_t b = 0; b < nb; ++b) sum.append<double>(keys.data() + b * F * HS, nullptr);
  // The full attention of q over every cached key and the local keys, then each block's mass.
  std::vector<double> w;
  for (int64_t j = 0; j < nb * F; ++j) w.push_back(std::exp(dot(q.data(), keys.data() + j * HS, HS) * scale));
  for (int64_t j = 0; j < nloc; ++j) w.push_back(std::exp(dot(q.data(), local.data() + j * HS, HS) * scale));
  const double z = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<double> mass(static_cast<size_t>(nb), 0.0);
  for (int64_t j = 0; j < nb * F; ++j) mass[static_cast<size_t>(j / F)] += w[static_cast<size_t>(j)] / z;
  std::vector<int32_t> best(static_cast<size_t>(nb));
  std::iota(best.begin(), best.end(), 0);
  std::stable_sort(best.begin(), best.end(), [&](int32_t a, int32_t b) { return mass[a] > mass[b]; });
  best.resize(k);
  std::sort(best.begin(), best.end());
  std::vector<double> lse(static_cast<size_t>(nb));
  score_blocks<double>(sum, BlockScorer::Oracle, 0, q.data(), 1, scale, lse.data());
  const std::vector<int32_t> chosen = select_blocks<double>(lse.data(), 1, 1, nb, k, Granularity::TokenHead)[0];
  CHECK(chosen == best);
  // Agreement: the oracle's own choice holds its top k's share of the blocks' mass, IoU 1; blocks
  // {b0, x} with x outside the top k share 1 of 3 distinct blocks... counted by hand here.
  const double blocks_mass = std::accumulate(mass.begin(), mass.end(), 0.0);
  OracleAgreement a;
  agree_with_oracle<double>(lse.data(), nb, best, &a);
  CHECK(a.rows == 1);
  CHECK(a.iou_sum == 1.0);
  CHECK(a.recall_sum == Approx((mass[best[0]] + mass[best[1]] + mass[best[2]]) / blocks_mass).epsilon(1e-12));
  std::vector<int32_t> other;  // the best block and the two worst
  std::vector<int32_t> order(static_cast<size_t>(nb));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return mass[x] > mass[y]; });
  other = {order[0], order[nb - 1], order[nb - 2]};
  std::sort(other.begin(), other.end());
  OracleAgreement b;
  agree_with_oracle<double>(lse.data(), nb, other, &b);
  CHECK(b.iou_sum == Approx(1.0 / 5.0));  // 1 shared of 3 + 3 - 1 = 5 distinct
  CHECK(b.recall_sum ==
        Approx((mass[order[0]] + mass[order[nb - 1]] + mass[order[nb - 2]]) / blocks_mass).epsilon(1e-12));
}

namespace {

// A 2-layer standard GPT of the fixtures' shape (d 16, 2 heads, blocks of F 5 for retrieval,
// context 64), matrices scaled by 8 so that attention is peaked and a wrong block shows.
std::unique_ptr<GPT> standard_model(DType dtype) {
  auto m = infer_test::build_model(false, 303, dtype, Device::CPU, false);
  GPTConfig c = m->config();
  c.attention = AttentionKind::Standard;
  manual_seed(303);
  auto s = std::make_unique<GPT>(c);
  for (Var* p : s->parameters())
    if (p->dim() == 2) p->value().copy_(mul(p->value(), 8.0));
  s->to(dtype);
  return s;
}

std::vector<int32_t> raw_tokens(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> raw(static_cast<size_t>(n));
  for (int32_t& t : raw) t = static_cast<int32_t>(gen() % 40);
  return raw;
}

}  // namespace

TEST_CASE("a standard model read in blocks with k at least the cached blocks equals its full forward", "[scorers]") {
  auto model = standard_model(DType::F64);
  const std::vector<int32_t> raw = raw_tokens(47, 5);
  NoGradGuard ng;
  const Tensor full = model->forward(from_vector(raw, {1, 47})).value().squeeze(0);  // positions 0..46
  for (BlockScorer s : {BlockScorer::Mean, BlockScorer::Quest, BlockScorer::Reps, BlockScorer::Oracle})
    for (Granularity g : {Granularity::TokenHead, Granularity::Token, Granularity::Head}) {
      BeyondConfig cfg;
      cfg.scorer = s;
      cfg.reps = 2;
      cfg.granularity = g;
      cfg.positions = PositionMode::Exact;
      cfg.chunk_len = 9;  // not a multiple of F: blocks straddle chunks, the tail carries over
      cfg.k = 100;
      BeyondSession sess(*model, cfg, -1);
      const Tensor got = sess.feed(raw);
      INFO(block_scorer_name(s) << ", " << granularity_name(g));
      CHECK(sess.cached_blocks() == 47 / 5);
      // f64 throughout; the rows' sums run in another order than the forward's: 1e-9.
      CHECK(max_abs_diff(got, full) < 1e-9);
      // One block per row instead: the rows miss most of the text, so the logits move (the
      // comparison above can fail).
      cfg.k = 1;
      BeyondSession one(*model, cfg, -1);
      CHECK(max_abs_diff(one.feed(raw), full) > 1e-3);
    }
}

namespace {

// Layer 0's rotated queries and keys of a stream (its tokens at positions 0..N-1) recomputed from
// the embeddings: (NH, N, HS) each.
void layer0_qk(const GPT& m, const std::vector<int32_t>& toks, Tensor* q, Tensor* k) {
  const int64_t N = static_cast<int64_t>(toks.size()), C = m.config().n_embd, NH = m.config().n_head, HS = C / NH;
  const Block& blk = *m.blocks[0];
  const Tensor qkv = blk.attn.qkv.forward(blk.ln1.forward(m.wte.forward(from_vector(toks, {1, N})))).value();
  const RotaryTables rt = rotary_tables(N, HS, m.config().rotary_base, DType::F64, Device::CPU);
  auto heads = [&](int64_t part) {
    const Tensor x = qkv.narrow(2, part * C, C).reshape({1, N, NH, HS}).transpose(1, 2);
    return rotary(x.contiguous(), rt).squeeze(0).contiguous();
  };
  *q = heads(0);
  *k = heads(1);
}

// Layer 0's retrieval by mean, reps or oracle at exact positions, computed directly: a query at stream
// position p of a chunk starting at `start` chooses among the blocks finished before the chunk,
// block b being the F tokens at b * B + t (B = F for a standard model, F + 1 with landmarks).
// Returns, per trace step of layer 0, the expected sel.
void check_layer0_choice(const GPT& m, const std::vector<int32_t>& toks, const RetrievalTrace& trace, BlockScorer s,
                         int64_t F, int64_t B, int64_t k) {
  Tensor q, kk;
  layer0_qk(m, toks, &q, &kk);
  const int64_t NH = q.size(0), N = q.size(1), HS = q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  const double* pq = q.data<double>();
  const double* pk = kk.data<double>();
  int64_t steps = 0;
  for (const RetrievalTrace::Step& st : trace.steps) {
    if (st.layer != 0) continue;
    ++steps;
    const int64_t nb = st.cached;
    REQUIRE(st.first_gid == 0);
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < st.n; ++i) {
        const int64_t p = st.aug_start + i;
        REQUIRE(p < N);
        std::vector<double> score(static_cast<size_t>(nb));
        for (int64_t b = 0; b < nb; ++b) {
          std::vector<double> dots;
          for (int64_t t = 0; t < F; ++t)
            dots.push_back(dot(pq + (h * N + p) * HS, pk + (h * N + b * B + t) * HS, HS) * scale);
          double v = 0;
          if (s == BlockScorer::Mean) {
            for (double d : dots) v += d / static_cast<double>(F);  // q . mean(k) = mean(q . k)
          } else if (s == BlockScorer::Reps) {
            // The block's own queries and keys, rotated at its true positions, pick the 2 most
            // attended tokens (reps_by_hand); the score is the best of q . k over them.
            std::vector<double> qb, kb;
            for (int64_t t = 0; t < F; ++t) {
              qb.insert(qb.end(), pq + (h * N + b * B + t) * HS, pq + (h * N + b * B + t + 1) * HS);
              kb.insert(kb.end(), pk + (h * N + b * B + t) * HS, pk + (h * N + b * B + t + 1) * HS);
            }
            v = -1e300;
            for (int32_t t : reps_by_hand(qb.data(), kb.data(), F, HS, scale, 2)) v = std::max(v, dots[t]);
          } else {
            for (double d : dots) v += std::exp(d);
            v = std::log(v);
          }
          score[static_cast<size_t>(b)] = v;
        }
        const std::vector<int32_t> want =
            nb ? select_blocks<double>(score.data(), 1, 1, nb, k, Granularity::TokenHead)[0] : std::vector<int32_t>{};
        INFO(block_scorer_name(s) << " head " << h << " position " << p);
        const size_t row = static_cast<size_t>(h * st.n + i);
        CHECK(st.sel[row] == want);
        // The scores themselves (a detailed trace), so a summary that differs without changing the
        // choice shows too: f64, the GEMM's sums against the loop's, 1e-9.
        REQUIRE(st.score.size() == st.sel.size());
        for (size_t c = 0; c < st.sel[row].size() && c < want.size(); ++c)
          CHECK(std::abs(st.score[row][c] - score[static_cast<size_t>(want[c])]) < 1e-9);
      }
  }
  CHECK(steps > 3);
}

}  // namespace

TEST_CASE("retrieval by a training-free scorer chooses what a direct computation of layer 0 chooses", "[scorers]") {
  NoGradGuard ng;
  for (BlockScorer s : {BlockScorer::Mean, BlockScorer::Reps, BlockScorer::Oracle}) {
    INFO(block_scorer_name(s));
    BeyondConfig cfg;
    cfg.scorer = s;
    cfg.reps = 2;
    cfg.positions = PositionMode::Exact;
    cfg.chunk_len = 8;
    cfg.k = 2;
    // A standard model: the stream is the raw text.
    auto std_model = standard_model(DType::F64);
    const std::vector<int32_t> raw = raw_tokens(50, 9);
    RetrievalTrace tr;
    tr.detail = true;
    BeyondSession a(*std_model, cfg, -1);
    a.set_trace(&tr);
    a.feed(raw);
    check_layer0_choice(*std_model, raw, tr, s, 5, 5, cfg.k);
    // A landmark model: the stream has a landmark after every F tokens; blocks are F + 1 apart.
    auto lm_model = infer_test::make_model(DType::F64);
    std::vector<int32_t> aug;
    LandmarkInserter ins(5, infer_test::kLandmarkId);
    ins.push(raw, aug);
    RetrievalTrace tl;
    tl.detail = true;
    BeyondSession b(*lm_model, cfg, infer_test::kLandmarkId);
    b.set_trace(&tl);
    b.feed(raw);
    check_layer0_choice(*lm_model, aug, tl, s, 5, 6, cfg.k);
  }
}

TEST_CASE("a landmark model retrieving every block reads the same whatever its scorer", "[scorers]") {
  auto model = infer_test::make_model(DType::F32);
  const std::vector<int32_t> raw = raw_tokens(60, 4);
  BeyondConfig cfg;
  cfg.k = 100;
  cfg.chunk_len = 11;
  const Tensor base = BeyondSession(*model, cfg, infer_test::kLandmarkId).feed(raw);
  for (BlockScorer s : {BlockScorer::Mean, BlockScorer::Quest, BlockScorer::Reps, BlockScorer::Oracle}) {
    cfg.scorer = s;
    // Every cached block is chosen, in the same order and places: the very same rows, bit for bit.
    CHECK(max_abs_diff(BeyondSession(*model, cfg, infer_test::kLandmarkId).feed(raw), base) == 0.0);
  }
}

TEST_CASE("block scorers refuse what they cannot do, naming the flag", "[scorers]") {
  auto model = standard_model(DType::F32);
  BeyondConfig cfg;
  cfg.k = 2;
  cfg.chunk_len = 10;
  // No landmark keys in a standard model.
  CHECK_THROWS_WITH(StandardBlockSession(*model, cfg), Catch::Contains("--scorer landmark"));
  // The oracle is dense: past its limit before anything is read.
  cfg.scorer = BlockScorer::Oracle;
  BeyondSession s(*model, cfg, -1);
  CHECK_THROWS_WITH(s.feed(std::vector<int32_t>(kOracleMaxTokens + 1, 3)), Catch::Contains("--scorer oracle"));
  CHECK(s.tokens_fed() == 0);
  // Stingy slots past the model's context (k F + F - 1 + chunk: 64 fits, 69 does not), and exact
  // positions past it.
  cfg.scorer = BlockScorer::Mean;
  cfg.k = 10;
  CHECK_NOTHROW(BeyondSession(*model, cfg, -1));
  cfg.k = 11;
  CHECK_THROWS_WITH(BeyondSession(*model, cfg, -1), Catch::Contains("--k or --chunk"));
  cfg.k = 2;
  cfg.positions = PositionMode::Exact;
  BeyondSession e(*model, cfg, -1);
  CHECK_THROWS_WITH(e.feed(raw_tokens(65, 1)), Catch::Contains("--positions"));
  // The indexed searches serve landmark keys only.
  cfg.search = KeySearch::Bounded;
  CHECK_THROWS_WITH(cfg.validate(), Catch::Contains("--search scan"));
}

TEST_CASE("a standard model's detailed trace gives each row's scores and masses for the explorer", "[scorers]") {
  auto model = standard_model(DType::F64);
  const std::vector<int32_t> raw = raw_tokens(44, 8);
  BeyondConfig cfg;
  cfg.scorer = BlockScorer::Quest;
  cfg.chunk_len = 9;
  cfg.k = 2;
  BeyondSession s(*model, cfg, -1);
  RetrievalTrace tr;
  tr.detail = true;
  s.set_trace(&tr);
  s.feed(raw);
  int64_t rows = 0;
  for (const RetrievalTrace::Step& st : tr.steps) {
    REQUIRE(st.score.size() == st.sel.size());
    REQUIRE(st.mass.size() == st.sel.size());
    for (size_t r = 0; r < st.sel.size(); ++r) {
      CHECK(st.score[r].size() == st.sel[r].size());
      REQUIRE(st.mass[r].size() == st.sel[r].size() + 2);  // each block, the tail, the chunk
      // The weights of one softmax: they sum to 1 (f64 rounding).
      CHECK(std::abs(std::accumulate(st.mass[r].begin(), st.mass[r].end(), 0.0) - 1.0) < 1e-12);
      ++rows;
    }
  }
  CHECK(rows == 44 * 2 * 2);  // every token, layer and head
  // The explorer reads it: every (token, layer, head) row is there.
  const ExploreData d = explore_tokens(*model, cfg, raw, -1, -1, 3);
  CHECK(d.rows() == 44 * 2 * 2);
  CHECK(d.max_blocks == 2);
}
