// test_infer_tools.cpp: what sits on top of the inference session: the full-KV-cache decoder
// (against the model's one-shot forward), sampling (against the softmax it samples from),
// generation (against one-shot greedy decoding), perplexity (against one-shot logits; the
// Transformer-XL reading against windowed perplexity and a per-token loop) and the pass-key prompts.
#include "tests/helpers.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "evals/eval.h"
#include "beyond/full_cache.h"
#include "infer/generate.h"
#include "evals/passkey_eval.h"
#include "infer/session.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "tensor/rng.h"
#include "train/passkey.h"
#include "train/tokenizer.h"
#include "tests/xl_mask.h"

using namespace lm;
using namespace lm::test;

namespace {
std::unique_ptr<GPT> model(const std::string& attention, DType dt) {
  manual_seed(201);
  GPTConfig c;
  c.vocab_size = 33;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 128;
  c.attention = parse_attention_kind(attention);
  c.landmark_every = 4;
  auto m = std::make_unique<GPT>(c);
  for (Var* p : m->parameters())
    if (p->dim() == 2) p->value().copy_(mul(p->value(), 6.0));
  m->to(dt);
  return m;
}
std::vector<int32_t> toks(int64_t n, uint64_t seed) {
  manual_seed(seed);
  return rand({n}, DType::F64, Device::CPU, 0, 32).to(DType::I32).to_vector<int32_t>();
}
}  // namespace

TEST_CASE("full KV cache: token-by-token logits equal the one-shot causal forward", "[infer]") {
  auto m = model("standard", DType::F32);
  std::vector<int32_t> t = toks(40, 1);
  Tensor ref = m->forward(from_vector(t, {1, 40})).value().squeeze(0);
  FullKVCache fc(*m, 40);
  for (int64_t i = 0; i < 40; ++i) {
    Tensor row = fc.step(t[i]);
    CHECK(max_abs_diff(row, ref.select(0, i)) < 1e-4);  // f32, different summation orders
  }
  CHECK(fc.size() == 40);
  CHECK_THROWS_AS(fc.step(1), Error);  // full
}

// The generic step of tensor ops (what a CUDA model runs), here on the CPU: the same logits as
// the one-shot forward and as the hand-written step, within f32 summation-order differences
// (the scores and sums are grouped differently: matmul and softmax against the step's own loops).
TEST_CASE("full KV cache: the tensor-op step equals the one-shot forward and the CPU step", "[infer]") {
  auto m = model("standard", DType::F32);
  std::vector<int32_t> t = toks(40, 1);
  Tensor ref = m->forward(from_vector(t, {1, 40})).value().squeeze(0);
  FullKVCache fc(*m, 40), generic(*m, 40, true);
  CHECK_FALSE(fc.tensor_ops());
  CHECK(generic.tensor_ops());
  CHECK(generic.bytes() == fc.bytes());
  for (int64_t i = 0; i < 40; ++i) {
    Tensor row = generic.step(t[i]), cpu_row = fc.step(t[i]);
    CHECK(max_abs_diff(row, ref.select(0, i)) < 1e-4);
    CHECK(max_abs_diff(row, cpu_row) < 1e-4);
  }
  CHECK_THROWS_AS(generic.step(1), Error);  // full
  // fill_random puts the same numbers in both, so the next step agrees too.
  FullKVCache a(*m, 50), b(*m, 50, true);
  a.fill_random(30, 9);
  b.fill_random(30, 9);
  CHECK(max_abs_diff(a.step(3), b.step(3)) < 1e-4);
  CHECK(b.size() == 31);
}

TEST_CASE("sampling: greedy is argmax, samples follow the softmax, top-k stays in the top k", "[infer]") {
  Tensor logits = from_vector(std::vector<float>{0.0f, 1.0f, 2.0f, -1.0f}, {4});
  SampleOptions greedy;
  CHECK(sample_token(logits, greedy, 0) == 2);
  SampleOptions t1;
  t1.temperature = 1.0;
  std::vector<int64_t> counts(4, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, t1, static_cast<uint64_t>(i))];
  std::vector<double> p = values(softmax(logits.to(DType::F64)));
  for (int v = 0; v < 4; ++v) CHECK(std::fabs(static_cast<double>(counts[v]) / n - p[v]) < 0.015);  // ~5 sigma at n=2e4
  SampleOptions top2 = t1;
  top2.top_k = 2;
  for (int i = 0; i < 2000; ++i) {
    const int32_t s = sample_token(logits, top2, static_cast<uint64_t>(i));
    CHECK((s == 1 || s == 2));
  }
  CHECK(sample_token(logits, t1, 77) == sample_token(logits, t1, 77));  // same seed and counter
}

TEST_CASE("generation through the cache equals one-shot greedy decoding", "[infer]") {
  auto m = model("landmark", DType::F64);
  std::vector<int32_t> prompt = toks(23, 2);
  InferConfig c;
  c.chunk_len = 7;
  c.k = 100;
  c.positions = PositionMode::Exact;
  InferenceSession s(*m, c, 32);
  std::vector<int32_t> out = generate(s, prompt, 12, SampleOptions{});
  std::vector<int32_t> text = prompt;
  for (int32_t tok : out) {
    Tensor logits = one_shot_logits(*m, text, 32);
    CHECK(sample_token(logits.select(0, logits.size(0) - 1), SampleOptions{}, 0) == tok);
    text.push_back(tok);
  }
  CHECK(out.size() == 12);
  CHECK(s.tokens_fed() == 23 + 11);  // the last sampled token is not fed
}

