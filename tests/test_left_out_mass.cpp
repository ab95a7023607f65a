// test_left_out_mass.cpp: beyond the paper. The algebra a retrieval certificate rests on, checked
// on single rows of the grouped softmax (reference::att_weight, the paper's AttWeight).
//
// A query retrieves the blocks S of the cached blocks; the blocks left out, O, are scored but not
// read. With exact positions a block's landmark has the same score whether it is retrieved or not,
// so the row that reads every block differs from the row that reads S only by O's entries. Then:
//   - without a context-miss token every landmark sits in the query's group, and
//       m = sum_{g in O} e^{s_g} / (sum over the query's group in the every-block row of e^{s_j})
//     is the share of the every-block row's weight that falls on O; y_all = (1 - m) y_S + m y_out,
//     where y_out is the mean of O's values under the every-block weights;
//   - with a context-miss token (Appendix D) the landmarks form their own group, gated by the
//     CMT's share S_cmt of the query's group: the mass on O is M = S_cmt * m_c, with m_c the share
//     of O in the landmarks' group, and y_all = y_S + M (y_out - ybar_S), ybar_S the mean of the
//     values the landmarks gate in the S row; a row the cutoff drops has M = 0 and y_all = y_S.
// Either way |y_all - y_S| <= M max_{a,b} |v_a - v_b|: the mass, computable from the scores alone
// (every landmark is scored by the exact scan), bounds the error of leaving O out.
//
// Part 1 compares att_weight's rows with M computed here from the raw scores, by the group sums
// written out above (an independent route to the same number), in f64. Part 2 holds the fast rows'
// certificate (attend_plan with a Certifier attached, beyond/certificate.h) against an every-block run
// of the same rows: M against the mass that run puts on the blocks left out, the identity entry by
// entry of the two runs' RowMass, and the bound against the two outputs.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "beyond/certificate.h"
#include "beyond/config.h"
#include "infer/chunk_attention.h"
#include "infer/reference.h"
#include "landmark/tokens.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "tests/helpers.h"

using namespace lm;
using namespace lm::test;

