// test_gpt.cpp: the GPT model: parameter names and counts, shapes, fused attention vs the
// composed reference through the whole model, causality, and learning (overfitting one batch);
// the Transformer-XL option (xl_cache): windows read with the cache against one forward with an
// explicit XL mask, an empty cache against the plain forward, its config field.
#include "tests/helpers.h"

#include <tuple>

#include "autograd/functions.h"
#include "nn/gpt.h"
#include "nn/gpt_io.h"
#include "nn/optim.h"
#include "tensor/rng.h"
#include "tests/xl_mask.h"

using namespace lm;
using namespace lm::test;

namespace {
GPTConfig small_config() {
  GPTConfig c;
  c.vocab_size = 37;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 12;
  return c;
}
Tensor random_tokens(int64_t B, int64_t T, int64_t V) { return rand({B, T}, DType::F64, Device::CPU, 0, V).to(DType::I32); }
}  // namespace

TEST_CASE("GPT: parameter names, count and init scale", "[gpt]") {
  manual_seed(71);
  GPTConfig c = small_config();
  GPT m(c);
  auto named = m.named_parameters();
  std::vector<std::string> names;
  for (auto& p : named) names.push_back(p.first);
  CHECK(names.front() == "wte.weight");
  CHECK(std::find(names.begin(), names.end(), "blocks.1.attn.qkv.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "blocks.0.mlp.proj.weight") != names.end());
  CHECK(names.back() == "ln_f.bias");
  // V*C + L * (2 LN (2C each) + qkv 3C*C + proj C*C + fc 4C*C + proj 4C*C) + final LN 2C
  const int64_t C = 16, L = 2;
  CHECK(m.num_parameters() == 37 * C + L * (4 * C + 12 * C * C) + 2 * C);
  // Output projections start with std 0.02 / sqrt(2 L) = 0.01; others 0.02.
  auto stdev = [](const Tensor& t) {
    double s = 0;
    for (double v : values(t)) s += v * v;
    return std::sqrt(s / static_cast<double>(t.numel()));
  };
  GPTConfig big = c;
  big.n_embd = 128;
  big.n_head = 4;
  GPT mb(big);
  CHECK(std::fabs(stdev(mb.blocks[0]->attn.qkv.weight.value()) - 0.02) < 0.001);   // 49k samples
  CHECK(std::fabs(stdev(mb.blocks[1]->mlp.proj.weight.value()) - 0.01) < 0.0005);  // 65k samples
  big.n_head = 3;
  CHECK_THROWS_AS(GPT(big), Error);
  // Configs past the limits are refused by validate() before any weight exists: a layer count
  // that once allocated for a minute, and a width whose weights no machine here holds
  // (2 layers of 12 C^2 at C = 2^20 are about 2.6e13 parameters, 105 TB in f32).
  GPTConfig huge = c;
  huge.n_layer = 100000;
  CHECK_THROWS_WITH(GPT(huge), Catch::Contains("n_layer 100000"));
  huge = c;
  huge.n_embd = int64_t(1) << 20;
  huge.n_head = 1 << 10;
  CHECK_THROWS_WITH(huge.validate(), Catch::Contains("do not fit"));
  huge = c;
  huge.vocab_size = int64_t(1) << 31;
  CHECK_THROWS_WITH(huge.validate(), Catch::Contains("vocab_size"));
}

TEST_CASE("GPT: fused attention equals the reference through the whole model", "[gpt]") {
  manual_seed(72);
  GPTConfig c = small_config();
  GPT fused(c);
  c.fused_attention = false;
  GPT ref(c);
  auto pf = fused.named_parameters(), pr = ref.named_parameters();
  for (size_t i = 0; i < pf.size(); ++i) pr[i].second->value().copy_(pf[i].second->value());
  Tensor idx = random_tokens(3, 12, 37), tgt = random_tokens(3, 12, 37);
  Var lf = fused.loss(idx, tgt), lr = ref.loss(idx, tgt);
  CHECK(std::fabs(lf.item() - lr.item()) < 1e-6);  // f32 with different summation orders
  lf.backward();
  lr.backward();
  for (size_t i = 0; i < pf.size(); ++i) {
    INFO(pf[i].first);
    CHECK(max_abs_diff(pf[i].second->grad(), pr[i].second->grad()) < 1e-5);
  }
}

TEST_CASE("GPT: causality: changing a later token never changes earlier logits", "[gpt]") {
  manual_seed(73);
  GPT m(small_config());
  Tensor idx = random_tokens(1, 12, 37);
  Tensor a = m.forward(idx).value();
  std::vector<int32_t> v = idx.to_vector<int32_t>();
  v[8] = (v[8] + 1) % 37;
  Tensor b = m.forward(from_vector(v, {1, 12})).value();
  CHECK(max_abs_diff(a.narrow(1, 0, 8), b.narrow(1, 0, 8)) == 0);
  CHECK(max_abs_diff(a.narrow(1, 8, 4), b.narrow(1, 8, 4)) > 1e-4);
  CHECK(a.shape() == Shape{1, 12, 37});
  CHECK_THROWS_AS(m.forward(zeros({1, 12})), Error);
  CHECK_THROWS_AS(m.forward(full({1, 3}, 37, DType::I32)), Error);  // token id out of range
}

TEST_CASE("GPT: overfits one batch to near-zero loss, same seed gives the same losses", "[gpt]") {
  auto run = [](int steps) {
    manual_seed(74);
    GPTConfig c = small_config();
    GPT m(c);
    AdamWConfig oc;
    oc.weight_decay = 0.0;
    AdamW opt(m, oc);
    Tensor idx = random_tokens(2, 12, 37), tgt = random_tokens(2, 12, 37);
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      m.zero_grad();
      Var loss = m.loss(idx, tgt);
      loss.backward();
      opt.step(1e-2);
      losses.push_back(loss.item());
    }
    return losses;
  };
  std::vector<double> a = run(150), b = run(150);
  CHECK(a == b);                                  // bit-for-bit with the same seed and threads
  CHECK(std::fabs(a.front() - std::log(37.0)) < 0.3);  // starts near uniform: log V
  CHECK(a.back() < 0.05);                         // 24 random targets memorised
}

TEST_CASE("GPT xl_cache: windows read with the cache equal one forward with the XL mask", "[gpt][xl]") {
  // The independent answer: GPT::forward over all the windows at once with an explicit mask
  // (tests/xl_mask.h): query t of window w sees keys max(0, w T - M) .. t.
  // (T, M, windows): half a window cached, a whole window, and a cache longer than the window over
  // three windows (the third sees the last M = 6 positions of windows one and two).
  for (auto [T, M, W] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{6, 3, 2}, {6, 6, 2}, {4, 6, 3}}) {
    INFO("T = " << T << ", M = " << M << ", windows = " << W);
    manual_seed(75);
    GPTConfig c = small_config();
    c.block_size = T;
    c.xl_cache = M;
    GPT m(c);
    m.to(DType::F64);
    Tensor idx = random_tokens(2, W * T, 37);
    XLCache cache;
    std::vector<Tensor> pieces;
    for (int64_t w = 0; w < W; ++w) {
      pieces.push_back(m.forward_xl(idx.narrow(1, w * T, T).contiguous(), cache, &cache).value());
      CHECK(cache.length() == std::min(M, (w + 1) * T));  // the last M positions read so far
    }
    Tensor xl = concat(pieces, 1);
    Tensor naive = m.forward(idx, Tensor(), xl_mask_core(T, M)).value();
    // f64: the same function, except that the naive forward rotates at positions 0..WT-1 and the
    // XL windows at 0..M+T-1 (offsets equal, angles rounded differently), and the sums run in
    // other orders.
    CHECK(max_abs_diff(xl, naive) < 1e-12);
    // The mask matters: the plain causal forward over all windows (every query sees the whole
    // past) differs in the later windows and agrees in the first.
    Tensor causal = m.forward(idx).value();
    CHECK(max_abs_diff(xl.narrow(1, 0, T), causal.narrow(1, 0, T)) < 1e-12);
    // When the cache reaches back to the start (M >= (W - 1) T) the XL reading is the causal one.
    const double last = max_abs_diff(xl.narrow(1, (W - 1) * T, T), causal.narrow(1, (W - 1) * T, T));
    if (M < T * (W - 1)) CHECK(last > 1e-6);
    else CHECK(last < 1e-12);
  }
}