TEST_CASE("perplexity through the cache equals the one-shot loss per window, every position scored", "[infer]") {
  auto m = model("landmark", DType::F64);
  std::vector<int32_t> t = toks(90, 3);
  InferConfig c;
  c.chunk_len = 11;
  c.k = 100;
  c.positions = PositionMode::Exact;
  // 90 tokens: windows of 40 read tokens 0..39 and 40..79 and are scored on 1..40 and 41..80
  // (the last position of a window predicts the first token after it); 9 tokens are left over.
  PerplexityResult r = evaluate_perplexity(*m, t, c, 32, -1, 40);
  CHECK(r.windows == 2);
  CHECK(r.tokens == 2 * 40);
  double total = 0;
  for (int w = 0; w < 2; ++w) {
    std::vector<int32_t> win(t.begin() + w * 40, t.begin() + (w + 1) * 40);
    std::vector<double> lsm = values(log_softmax(one_shot_logits(*m, win, 32)));
    for (int i = 0; i < 40; ++i) total -= lsm[i * 33 + t[w * 40 + i + 1]];
  }
  CHECK(std::fabs(r.nll - total / 80) < 1e-12);
  CHECK(std::fabs(r.perplexity() - std::exp(total / 80)) < 1e-9);
  CHECK(!r.unique_blocks.empty());  // 4 chunks per window: the penultimate one retrieved something
  // Every query retrieves every cached block (k 100), and 5 are cached before the penultimate
  // chunk (below): 5 unique blocks in each layer of each window.
  REQUIRE(r.unique_blocks_layer.size() == r.unique_blocks.size());
  CHECK(r.unique_by_layer() == std::vector<double>{5.0, 5.0});
  // Every block retrieved by every (head, query) (k 100, token-head), worked out by hand. Chunks of
  // 11 raw tokens, blocks of 4: before chunks 2, 3, 4 the cache holds 2, 5, 8 blocks; the chunks
  // have 11 + 3, 11 + 3 and 7 + 2 queries (raw tokens + landmarks). Per window and layer, with 2
  // heads: 2*14*2 + 2*14*5 + 2*9*8 = 340 blocks fetched, 2 + 5 + 8 = 15 unique over 37 queries.
  CHECK(r.retrieval_steps == 2 * 3 * 2);  // windows x chunks with a cache x layers
  CHECK(r.fetched == 4 * 340);
  CHECK(r.unique_per_token() == Approx(15.0 / 37.0).epsilon(1e-15));
  CHECK(r.cmt_rows == 0);
  CHECK(r.drop_rate() == 0);
  // A window of exactly the text but for the last target is refused (one token more is needed).
  CHECK_THROWS_WITH(evaluate_perplexity(*m, std::vector<int32_t>(t.begin(), t.begin() + 40), c, 32, -1, 40),
                    Catch::Contains("plus the token after it"));
  auto s = model("standard", DType::F64);
  CHECK_THROWS_WITH(evaluate_perplexity(*s, t, c, 32, -1, 200), Catch::Contains("block size"));
}

TEST_CASE("unique blocks by layer: a mean per layer, worked by hand", "[infer][eval]") {
  PerplexityResult r;
  r.unique_blocks = {1, 2, 3, 4, 5, 6, 10};
  r.unique_blocks_layer = {0, 1, 2, 0, 1, 2, 0};
  // layer 0: (1 + 4 + 10) / 3 = 5; layer 1: (2 + 5) / 2 = 3.5; layer 2: (3 + 6) / 2 = 4.5
  CHECK(r.unique_by_layer() == std::vector<double>{5.0, 3.5, 4.5});
  r.unique_blocks_layer = {0, 0, 0, 0, 0, 0, 3};  // layers 1 and 2 without an entry read 0
  CHECK(r.unique_by_layer() == std::vector<double>{21.0 / 6.0, 0.0, 0.0, 10.0});
  r.unique_blocks_layer.pop_back();
  CHECK_THROWS_WITH(r.unique_by_layer(), Catch::Contains("7 counts but 6 layers"));
  CHECK(PerplexityResult().unique_by_layer().empty());
}