namespace {

using Vec = std::vector<double>;
using reference::RowKey;

struct Scene {
  int64_t HS = 4, F = 3, blocks = 6, open = 3;  // open: the query's block so far, the query last
  bool cmt = false;
  std::vector<std::vector<RowKey>> cached;  // each cached block: F regular entries, then its landmark
  std::vector<RowKey> local;                // one finished local block (F + landmark), then the open block
  RowKey miss;                              // the context-miss token, when cmt
  Vec q;
};

Vec normal_vec(std::mt19937_64& gen, int64_t n, double scale) {
  std::normal_distribution<double> d(0.0, scale);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = d(gen);
  return v;
}

Scene make_scene(std::mt19937_64& gen, bool cmt) {
  Scene s;
  s.cmt = cmt;
  const int32_t lm_kind = cmt ? kControlledLandmark : kLandmark;
  auto block = [&](double key_scale) {
    std::vector<RowKey> b;
    for (int64_t t = 0; t < s.F; ++t) b.push_back({normal_vec(gen, s.HS, 1.0), normal_vec(gen, s.HS, 1.0), kRegular});
    b.push_back({normal_vec(gen, s.HS, key_scale), normal_vec(gen, s.HS, 1.0), lm_kind});  // its landmark
    return b;
  };
  // Landmark keys of varied size, so that some left-out blocks carry much mass and some little.
  std::uniform_real_distribution<double> scale(0.2, 3.0);
  for (int64_t g = 0; g < s.blocks; ++g) s.cached.push_back(block(scale(gen)));
  s.local = block(1.0);
  for (int64_t t = 0; t < s.open; ++t) s.local.push_back({normal_vec(gen, s.HS, 1.0), normal_vec(gen, s.HS, 1.0), kRegular});
  s.miss = {normal_vec(gen, s.HS, 1.5), Vec(static_cast<size_t>(s.HS), 0.0), kContextMiss};
  s.q = normal_vec(gen, s.HS, 1.5);
  return s;
}

// The row of a query that retrieved `chosen` (ascending): [CMT | chosen blocks | local]; *from,
// when given, receives each entry's cached block (-1 for the CMT and the local entries).
std::vector<RowKey> row_of(const Scene& s, const std::vector<int64_t>& chosen, std::vector<int64_t>* from = nullptr) {
  std::vector<RowKey> row;
  std::vector<int64_t> owner;
  if (s.cmt) {
    row.push_back(s.miss);
    owner.push_back(-1);
  }
  for (int64_t g : chosen)
    for (const RowKey& e : s.cached[g]) {
      row.push_back(e);
      owner.push_back(g);
    }
  for (const RowKey& e : s.local) {
    row.push_back(e);
    owner.push_back(-1);
  }
  if (from) *from = owner;
  return row;
}

double score(const Scene& s, const RowKey& e) {
  double d = 0;
  for (int64_t c = 0; c < s.HS; ++c) d += s.q[c] * e.key[c];
  return d / std::sqrt(static_cast<double>(s.HS));
}

// M from the scores alone, by the group sums of the header comment (every block retrieved).
double left_out_mass(const Scene& s, const std::vector<int64_t>& out, double cutoff) {
  double out_sum = 0, landmarks = 0, open_sum = 0;
  for (int64_t g : out) out_sum += std::exp(score(s, s.cached[g][s.F]));
  for (int64_t g = 0; g < s.blocks; ++g) landmarks += std::exp(score(s, s.cached[g][s.F]));
  landmarks += std::exp(score(s, s.local[s.F]));  // the finished local block's landmark
  for (int64_t t = s.F + 1; t < static_cast<int64_t>(s.local.size()); ++t) open_sum += std::exp(score(s, s.local[t]));
  if (!s.cmt) return out_sum / (landmarks + open_sum);  // one group: the open block's tokens and every landmark
  const double miss = std::exp(score(s, s.miss)), S_cmt = miss / (miss + open_sum);
  if (S_cmt < cutoff || cutoff >= 1) return 0;  // dropped: the landmarks' group gets no weight
  return S_cmt * out_sum / landmarks;
}

Vec weighted(const std::vector<RowKey>& row, const Vec& w, int64_t HS) {
  Vec y(static_cast<size_t>(HS), 0.0);
  for (size_t j = 0; j < row.size(); ++j)
    for (int64_t c = 0; c < HS; ++c) y[c] += w[j] * row[j].value[c];
  return y;
}

double dist(const Vec& a, const Vec& b) {
  double d = 0;
  for (size_t c = 0; c < a.size(); ++c) d += (a[c] - b[c]) * (a[c] - b[c]);
  return std::sqrt(d);
}

// Part 1 of the test case below: the algebra on single rows of reference::att_weight.
void check_rows_of_the_reference() {
  std::mt19937_64 gen(20261202);
  // Tolerance 1e-12: every quantity is a sum of a few dozen f64 terms of size about 1, so rounding
  // is near 1e-15; a wrong group or normaliser moves them by 1e-3 or more.
  const double tol = 1e-12;
  int tight = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool cmt = trial % 2 == 1;
    const Scene s = make_scene(gen, cmt);
    // S: a random subset of the cached blocks (possibly empty or all of them).
    std::vector<int64_t> all, chosen, out;
    for (int64_t g = 0; g < s.blocks; ++g) {
      all.push_back(g);
      (gen() % 2 ? chosen : out).push_back(g);
    }
    const double cutoff = cmt && trial % 4 == 3 ? 0.3 : 0.0;
    std::vector<int64_t> owner;
    const std::vector<RowKey> row_all = row_of(s, all, &owner), row_S = row_of(s, chosen);
    const Vec w_all = reference::att_weight(row_all, s.q, cutoff), w_S = reference::att_weight(row_S, s.q, cutoff);
    const Vec y_all = weighted(row_all, w_all, s.HS), y_S = weighted(row_S, w_S, s.HS);

    // The mass the every-block row gives O, and O's mean value under it.
    double found = 0;
    Vec y_out(static_cast<size_t>(s.HS), 0.0);
    for (size_t j = 0; j < row_all.size(); ++j)
      if (owner[j] >= 0 && std::find(out.begin(), out.end(), owner[j]) != out.end()) {
        found += w_all[j];
        for (int64_t c = 0; c < s.HS; ++c) y_out[c] += w_all[j] * row_all[j].value[c];
      }
    const double M = left_out_mass(s, out, cutoff);
    CHECK(std::abs(found - M) <= tol);
    if (found > 0)
      for (double& v : y_out) v /= found;

    // The identity. Without a CMT: y_all = (1 - m) y_S + m y_out. With one: y_all = y_S +
    // M (y_out - ybar_S), ybar_S the mean of the values the landmarks gate in the S row (entries
    // of S's blocks and of the finished local block, whose weights carry the CMT's factor).
    Vec expect(static_cast<size_t>(s.HS));
    if (!cmt) {
      for (int64_t c = 0; c < s.HS; ++c) expect[c] = (1 - M) * y_S[c] + M * y_out[c];
    } else {
      const int64_t gated_end = 1 + static_cast<int64_t>(chosen.size()) * (s.F + 1) + s.F;  // CMT, S, local block
      double mass = 0;
      Vec ybar(static_cast<size_t>(s.HS), 0.0);
      for (int64_t j = 1; j < gated_end; ++j) {
        mass += w_S[j];
        for (int64_t c = 0; c < s.HS; ++c) ybar[c] += w_S[j] * row_S[j].value[c];
      }
      for (int64_t c = 0; c < s.HS; ++c) expect[c] = y_S[c] + (mass > 0 ? M * (y_out[c] - ybar[c] / mass) : 0.0);
    }
    CHECK(dist(y_all, expect) <= tol);

    // The bound, on every row: |y_all - y_S| <= M times the largest distance between two values.
    double diam = 0;
    for (const RowKey& a : row_all)
      for (const RowKey& b : row_all) diam = std::max(diam, dist(a.value, b.value));
    const double err = dist(y_all, y_S);
    CHECK(err <= M * diam + tol);
    if (M == 0) CHECK(err <= tol);  // nothing left out, or a dropped row: the same output
    tight += err > 0.1 * M * diam;
  }
  CHECK(tight > 0);  // the bound is not vacuous: some rows come within a tenth of it
}