TEST_CASE("GPT xl_cache: an empty cache is the plain forward, and fused equals reference through the model", "[gpt][xl]") {
  manual_seed(76);
  GPTConfig c = small_config();
  c.xl_cache = 5;
  GPT fused(c);
  Tensor idx = random_tokens(3, 12, 37), tgt = random_tokens(3, 12, 37);
  // Empty cache: positions 0..T-1 and prefix attention with M = 0, which is causal attention bit
  // for bit (tests/test_xl_attention.cpp), so the logits are equal, not close.
  CHECK(max_abs_diff(fused.forward_xl(idx, XLCache{}, nullptr).value(), fused.forward(idx).value()) == 0);
  c.fused_attention = false;
  GPT ref(c);
  auto pf = fused.named_parameters(), pr = ref.named_parameters();
  for (size_t i = 0; i < pf.size(); ++i) pr[i].second->value().copy_(pf[i].second->value());
  XLCache cf, cr;
  fused.forward_xl(idx, XLCache{}, &cf);
  ref.forward_xl(idx, XLCache{}, &cr);
  REQUIRE(cf.length() == 5);
  for (size_t l = 0; l < cf.k.size(); ++l) {
    CHECK(max_abs_diff(cf.k[l], cr.k[l]) < 1e-6);  // f32, the first window through two attentions
    CHECK(max_abs_diff(cf.v[l], cr.v[l]) < 1e-6);
  }
  fused.zero_grad();
  ref.zero_grad();
  Tensor idx2 = random_tokens(3, 12, 37);  // the second window, read with the first one's cache
  Var lf = fused.loss_xl(idx2, tgt, cf, nullptr), lr = ref.loss_xl(idx2, tgt, cf, nullptr);
  CHECK(std::fabs(lf.item() - lr.item()) < 1e-6);  // f32 with different summation orders
  lf.backward();
  lr.backward();
  for (size_t i = 0; i < pf.size(); ++i) {
    INFO(pf[i].first);
    CHECK(max_abs_diff(pf[i].second->grad(), pr[i].second->grad()) < 1e-5);  // as the plain fused-vs-reference test
  }
  // The cache keeps the last min(M, T) = 5 positions of every layer: (B, NH, M, HS).
  for (const Tensor& t : cf.k) CHECK(t.shape() == Shape{3, 2, 5, 8});
}

TEST_CASE("GPT xl_cache: the config field, its JSON and its refusals", "[gpt][xl]") {
  GPTConfig c = small_config();
  c.xl_cache = 256;
  CHECK(gpt_config_from_json(gpt_config_to_json(c)).xl_cache == 256);
  nlohmann::json old = gpt_config_to_json(small_config());
  old.erase("xl_cache");  // a checkpoint written before the option: no default stands in for it
  CHECK_THROWS_WITH(gpt_config_from_json(old), Catch::Contains("'xl_cache' is missing"));
  c.attention = AttentionKind::Landmark;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("xl_cache 256") && Catch::Contains("landmark"));
  c = small_config();
  c.xl_cache = -1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("xl_cache"));
  c.xl_cache = 4;
  GPT m(c);
  XLCache bad;
  bad.k.push_back(zeros({1, 2, 4, 8}));
  bad.v.push_back(zeros({1, 2, 4, 8}));
  CHECK_THROWS_WITH(m.forward_xl(random_tokens(1, 5, 37), bad, nullptr), Catch::Contains("one (k, v) per layer"));
}