TEST_CASE("XL perplexity: M = 0 is windowed perplexity, and a cache equals a per-token loop over the XL mask", "[infer][xl]") {
  GPTConfig c;
  c.vocab_size = 33;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;  // T: the pieces a window is read in
  auto build = [&](int64_t M) {
    manual_seed(202);
    c.xl_cache = M;
    auto m = std::make_unique<GPT>(c);
    for (Var* p : m->parameters())
      if (p->dim() == 2) p->value().copy_(mul(p->value(), 6.0));  // sharper predictions, as model() above
    m->to(DType::F64);
    return m;
  };
  // M = 0: every piece of T is read alone, so windows of 2T read in two pieces are the standard
  // model's windows of T. 49 tokens: 3 windows of 16 or 6 of 8, each scored up to the token after
  // it, the same 48 targets in the same order. The pieces run the plain forward's arithmetic bit
  // for bit (tests/test_gpt.cpp), so the two means are equal, not close.
  auto m0 = build(0);
  std::vector<int32_t> t = toks(49, 4);
  PerplexityResult xl0 = evaluate_perplexity_xl(*m0, t, 16), std0 = evaluate_perplexity(*m0, t, InferConfig{}, -1, -1, 8);
  CHECK(xl0.windows == 3);
  CHECK(xl0.tokens == 48);
  CHECK(std0.tokens == 48);
  CHECK(xl0.nll == std0.nll);
  // M > 0, half a piece and one and a half pieces, over windows of 20 = 8 + 8 + 4 (a short last
  // piece). The independent answer: each window in one GPT::forward with the explicit XL mask
  // (tests/xl_mask.h), then each token's loss by a naive loop, log-sum-exp in double.
  std::vector<int32_t> u = toks(44, 5);  // (44 - 1) / 20 = 2 windows
  for (int64_t M : {4, 12}) {
    INFO("M = " << M);
    auto m = build(M);
    PerplexityResult r = evaluate_perplexity_xl(*m, u, 20);
    REQUIRE(r.tokens == 40);
    double total = 0;
    for (int w = 0; w < 2; ++w) {
      std::vector<int32_t> win(u.begin() + w * 20, u.begin() + (w + 1) * 20);
      std::vector<double> logits = values(m->forward(from_vector(win, {1, 20}), Tensor(), test::xl_mask_core(8, M)).value());
      for (int i = 0; i < 20; ++i) {
        const double* row = logits.data() + i * 33;
        const double mx = *std::max_element(row, row + 33);
        double z = 0;
        for (int v = 0; v < 33; ++v) z += std::exp(row[v] - mx);
        total += mx + std::log(z) - row[u[static_cast<size_t>(w * 20 + i + 1)]];
      }
    }
    CHECK(std::fabs(r.nll - total / 40) < 1e-12);  // f64; rotary at other positions, other summation orders
    // evaluate_perplexity hands an XL model to the XL reading (any length, the config unused).
    CHECK(evaluate_perplexity(*m, u, InferConfig{}, -1, -1, 20).nll == r.nll);
    // The cache matters: the M = 0 model (the same weights) reads the later pieces alone.
    CHECK(std::fabs(evaluate_perplexity_xl(*build(0), u, 20).nll - r.nll) > 1e-6);
  }
  CHECK_THROWS_WITH(evaluate_perplexity_xl(*m0, std::vector<int32_t>(t.begin(), t.begin() + 16), 16),
                    Catch::Contains("plus the token after it"));
}

TEST_CASE("a standard model's windows read in independent pieces (--local) equal pieces scored alone", "[infer]") {
  auto m = model("standard", DType::F64);
  std::vector<int32_t> t = toks(90, 6);
  InferConfig c;
  c.standard_local = 15;  // windows of 40 read as 15 + 15 + 10, no memory between the pieces
  PerplexityResult r = evaluate_perplexity(*m, t, c, -1, -1, 40);
  REQUIRE(r.windows == 2);
  REQUIRE(r.window_nll.size() == 2);
  // The independent answer: each piece alone through GPT::forward, its loss by a naive loop.
  for (int w = 0; w < 2; ++w) {
    double nats = 0;
    for (int p0 = 0; p0 < 40; p0 += 15) {
      const int n = std::min(15, 40 - p0);
      const auto begin = t.begin() + w * 40 + p0;
      std::vector<double> logits = values(m->forward(from_vector(std::vector<int32_t>(begin, begin + n), {1, n})).value());
      for (int i = 0; i < n; ++i) {
        const double* row = logits.data() + i * 33;
        const double mx = *std::max_element(row, row + 33);
        double z = 0;
        for (int v = 0; v < 33; ++v) z += std::exp(row[v] - mx);
        nats += mx + std::log(z) - row[*(begin + i + 1)];
      }
    }
    CHECK(std::fabs(r.window_nll[w] - nats) < 1e-10);  // f64, 40 terms
    CHECK(r.window_tokens[w] == 40);
  }
  CHECK(std::fabs(r.nll - (r.window_nll[0] + r.window_nll[1]) / 80) < 1e-14);
  // The pieces lose context: the whole window at once scores differently (and 0 means that).
  c.standard_local = 0;
  PerplexityResult whole = evaluate_perplexity(*m, t, c, -1, -1, 40);
  CHECK(std::fabs(whole.nll - r.nll) > 1e-6);
  c.standard_local = 40;
  CHECK(evaluate_perplexity(*m, t, c, -1, -1, 40).nll == whole.nll);
  // A piece longer than the block size is refused; a landmark model refuses --local.
  // Pieces let a window exceed the block size (128); a piece may not.
  std::vector<int32_t> long_t = toks(300, 6);
  c.standard_local = 100;
  CHECK(evaluate_perplexity(*m, long_t, c, -1, -1, 200).windows == 1);
  c.standard_local = 150;
  CHECK_THROWS_WITH(evaluate_perplexity(*m, long_t, c, -1, -1, 200), Catch::Contains("--local"));
  c.standard_local = 15;
  auto lm = model("landmark", DType::F64);
  CHECK_THROWS_WITH(evaluate_perplexity(*lm, t, c, 32, -1, 40), Catch::Contains("--chunk"));
}