// Part 2: the fast rows (attend_plan under a certificate) against an every-block run of the same
// rows. A cache of nb blocks absorbed at exact positions; the chunk's 6 queries (after a tail of 2)
// retrieve a random subset S of at most 3 blocks (at their true places, as exact positions put
// them), or the top 2 by plan_retrieval; the every-block plan retrieves all nb. RowMass (each
// row's weight per retrieved block, tail and chunk) of the every-block run gives the mass on O
// and lets the identity be read entry by entry: without a CMT every entry of the S row is scaled
// by 1 - M; with one, the local entries keep their weight and S's blocks are scaled by 1 - M / P,
// P their weight in the S row (the CMT's share). The outputs give |y_all - y_S| for the bound.
struct FastCase {
  static constexpr int64_t NH = 2, F = 3, HS = 16, B1 = F + 1, nb = 8, tl = 2, n = 6, L = tl + n;
  RotaryCache rope{HS, 10000.0, DType::F64, Device::CPU};
  LayerCache cache{NH, F, HS, DType::F64, 0, ""};
  std::vector<int32_t> local{kRegular, kRegular, kRegular, kLandmark, kRegular, kRegular, kRegular, kRegular};
  Tensor q, k, v;
  ChunkContext ctx;
  Certifier cert;  // sees the blocks absorbed (their value norms: Vmax of the bound)
  explicit FastCase(bool cmt, double cutoff) {
    std::vector<int32_t> kinds(static_cast<size_t>(nb * B1), kRegular);
    for (int64_t j = F; j < nb * B1; j += B1) kinds[static_cast<size_t>(j)] = kLandmark;
    // Landmark keys scaled up so that their scores spread and some left-out blocks matter.
    Tensor keys = randn({NH, nb * B1, HS}, DType::F64), vals = randn({NH, nb * B1, HS}, DType::F64);
    REQUIRE(cache.absorb(mul(keys, 2.0), vals, kinds, rope, PositionMode::Exact, 0) == nb);
    cert.absorbed(cache, ctx, keys, vals, kinds);  // ctx.layer 0
    if (cmt) cache.cmt_key_rot = randn({NH, HS}, DType::F64);
    q = mul(randn({NH, n, HS}, DType::F64), 1.5);
    k = mul(randn({NH, L, HS}, DType::F64), 1.5);
    v = randn({NH, L, HS}, DType::F64);
    ctx.F = F;
    ctx.positions = PositionMode::Exact;
    ctx.blocks_done = nb;
    ctx.local_kinds = &local;
    ctx.rope = &rope;
    ctx.cmt_cutoff = cutoff;
  }
};

RetrievalPlan exact_plan(const std::vector<std::vector<int32_t>>& sel, int64_t nb, int64_t B1) {
  RetrievalPlan p;
  p.nb = nb;
  p.sel = sel;
  for (const auto& row : sel) {
    p.places.emplace_back();
    for (int32_t b : row) p.places.back().push_back(static_cast<int32_t>(b * B1));  // first_gid 0
  }
  return p;
}

struct FastTally {
  int64_t rows = 0, left_out_rows = 0, tight = 0;
};