TEST_CASE("bootstrap interval of a perplexity: hand-worked cases and the normal approximation", "[infer][eval]") {
  PerplexityResult r;
  // Identical windows: every resample is the same, so the interval is the point.
  r.window_nll = {30.0, 30.0, 30.0};
  r.window_tokens = {10, 10, 10};
  PerplexityInterval same = bootstrap_perplexity_interval(r);
  CHECK(same.low == Approx(std::exp(3.0)).epsilon(1e-15));
  CHECK(same.high == Approx(std::exp(3.0)).epsilon(1e-15));
  // Two windows of 10 tokens, 20 and 40 nats. A resample of two is {a, a} (1/4), {a, b} (1/2) or
  // {b, b} (1/4): perplexity e^2, e^3 or e^4. The 2.5% and 97.5% points fall in the outer quarters,
  // the 30% and 70% points in the middle half (each about 5 standard errors inside at 2000 draws).
  r.window_nll = {20.0, 40.0};
  r.window_tokens = {10, 10};
  PerplexityInterval wide = bootstrap_perplexity_interval(r, 0.95, 2000, 7);
  CHECK(wide.low == Approx(std::exp(2.0)).epsilon(1e-15));
  CHECK(wide.high == Approx(std::exp(4.0)).epsilon(1e-15));
  PerplexityInterval mid = bootstrap_perplexity_interval(r, 0.4, 2000, 7);
  CHECK(mid.low == Approx(std::exp(3.0)).epsilon(1e-15));
  CHECK(mid.high == Approx(std::exp(3.0)).epsilon(1e-15));
  // Many windows: the interval of the mean log-perplexity approaches the normal one,
  // mean +- 1.96 sd / sqrt(n). Nats per window uniform in [0, 20], 10 tokens each, n = 400:
  // sd of the mean nats per token = (20 / sqrt(12)) / 10 / sqrt(400). The bootstrap's own error
  // at 4000 draws and the sample sd's error at n = 400 are a few percent: 10% on the half-width.
  manual_seed(99);
  std::vector<double> u = values(rand({400}, DType::F64, Device::CPU, 0, 20));
  r.window_nll = u;
  r.window_tokens.assign(400, 10);
  double mean = 0, var = 0;
  for (double x : u) mean += x / 10;
  mean /= 400;
  for (double x : u) var += (x / 10 - mean) * (x / 10 - mean);
  const double half = 1.96 * std::sqrt(var / 399) / std::sqrt(400.0);
  PerplexityInterval big = bootstrap_perplexity_interval(r, 0.95, 4000, 3);
  CHECK(std::log(big.high) - mean == Approx(half).epsilon(0.10));
  CHECK(mean - std::log(big.low) == Approx(half).epsilon(0.10));
  // A seed reproduces the interval; another seed moves it a little.
  PerplexityInterval again = bootstrap_perplexity_interval(r, 0.95, 4000, 3), other = bootstrap_perplexity_interval(r, 0.95, 4000, 4);
  CHECK(again.low == big.low);
  CHECK(again.high == big.high);
  CHECK(other.low != big.low);
  // evaluate_perplexity's windows add up to its mean.
  auto m = model("standard", DType::F64);
  PerplexityResult e = evaluate_perplexity(*m, toks(70, 8), InferConfig{}, -1, -1, 23);
  REQUIRE(e.window_nll.size() == 3);
  CHECK(std::fabs((e.window_nll[0] + e.window_nll[1] + e.window_nll[2]) / 69 - e.nll) < 1e-14);
  // Clear errors.
  CHECK_THROWS_WITH(bootstrap_perplexity_interval(PerplexityResult{}), Catch::Contains("no windows"));
  CHECK_THROWS_WITH(bootstrap_perplexity_interval(r, 1.0), Catch::Contains("level"));
  CHECK_THROWS_WITH(bootstrap_perplexity_interval(r, 0.95, 1), Catch::Contains("resamples"));
}

TEST_CASE("paired bootstrap of two evaluations: hand-worked spans, shared variation removed, errors", "[infer][eval]") {
  // a: windows of 4 (3 of them, 12 targets); b: windows of 2 (7; the 7th lies past a's last window
  // and is left out). Spans of 4: b's sums 5+4, 6+7, 2+3 = 9, 13, 5 against a's 8, 12, 4: every
  // span differs by -1 nat, so every resample gives the same ratio exp(-3 / 12).
  PerplexityResult a, b;
  a.window_nll = {8, 12, 4};
  a.window_tokens = {4, 4, 4};
  b.window_nll = {5, 4, 6, 7, 2, 3, 9};
  b.window_tokens.assign(7, 2);
  PairedRatio p = paired_bootstrap_ratio(a, 4, b, 2);
  CHECK(p.spans == 3);
  CHECK(p.span_length == 4);
  CHECK(p.tokens == 12);
  CHECK(p.ppl_a == Approx(std::exp(24.0 / 12)).epsilon(1e-15));
  CHECK(p.ppl_b == Approx(std::exp(27.0 / 12)).epsilon(1e-15));
  CHECK(p.ratio == Approx(std::exp(-3.0 / 12)).epsilon(1e-15));
  CHECK(p.low == Approx(p.ratio).epsilon(1e-15));
  CHECK(p.high == Approx(p.ratio).epsilon(1e-15));
  // Swapped: the reciprocal.
  PairedRatio q = paired_bootstrap_ratio(b, 2, a, 4);
  CHECK(q.ratio == Approx(1 / p.ratio).epsilon(1e-15));
  // Two spans differing by -2 and 0 nats (8 tokens): a resample of two sums to -4, -2 or 0 nats
  // with chances 1/4, 1/2, 1/4, so the 95% interval runs from exp(-4 / 8) to 1 (as in the
  // unpaired hand-worked case above).
  a.window_nll = {8, 12};
  a.window_tokens = {4, 4};
  b.window_nll = {5, 5, 6, 6};
  b.window_tokens.assign(4, 2);
  p = paired_bootstrap_ratio(a, 4, b, 2, 0.95, 2000, 7);
  CHECK(p.ratio == Approx(std::exp(-2.0 / 8)).epsilon(1e-15));
  CHECK(p.low == Approx(std::exp(-4.0 / 8)).epsilon(1e-15));
  CHECK(p.high == Approx(1.0).epsilon(1e-15));
  // What pairing is for: 400 spans of 100 tokens whose difficulty varies a lot (b: 200 to 600 nats)
  // and a, 3 nats better per span with noise of +-2 nats. Each alone has an interval too wide to
  // separate them; paired, the ratio's interval is the normal one, mean difference +- 1.96 sd /
  // sqrt(n), per 100 tokens (10% on the half-width, as for the unpaired case above).
  manual_seed(5);
  const std::vector<double> level = values(rand({400}, DType::F64, Device::CPU, 200, 600));
  const std::vector<double> noise = values(rand({400}, DType::F64, Device::CPU, -2, 2));
  a = PerplexityResult{};
  b = PerplexityResult{};
  double mean = 0, var = 0;
  for (size_t j = 0; j < 400; ++j) {
    b.window_nll.push_back(level[j]);
    a.window_nll.push_back(level[j] - 3 + noise[j]);
    mean += (-3 + noise[j]) / 400;
  }
  for (size_t j = 0; j < 400; ++j) var += (-3 + noise[j] - mean) * (-3 + noise[j] - mean) / 399;
  a.window_tokens.assign(400, 100);
  b.window_tokens.assign(400, 100);
  const PerplexityInterval ia = bootstrap_perplexity_interval(a), ib = bootstrap_perplexity_interval(b);
  CHECK(ia.high > ib.low);  // the separate intervals overlap
  p = paired_bootstrap_ratio(a, 100, b, 100, 0.95, 4000, 3);
  CHECK(p.high < 1);  // paired, a is better
  const double half = 1.96 * std::sqrt(var / 400) / 100;
  CHECK(std::log(p.high) - mean / 100 == Approx(half).epsilon(0.10));
  CHECK(mean / 100 - std::log(p.low) == Approx(half).epsilon(0.10));
  // Clear errors.
  CHECK_THROWS_WITH(paired_bootstrap_ratio(a, 100, b, 30), Catch::Contains("multiple"));
  b.window_tokens[7] = 99;
  CHECK_THROWS_WITH(paired_bootstrap_ratio(a, 100, b, 100), Catch::Contains("window 7") && Catch::Contains("scored 99"));
  PerplexityResult one;
  one.window_nll = {1.0};
  one.window_tokens = {2};
  CHECK_THROWS_WITH(paired_bootstrap_ratio(a, 100, one, 2), Catch::Contains("scored 100") || Catch::Contains("no window"));
  CHECK_THROWS_WITH(paired_bootstrap_ratio(one, 2, one, 4), Catch::Contains("scored 2"));
  PerplexityResult four = one;
  four.window_tokens = {4};
  CHECK_THROWS_WITH(paired_bootstrap_ratio(four, 4, one, 2), Catch::Contains("no window of length 4"));
  CHECK_THROWS_WITH(paired_bootstrap_ratio(one, 2, one, 2, 0), Catch::Contains("level"));
  CHECK_THROWS_WITH(paired_bootstrap_ratio(one, 2, one, 2, 0.95, 1), Catch::Contains("resamples"));
}