void check_fast_rows(bool cmt, double cutoff, bool top_k, std::mt19937_64& gen, FastTally& tally) {
  constexpr int64_t NH = FastCase::NH, n = FastCase::n, nb = FastCase::nb, B1 = FastCase::B1, HS = FastCase::HS;
  FastCase fx(cmt, cutoff);
  std::vector<std::vector<int32_t>> S(static_cast<size_t>(NH * n)), all(S.size());
  for (auto& row : all)
    for (int32_t b = 0; b < nb; ++b) row.push_back(b);
  if (top_k) {
    ChunkContext c = fx.ctx;
    c.k = 2;
    S = plan_retrieval(fx.cache, c, fx.q).sel;
  } else {
    for (auto& row : S)
      for (int32_t b = 0; b < nb; ++b)
        if (gen() % 3 == 0 && row.size() < 3) row.push_back(b);
  }
  const RetrievalPlan plan_S = exact_plan(S, nb, B1), plan_all = exact_plan(all, nb, B1);
  RowMass mass_S, mass_all;
  const HookList hooks{&fx.cert};
  ChunkContext certified = fx.ctx;
  certified.hooks = &hooks;
  const std::vector<double> y_S = values(attend_plan(fx.cache, certified, plan_S, fx.q, fx.k, fx.v, nullptr, &mass_S));
  const RowCertificates cert = fx.cert.last;
  const std::vector<double> y_all = values(attend_plan(fx.cache, fx.ctx, plan_all, fx.q, fx.k, fx.v, nullptr, &mass_all));
  REQUIRE(cert.mass.size() == static_cast<size_t>(NH * n));
  // 1e-12: f64 sums of a few dozen terms of size about 1 (the same tolerance as the twin tests).
  const double tol = 1e-12;
  for (size_t r = 0; r < S.size(); ++r) {
    const std::vector<int32_t>& sel = S[r];
    const double M = cert.mass[r];
    double on_O = 0, P = 0;
    for (int32_t b = 0; b < nb; ++b)
      if (!std::binary_search(sel.begin(), sel.end(), b)) on_O += mass_all[r][static_cast<size_t>(b)];
    for (size_t c = 0; c < sel.size(); ++c) P += mass_S[r][c];
    CHECK(std::abs(M - on_O) <= tol);
    // The identity, entry by entry of RowMass: block sel[c] of the S row is entry c; of the
    // every-block row, entry sel[c]; then the tail and the chunk.
    const size_t kb = sel.size();
    const double local_scale = cmt ? 1.0 : 1.0 - M, block_scale = cmt ? (P > 0 ? 1.0 - M / P : 1.0) : 1.0 - M;
    for (size_t c = 0; c < kb; ++c)
      CHECK(std::abs(mass_all[r][static_cast<size_t>(sel[c])] - block_scale * mass_S[r][c]) <= tol);
    CHECK(std::abs(mass_all[r][nb] - local_scale * mass_S[r][kb]) <= tol);
    CHECK(std::abs(mass_all[r][nb + 1] - local_scale * mass_S[r][kb + 1]) <= tol);
    // The bound on every row.
    double err = 0;
    for (int64_t d = 0; d < HS; ++d) err += std::pow(y_all[r * HS + d] - y_S[r * HS + d], 2);
    err = std::sqrt(err);
    CHECK(err <= cert.bound[r] + tol);
    if (M == 0) CHECK(err <= tol);
    ++tally.rows;
    tally.left_out_rows += M > 0;
    tally.tight += err > 0.1 * cert.bound[r] && M > 0;
  }
}

}  // namespace

TEST_CASE("the left-out gate mass certifies the attention error", "[reference][certificate]") {
  SECTION("single rows of the reference: M from the scores alone, the identity, the bound") {
    check_rows_of_the_reference();
  }
  SECTION("the fast rows: attend_plan's certificate against an every-block run") {
    std::mt19937_64 gen(4711);
    manual_seed(4711);
    FastTally tally;
    for (int trial = 0; trial < 3; ++trial)
      for (bool cmt : {false, true})
        for (double cutoff : {0.0, 0.3})
          for (bool top_k : {false, true}) {
            if (!cmt && cutoff > 0) continue;
            INFO("trial " << trial << (cmt ? ", CMT cutoff " : ", no CMT") << cutoff << (top_k ? ", top 2" : ", random S"));
            check_fast_rows(cmt, cutoff, top_k, gen, tally);
          }
    INFO(tally.rows << " rows, " << tally.left_out_rows << " with a left-out weight, " << tally.tight << " within 10x");
    CHECK(tally.left_out_rows > tally.rows / 2);  // the checks above are not about empty sets
    CHECK(tally.tight > 0);                       // nor is the bound vacuous on every row
  }
  SECTION("refused where it would not be what it says") {
    FastCase fx(false, 0);
    const HookList hooks{&fx.cert};
    const RetrievalPlan plan = exact_plan(std::vector<std::vector<int32_t>>(FastCase::NH * FastCase::n), FastCase::nb,
                                          FastCase::B1);
    ChunkContext stingy = fx.ctx;
    stingy.positions = PositionMode::Stingy;
    stingy.hooks = &hooks;
    CHECK_THROWS_WITH(attend_plan(fx.cache, stingy, plan, fx.q, fx.k, fx.v), Catch::Contains("needs exact positions"));
    BeyondConfig cfg;
    cfg.certify = true;
    CHECK_THROWS_WITH(cfg.validate(), Catch::Contains("--certify needs --positions exact"));
    cfg.positions = PositionMode::Exact;
    CHECK_NOTHROW(cfg.validate());
  }
}