TEST_CASE("window sums: written and read back bit for bit, bad files refused by line", "[infer][eval]") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("lm_window_sums_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  PerplexityResult r;
  r.window_nll = {0.1, 123.456789012345678, 1e-300, 7};
  r.window_tokens.assign(4, 5);
  const std::string path = dir + "/w.tsv";
  const TokensIdentity id = tokens_identity({1, 2, 3, 258});
  CHECK(id.tokens == 4);
  CHECK(id.crc32.size() == 8);
  CHECK(tokens_identity({1, 2, 3, 257}) != id);  // one token differs: another text
  CHECK(tokens_identity({1, 2, 3}) != id);
  write_window_sums(path, r, 5, id);
  int64_t L = 0;
  TokensIdentity back_id;
  PerplexityResult back = read_window_sums(path, &L, &back_id);
  CHECK(back_id == id);
  CHECK(L == 5);
  CHECK(back.windows == 4);
  CHECK(back.tokens == 20);
  CHECK(back.window_nll == r.window_nll);  // %.17g: every double round-trips exactly
  CHECK(back.window_tokens == r.window_tokens);
  CHECK(back.nll == Approx((0.1 + 123.456789012345678 + 1e-300 + 7) / 20).epsilon(1e-15));
  CHECK(!std::filesystem::exists(path + ".tmp"));
  auto bad = [&](const std::string& text) {
    const std::string f = dir + "/bad.tsv";
    std::ofstream(f) << text;
    int64_t len = 0;
    return read_window_sums(f, &len);
  };
  const std::string old_head = "window\tfirst_token\ttokens\tnats\n";
  const std::string head = "# tokens\t4\tcrc32\t" + id.crc32 + "\n" + old_head;
  // Without the line naming its tokens (as written before it was recorded) a file is refused.
  CHECK_THROWS_WITH(bad(old_head + "0\t0\t5\t1.5\n"), Catch::Contains("naming its token file"));
  CHECK_THROWS_WITH(bad("# tokens\t4\tcrc32\tXYZ\n" + old_head), Catch::Contains("naming its token file"));
  CHECK_THROWS_WITH(bad("# tokens\t4\tcrc32\t" + id.crc32 + "0\n" + old_head),
                    Catch::Contains("naming its token file"));
  CHECK_THROWS_WITH(bad("# tokens\t4\tcrc32\t" + id.crc32 + "\nwindow,first_token\n"), Catch::Contains("header"));
  // Losses no model gives: 1e30 and 1e308 nats are refused, 1,000 nats a token is the most.
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t1e30\n"), Catch::Contains("1000 per token"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t1e308\n"), Catch::Contains("line 3"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t5000.5\n"), Catch::Contains("per token"));
  CHECK_NOTHROW(bad(head + "0\t0\t5\t5000\n"));
  CHECK_THROWS_WITH(bad(head), Catch::Contains("no windows"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t1.5\n2\t10\t5\t1\n"), Catch::Contains("line 4") && Catch::Contains("expected window 1"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t1.5\n1\t6\t5\t1\n"), Catch::Contains("starting at token 6"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t1.5\n1\t5\t4\t1\n"), Catch::Contains("window of 4 tokens"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\tnan\n"), Catch::Contains("finite"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t-1\n"), Catch::Contains("not negative"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t5\t1 x\n"), Catch::Contains("line 3") && Catch::Contains("four tab-separated"));
  CHECK_THROWS_WITH(bad(head + "0\t0\t0\t1\n"), Catch::Contains("window of 0 tokens"));
  CHECK_THROWS_WITH(read_window_sums(dir, &L), Catch::Contains("regular file") || Catch::Contains("not a file"));
  CHECK_THROWS_WITH(read_window_sums(dir + "/missing.tsv", &L), Catch::Contains("missing.tsv"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("pass-key prompts: the paper's wording, the requested length, the key in range", "[passkey]") {
  PasskeyPrompt p = make_passkey_prompt(4217, 1, 2);
  CHECK(p.text.rfind(kPasskeyTask, 0) == 0);
  CHECK(std::string(kPasskeyTask).find("Find it and memorize them.") != std::string::npos);  // the paper's words
  CHECK(p.text.find("The pass key is 4217. Remember it. 4217 is the pass key.") != std::string::npos);
  CHECK(p.text.size() >= std::string(kPasskeyQuestion).size());
  CHECK(p.text.substr(p.text.size() - std::string(kPasskeyQuestion).size()) == kPasskeyQuestion);
  ByteTokenizer tok;
  for (int64_t len : {400, 1000, 5000}) {
    for (uint64_t trial = 0; trial < 5; ++trial) {
      PasskeyPrompt q = passkey_prompt_for_length(tok, len, 9, trial);
      const int64_t n = static_cast<int64_t>(tok.encode(q.text).size());
      CHECK(n <= len);
      CHECK(n > len - 90);  // within one filler sentence (88 bytes + space) of the target
      CHECK(q.key >= 1);
      CHECK(q.key <= 50000);
    }
  }
  CHECK(passkey_prompt_for_length(tok, 5000, 9, 1).key == passkey_prompt_for_length(tok, 5000, 9, 1).key);
  CHECK_THROWS_AS(passkey_prompt_for_length(tok, 50, 9, 0), Error);
  // A fixed depth: the same key as the random placement, the fillers split as asked.
  for (double depth : {0.0, 0.25, 0.5, 1.0}) {
    PasskeyPrompt d = passkey_prompt_for_length(tok, 3000, 9, 2, depth);
    const int64_t fillers = d.fillers_before + d.fillers_after;
    CHECK(d.key == passkey_prompt_for_length(tok, 3000, 9, 2).key);
    CHECK(fillers > 20);
    CHECK(std::abs(static_cast<double>(d.fillers_before) - depth * static_cast<double>(fillers)) <= 0.5);
  }
  CHECK(passkey_prompt_for_length(tok, 3000, 9, 2, 0.0).fillers_before == 0);
  CHECK(passkey_prompt_for_length(tok, 3000, 9, 2, 1.0).fillers_after == 0);
  CHECK_THROWS_AS(passkey_prompt_for_length(tok, 3000, 9, 2, 1.5), Error);
  CHECK(passkey_answer_digits(" 31415. Then") == "31415");
  CHECK(passkey_answer_digits("  x1") == "");
  std::string train = passkey_training_text(50, 3, 0.2, 4);
  CHECK(std::count(train.begin(), train.end(), '\n') == 50);
  // Training documents keep their own task line (train/passkey.h says why).
  CHECK(train.find(kPasskeyTrainingTask) != std::string::npos);
  CHECK(train.find(kPasskeyTask) == std::string::npos);
  // Filler counts per document, counted in the text: 0..max by default, exactly k when
  // min = max = k, and inside [min, max] otherwise; every count in the range turns up.
  auto filler_counts = [](const std::string& text) {
    std::vector<int64_t> counts;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      int64_t n = 0;
      for (size_t at = line.find(kPasskeyFiller); at != std::string::npos; at = line.find(kPasskeyFiller, at + 1)) ++n;
      if (line.find("pass key") != std::string::npos) counts.push_back(n);  // prompts only
    }
    return counts;
  };
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 3}, {5, 5}, {4, 7}}) {
    const std::vector<int64_t> counts = filler_counts(passkey_training_text(400, hi, 0.0, 4, lo));
    CHECK(counts.size() == 400);
    std::set<int64_t> seen(counts.begin(), counts.end());
    CHECK(*seen.begin() == lo);
    CHECK(*seen.rbegin() == hi);
    CHECK(static_cast<int64_t>(seen.size()) == hi - lo + 1);
  }
  CHECK(passkey_training_text(30, 3, 0.2, 4, 0) == passkey_training_text(30, 3, 0.2, 4));
  CHECK_THROWS_AS(passkey_training_text(30, 3, 0.2, 4, 4), Error);
  // uniform_distance: the fillers after the key, counted in the text, are uniform over 0..max
  // (each of the 10 counts expected 400 times in 4000 documents, binomial sd about 19: the
  // bounds 300..500 are more than 5 sd away), the total stays in [min, max]; by default a key
  // 9 fillers back is rare (total 9 and before 0: 1 in 100, about 40 documents).
  auto after_counts = [](const std::string& text) {
    std::vector<int64_t> after(10, 0);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const size_t key_at = line.find("The pass key is");
      int64_t n = 0;
      for (size_t at = line.find(kPasskeyFiller, key_at); at != std::string::npos; at = line.find(kPasskeyFiller, at + 1)) ++n;
      ++after[static_cast<size_t>(n)];
    }
    return after;
  };
  const std::string uniform = passkey_training_text(4000, 9, 0.0, 4, 2, true);
  for (int64_t n : after_counts(uniform)) {
    CHECK(n > 300);
    CHECK(n < 500);
  }
  for (int64_t n : filler_counts(uniform)) {
    CHECK(n >= 2);
    CHECK(n <= 9);
  }
  CHECK(after_counts(passkey_training_text(4000, 9, 0.0, 4))[9] < 80);

  // List documents: the hand-written form of one, then the mix.
  CHECK(passkey_list_document({12, 345}, 1) == std::string("The list is 12 345. ") + kPasskeyFiller +
                                                   " What is the list? The list is 12 345.");
  CHECK(passkey_list_document({7}, 0) == "The list is 7. What is the list? The list is 7.");
  CHECK_THROWS_AS(passkey_list_document({}, 0), Error);
  PasskeyDataOptions o;
  o.docs = 4000;
  o.max_fillers = 5;
  o.filler_only = 0.1;
  o.seed = 4;
  const std::string plain = passkey_training_text(o);
  CHECK(plain == passkey_training_text(4000, 5, 0.1, 4));  // list_docs 0: the text as before the option
  o.list_docs = 0.3;
  o.list_max_items = 6;
  o.list_max_fillers = 7;
  std::istringstream lines(passkey_training_text(o));
  int64_t lists = 0, prompts = 0;
  std::set<size_t> items_seen;
  std::set<int64_t> fillers_seen;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("The list is ", 0) != 0) {
      prompts += line.find("pass key") != std::string::npos;
      continue;
    }
    ++lists;
    // "The list is A B C." ... "The list is A B C.": the repeat equals the list, word for word.
    const size_t q = line.find(" What is the list? The list is ");
    REQUIRE(q != std::string::npos);
    const std::string first = line.substr(12, line.find('.') - 12);
    const std::string again = line.substr(q + 31, line.size() - 1 - (q + 31));
    CHECK(first == again);
    CHECK(line.back() == '.');
    std::istringstream words(first);
    size_t n = 0;
    for (std::string w; words >> w; ++n) {
      const long v = std::stol(w);
      CHECK(v >= 1);
      CHECK(v <= 50000);
    }
    items_seen.insert(n);
    int64_t f = 0;
    for (size_t at = line.find(kPasskeyFiller); at != std::string::npos; at = line.find(kPasskeyFiller, at + 1)) ++f;
    fillers_seen.insert(f);
  }
  // 30% of 4000 documents are lists: 1200 expected, binomial sd about 29; 1050..1350 is over 5 sd.
  CHECK(lists > 1050);
  CHECK(lists < 1350);
  CHECK(prompts > 2000);  // the rest: 90% prompts, 10% plain filler
  CHECK(items_seen == std::set<size_t>{1, 2, 3, 4, 5, 6});
  CHECK(fillers_seen == std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  o.list_max_items = 61;  // 64 counters per document: at most 60 numbers
  CHECK_THROWS_AS(passkey_training_text(o), Error);

  // Repeated questions: each prompt document asks 3 times, always answered with its own key; the
  // first part of each document is the one-question document of the same seed, word for word.
  PasskeyDataOptions q;
  q.docs = 300;
  q.max_fillers = 4;
  q.filler_only = 0.0;
  q.uniform_distance = true;
  q.seed = 5;
  const std::string once = passkey_training_text(q);
  q.questions = 3;
  std::istringstream once_lines(once), thrice_lines(passkey_training_text(q));
  std::set<int64_t> gaps;
  for (std::string a, b; std::getline(once_lines, a) && std::getline(thrice_lines, b);) {
    CHECK(b.rfind(a, 0) == 0);  // the one-question document is a prefix
    const std::string key = a.substr(a.rfind(' ') + 1, a.size() - a.rfind(' ') - 2);
    const std::string qa = std::string(kPasskeyQuestion) + " " + key + ".";
    int64_t asked = 0;
    for (size_t at = b.find(kPasskeyQuestion); at != std::string::npos; at = b.find(kPasskeyQuestion, at + 1)) {
      CHECK(b.compare(at, qa.size(), qa) == 0);  // every question is answered with this document's key
      ++asked;
    }
    CHECK(asked == 3);
    // fillers between the first and the second answer: uniform over 0..max_fillers
    const size_t second = b.find(kPasskeyQuestion, a.size());
    int64_t f = 0;
    for (size_t at = b.find(kPasskeyFiller, a.size()); at != std::string::npos && at < second;
         at = b.find(kPasskeyFiller, at + 1))
      ++f;
    gaps.insert(f);
  }
  CHECK(gaps == std::set<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("windowed generation: each token is the argmax of the model over its last window", "[infer]") {
  // Independent answer: the greedy loop written out with the model's plain forward.
  auto m = model("standard", DType::F64);
  std::vector<int32_t> text = toks(30, 4);
  const int64_t window = 9;
  std::vector<int32_t> out = generate_windowed(*m, text, window, 6, SampleOptions{}, nullptr, 32);
  REQUIRE(out.size() == 6);
  for (int32_t tok : out) {
    std::vector<int32_t> last(text.end() - window, text.end());
    std::vector<double> l = values(m->forward(from_vector(last, {1, window})).value().select(1, window - 1).squeeze(0));
    CHECK(tok == static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
    text.push_back(tok);
  }
}

TEST_CASE("one-shot logits with a phase: the landmark grid starts mid-block", "[infer]") {
  // Phase 3 with F 4: the first landmark follows 1 raw token, then one after every 4. The
  // augmented stream is written out by hand and run through the model directly.
  auto m = model("landmark", DType::F64);
  const int32_t lmk = 32;
  std::vector<int32_t> raw = toks(10, 5);
  std::vector<int32_t> aug, kinds;
  for (size_t i = 0; i < raw.size(); ++i) {
    aug.push_back(raw[i]);
    kinds.push_back(kRegular);
    if (i % 4 == 0) {  // after raw tokens 0, 4, 8
      aug.push_back(lmk);
      kinds.push_back(kLandmark);
    }
  }
  const int64_t n = static_cast<int64_t>(aug.size());
  Tensor kt = from_vector(kinds, {1, n});
  Tensor all = m->forward(from_vector(aug, {1, n}), Tensor(), landmark_attention_core(make_layout(kt))).value().squeeze(0);
  std::vector<Tensor> rows;
  for (int64_t j = 0; j < n; ++j)
    if (kinds[j] == kRegular) rows.push_back(all.narrow(0, j, 1));
  CHECK(max_abs_diff(one_shot_logits(*m, raw, lmk, 3), concat(rows, 0)) < 1e-12);  // same ops, same order
  CHECK(max_abs_diff(one_shot_logits(*m, raw, lmk, 0), concat(rows, 0)) > 1e-6);   // another grid differs
}

TEST_CASE("pass-key scoring: strict answer digits and the paper's first integer", "[passkey]") {
  CHECK(passkey_first_integer(" 31415. Then") == "31415");
  CHECK(passkey_first_integer(" is the key: 4217, not 12") == "4217");  // paper: anywhere, the first one
  CHECK(passkey_answer_digits(" is the key: 4217, not 12") == "");      // strict: must start the answer
  CHECK(passkey_first_integer("no digits at all") == "");
  CHECK(passkey_first_integer("7") == "7");
  CHECK(parse_passkey_scoring("paper") == PasskeyScoring::Paper);
  CHECK_THROWS_WITH(parse_passkey_scoring("loose"), Catch::Contains("strict or paper"));
}

TEST_CASE("pass-key recall: the key's blocks, and recall 1 when every block is retrieved, 0 when none is", "[passkey]") {
  // Byte tokens: token r is byte r, so a span [b, e) of the text lies in blocks b / F .. (e-1) / F.
  ByteTokenizer tok;
  std::vector<int32_t> ids = tok.encode(std::string(40, 'x'));
  CHECK(passkey_key_blocks(tok, ids, {{10, 13}, {30, 33}}, 8) == std::vector<int64_t>{1, 3, 4});
  PasskeyPrompt p = make_passkey_prompt(4217, 2, 1);
  const auto spans = passkey_key_spans(p);
  REQUIRE(spans.size() == 2);
  CHECK(p.text.substr(spans[0].first, spans[0].second - spans[0].first) == "4217");
  CHECK(p.text.substr(spans[1].first, spans[1].second - spans[1].first) == "4217");
  CHECK(spans[1].first == spans[0].first + std::string("4217. Remember it. ").size());
  std::vector<int64_t> by_hand;  // byte tokens: the blocks of each span's first and last byte
  for (const auto& [b, e] : spans)
    for (size_t at : {b, e - 1}) by_hand.push_back(static_cast<int64_t>(at) / 20);
  std::sort(by_hand.begin(), by_hand.end());
  by_hand.erase(std::unique(by_hand.begin(), by_hand.end()), by_hand.end());
  CHECK(passkey_key_blocks(tok, tok.encode(p.text), spans, 20) == by_hand);

  // A random byte-level landmark model (F 20): what it answers does not matter, only what it
  // retrieves. k above anything cached: every cached block, the key's too, is retrieved.
  tok.add_special("<|landmark|>");
  manual_seed(301);
  GPTConfig c;
  c.vocab_size = tok.vocab_size();
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 128;
  c.attention = AttentionKind::Landmark;
  c.landmark_every = 20;
  GPT m(c);
  InferConfig cfg;
  cfg.chunk_len = 40;
  PasskeyOptions o;
  o.trials = 3;
  o.recall = true;
  o.seed = 5;
  for (int64_t k : {1000, 0}) {
    INFO("k " << k);
    cfg.k = k;
    PasskeyResult r = passkey_accuracy(m, tok, cfg, 600, o);
    REQUIRE(r.recall_queries.size() == 4);
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h) {
        CHECK(r.recall_queries[static_cast<size_t>(l * 2 + h)] > 0);  // the key's block was cached
        CHECK(r.recall(l, h, 2) == (k > 0 ? 1.0 : 0.0));
      }
  }
  o.window = 64;
  CHECK_THROWS_WITH(passkey_accuracy(m, tok, cfg, 600, o), Catch::Contains("landmark path"));
}
