// reference.cpp: cached inference with top-k landmark retrieval, from raw tokens to logits, written
// from the paper's definitions (Sections 3.1, 3.2, 3.2.1, Appendix D) as plain f64 loops: no
// threads, no fused kernels, no block store, no key index, no decode step. It reads the model's
// weights and calls nothing of the fast path, whose oracle it is (tests/test_reference.cpp). Slow
// on purpose: every key is rotated where it is used, every row is weighted key by key.
//
// The paper's notation beside the code's:
//   l_block       F: regular tokens per block (GPTConfig::landmark_every); a landmark closes each
//   l_local       cfg.chunk_len: raw tokens fed per step, one chunk
//   k             cfg.k: blocks retrieved per query (and head, at token-head granularity)
//   p_j           p[j] in att_weight: the row index of the landmark closing key j's block (p_j = j
//                 for a landmark; past the row's end while the block is open)
//   G_ij, S_ij    group(j), S[j]: key j's group, and its grouped softmax of q_i . k_j / sqrt(d_head)
//   S_i,-1        S_cmt: the context-miss token's (CMT), set to 0 below cfg.cmt_cutoff
//   L_CMT         keys of kind kControlledLandmark: with a CMT, the landmarks of cached blocks
//   AttWeight_ij  w[j], what att_weight returns
//
// One chunk (feed_chunk), layer by layer (Impl::layer): 1. a landmark inserted after every F raw
// tokens, the count carried across chunks; 2. Q, K, V of the chunk's tokens, rotary positions
// applied where a key is used (the cache keeps keys without them, Section 3.2.1); 3. each layer's
// finished blocks as plain arrays, the oldest dropped beyond cfg.capacity (absorb); 4. the score
// of every cached landmark for every (head, query) and 5. the top k at token-head, token or head
// granularity, ties to the older block (retrieve); 6. where each chosen block sits, stingy slots
// or its true position (places); 7. the row [CMT | retrieved blocks | tail | chunk up to the
// query] and its AttWeight with the CMT cutoff (att_weight), 8. the values summed (attend); then
// the projection, the MLP, the layer norms and the tied head. Positions: exact mode gives every
// token its index in the augmented stream; stingy mode reserves (k + 1) (F + 1) positions for the
// retrieved blocks and starts [tail | chunk] after them.
#include "infer/reference.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <utility>

#include "landmark/tokens.h"

namespace lm {
namespace reference {

namespace {
using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) { return std::inner_product(a.begin(), a.end(), b.begin(), 0.0); }

struct Dense {
  Vec W, b;  // y = W x + b, W (out, in) row-major
  int64_t in = 0, out = 0;
  Vec operator()(const Vec& x) const {
    Vec y(b);
    for (int64_t o = 0; o < out; ++o) y[o] += std::inner_product(x.begin(), x.end(), W.begin() + o * in, 0.0);
    return y;
  }
};

Vec values(const Var& t) { return t.value().to_double_vector(); }  // a weight tensor's values
Dense dense_of(const Linear& l) {
  const int64_t out = l.weight.size(0);
  return {values(l.weight), l.bias.defined() ? values(l.bias) : Vec(out, 0.0), l.weight.size(1), out};
}

struct Norm {  // LayerNorm: (x - mean) / sqrt(variance + eps) w + b
  Vec w, b;
  double eps;
  Vec operator()(const Vec& x) const {
    double m = 0, v = 0;
    for (double e : x) m += e / x.size();
    for (double e : x) v += (e - m) * (e - m) / x.size();
    Vec y(x.size());
    for (size_t c = 0; c < x.size(); ++c) y[c] = (x[c] - m) / std::sqrt(v + eps) * w[c] + b[c];
    return y;
  }
};
Norm norm_of(const LayerNorm& n) { return {values(n.weight), values(n.bias), n.eps}; }

struct LayerWeights {
  Norm ln1, ln2;
  Dense qkv, proj, fc, fc_proj;
};

// One token in one layer: its key (without position) and value, every head: head h is [h HS, (h + 1) HS).
using Token = RowKey;
using Block = std::vector<Token>;  // F regular tokens, then the landmark that closes them

struct Layer {
  std::deque<Block> blocks;  // the cache: finished blocks, oldest first
  std::vector<Token> tail;   // the tokens after the last landmark, waiting for their block to finish
  Vec cmt_k;                 // the CMT's key (a model with a CMT)
};

// The indices of the k largest values, ties to the smaller index (the older block), ascending.
std::vector<int32_t> top_k(const Vec& v, int64_t k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
  idx.resize(std::min<size_t>(idx.size(), static_cast<size_t>(k)));
  std::sort(idx.begin(), idx.end());
  return idx;
}

Vec softmax(Vec s) {
  const double m = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (double& e : s) z += e = std::exp(e - m);
  for (double& e : s) e /= z;
  return s;
}
}  // namespace

Vec rotated(const Vec& x, int64_t pos, double base) {
  const size_t d = x.size();
  Vec y(d);
  for (size_t i = 0; i < d / 2; ++i) {
    const double angle = static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(i) / d);
    const double c = std::cos(angle), s = std::sin(angle);
    y[2 * i] = x[2 * i] * c - x[2 * i + 1] * s;
    y[2 * i + 1] = x[2 * i] * s + x[2 * i + 1] * c;
  }
  return y;
}

Vec att_weight(const std::vector<RowKey>& row, const Vec& q, double cutoff, bool* dropped) {
  const int64_t len = static_cast<int64_t>(row.size()), i = len - 1;  // the query is the last key
  // p_j: the landmark closing j's block, found walking back from the end (len: a block still open).
  std::vector<int64_t> p(static_cast<size_t>(len));
  int64_t cmt = -1;
  for (int64_t j = len - 1, close = len; j >= 0; --j) {
    if (row[j].kind == kContextMiss) cmt = j;
    if (row[j].kind == kLandmark || row[j].kind == kControlledLandmark) close = j;
    p[j] = close;
  }
  // G_ij, case by case as in Appendix D (without a CMT, Section 3.1's three cases). The query's
  // group is p_i. (For a landmark query the paper's G_ii is -1, alone in its group; its own block's
  // tokens then take the third case of AttWeight, S_ij S_ii with S_ii = 1: the same weight.)
  const int64_t kIgnored = -1, kControlled = -2;
  auto group = [&](int64_t j) -> int64_t {
    if (j == cmt) return p[i];                                       // the CMT: the query's group
    if (p[j] != j) return p[j];                                      // a regular token: its block
    if (j == p[i]) return kIgnored;                                  // the query's own landmark
    return row[j].kind == kControlledLandmark ? kControlled : p[i];  // free landmarks: the query's
  };
  // S_ij: the softmax of the scaled scores within each group.
  Vec s(static_cast<size_t>(len)), S(static_cast<size_t>(len));
  std::map<int64_t, double> top, sum;
  for (int64_t j = 0; j < len; ++j) {
    s[j] = dot(q, row[j].key) / std::sqrt(static_cast<double>(q.size()));
    const auto it = top.emplace(group(j), s[j]).first;  // the group's largest score
    it->second = std::max(it->second, s[j]);
  }
  for (int64_t j = 0; j < len; ++j) sum[group(j)] += std::exp(s[j] - top[group(j)]);
  for (int64_t j = 0; j < len; ++j) S[j] = std::exp(s[j] - top[group(j)]) / sum[group(j)];
  // The CMT cutoff (Appendix D): below it S_i,-1 is 0, as if no retrieval had happened; a cutoff
  // of 1 drops every row, even one whose S_i,-1 is exactly 1.
  double S_cmt = cmt >= 0 ? S[cmt] : 0;
  const bool drop = cmt >= 0 && (S_cmt < cutoff || cutoff >= 1);
  if (dropped) *dropped = drop;
  if (drop) S_cmt = 0;
  // AttWeight_ij, case by case.
  Vec w(static_cast<size_t>(len));
  for (int64_t j = 0; j < len; ++j)
    w[j] = p[j] == j || j == cmt         ? 0                        // landmarks and the CMT
           : group(j) == p[i]            ? S[j]                     // G_ij = G_ii: the query's group
           : row[p[j]].kind == kLandmark ? S[j] * S[p[j]]           // gated by a free landmark
                                         : S[j] * S[p[j]] * S_cmt;  // by a controlled one and the CMT
  return w;
}

struct CachedInference::Impl {
  const GPTConfig g;
  const InferConfig cfg;
  const int64_t F = g.landmark_every, NH = g.n_head, HS = g.head_size(), C = g.n_embd, V = g.vocab_size;
  const double base = g.rotary_base;
  const int32_t landmark_id;
  const Vec wte;                             // (V, C): the token embedding
  const Dense tied{wte, Vec(V, 0.0), C, V};  // the output head, tied to it: x -> wte x
  Norm ln_f;
  std::vector<LayerWeights> w;
  std::vector<Layer> layers;
  int64_t phase = 0, aug_fed = 0, blocks_done = 0;
  std::vector<Record> records;

  Impl(const GPT& m, const InferConfig& c, int32_t landmark)
      : g(m.config()), cfg(c), landmark_id(landmark), wte(values(m.wte.weight)) {
    ln_f = norm_of(m.ln_f);
    for (const auto& b : m.blocks)
      w.push_back({norm_of(b->ln1), norm_of(b->ln2), dense_of(b->attn.qkv), dense_of(b->attn.proj), dense_of(b->mlp.fc),
                   dense_of(b->mlp.proj)});
    layers.resize(w.size());
  }

  Vec head(const Vec& x, int64_t h) const { return Vec(x.begin() + h * HS, x.begin() + (h + 1) * HS); }
  Vec embed(int32_t t) const { return Vec(wte.begin() + t * C, wte.begin() + (t + 1) * C); }

  // The residual stream's MLP half: x + W_proj gelu(W_fc LN2(x)).
  void mlp(const LayerWeights& lw, Vec& x) const {
    Vec a = lw.fc(lw.ln2(x));
    for (double& e : a) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));  // GELU, exact
    const Vec y = lw.fc_proj(a);
    for (int64_t c = 0; c < C; ++c) x[c] += y[c];
  }

  // Appendix D: the CMT sits first, at position -1, and attends to nothing; its attention output
  // is 0, so its key in every layer is the same for every input: one pass of the token alone.
  void init_cmt(int32_t cmt_id) {
    Vec x = embed(cmt_id);
    for (size_t l = 0; l < w.size(); ++l) {
      const Vec qkv = w[l].qkv(w[l].ln1(x));
      layers[l].cmt_k.assign(qkv.begin() + C, qkv.begin() + 2 * C);
      for (int64_t c = 0; c < C; ++c) x[c] += w[l].proj.b[c];  // its attention output, 0, projected
      mlp(w[l], x);
    }
  }

  // Step 4's scoring position of cached block b of nb (Section 3.2.1): stingy, the k newest
  // landmarks at their own slot of the reserved segment (the newest in slot k, the one before in
  // k - 1, ...) and every older one at slot 0, a slot spanning F + 1 positions with the landmark
  // last; exact, its true position.
  int64_t score_position(int64_t b, int64_t nb) const {
    if (cfg.positions == PositionMode::Exact) return (blocks_done - nb + b) * (F + 1) + F;
    const int64_t age = nb - 1 - b;
    return (age < cfg.k ? cfg.k - age : 0) * (F + 1) + F;
  }

  // Step 6: the first position of each chosen block (cached indices, ascending). Exact: its true
  // position. Stingy (Section 3.2.1): chosen blocks among the k newest go to the right end of the
  // reserved segment, the newest chosen in slot k and the others left of it in order; the older
  // blocks fill slots 0, 1, ... from the left, so the order of the blocks is kept.
  std::vector<int64_t> places(const std::vector<int32_t>& chosen, int64_t nb) const {
    std::vector<int64_t> at;
    int64_t recent = 0, older = 0, seen = 0;
    for (int32_t b : chosen) recent += nb - 1 - b < cfg.k;
    for (int32_t b : chosen) {
      const int64_t slot = nb - 1 - b < cfg.k ? cfg.k - (recent - 1 - seen++) : older++;
      at.push_back(cfg.positions == PositionMode::Exact ? (blocks_done - nb + b) * (F + 1) : slot * (F + 1));
    }
    return at;
  }

  // Steps 4 and 5 for one layer: q[h][i] the chunk's rotated queries. Every (head, query) scores
  // every cached landmark, q . R(position) k_landmark / sqrt(d_head); then the top k: per (head,
  // query), or per query for all heads (the max over heads of each head's softmax over the
  // landmarks), or per head for all of the chunk's queries (the max over queries).
  std::vector<std::vector<int32_t>> retrieve(const Layer& L, const std::vector<std::vector<Vec>>& q) const {
    const int64_t nb = static_cast<int64_t>(L.blocks.size()), n = static_cast<int64_t>(q[0].size());
    std::vector<std::vector<int32_t>> sel(static_cast<size_t>(NH * n));
    if (nb == 0 || cfg.k == 0) return sel;
    std::vector<Vec> score(static_cast<size_t>(NH * n), Vec(static_cast<size_t>(nb)));
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t b = 0; b < nb; ++b) {
        const Vec key = rotated(head(L.blocks[b][F].key, h), score_position(b, nb), base);
        for (int64_t i = 0; i < n; ++i) score[h * n + i][b] = dot(q[h][i], key) / std::sqrt(static_cast<double>(HS));
      }
    if (cfg.granularity == Granularity::TokenHead) {
      for (size_t r = 0; r < sel.size(); ++r) sel[r] = top_k(score[r], cfg.k);
      return sel;
    }
    const bool per_token = cfg.granularity == Granularity::Token;
    for (int64_t a = 0; a < (per_token ? n : NH); ++a) {  // a query (token) or a head
      Vec best(static_cast<size_t>(nb), 0.0);
      for (int64_t o = 0; o < (per_token ? NH : n); ++o) {  // the heads, or the queries, it shares
        const Vec p = softmax(score[per_token ? o * n + a : a * n + o]);
        for (int64_t b = 0; b < nb; ++b) best[b] = std::max(best[b], p[b]);
      }
      const std::vector<int32_t> chosen = top_k(best, cfg.k);
      for (int64_t o = 0; o < (per_token ? NH : n); ++o) sel[per_token ? o * n + a : a * n + o] = chosen;
    }
    return sel;
  }

  // Step 7 for head h and query i (local index tl + i): its row, [CMT | each chosen block's F
  // tokens and landmark at its place | the local keys up to the query at their positions], its
  // weights, and the values they sum to. pos0: the position of the first local key.
  Vec attend(const Layer& L, const std::vector<Token>& local, const Vec& q, int64_t h, int64_t last, int64_t pos0,
             const std::vector<int32_t>& chosen, Record& rec) const {
    const int64_t nb = static_cast<int64_t>(L.blocks.size());
    std::vector<RowKey> row;
    if (g.context_miss) row.push_back({rotated(head(L.cmt_k, h), -1, base), Vec(HS, 0.0), kContextMiss});
    const std::vector<int64_t> at = places(chosen, nb);
    for (size_t c = 0; c < chosen.size(); ++c)
      for (int64_t t = 0; t <= F; ++t) {
        const Token& tok = L.blocks[chosen[c]][t];
        const int32_t kind = t < F ? kRegular : g.context_miss ? kControlledLandmark : kLandmark;  // L_CMT: the memory
        row.push_back({rotated(head(tok.key, h), at[c] + t, base), head(tok.value, h), kind});
      }
    for (int64_t j = 0; j <= last; ++j)
      row.push_back({rotated(head(local[j].key, h), pos0 + j, base), head(local[j].value, h), local[j].kind});
    bool dropped = false;
    const Vec wt = att_weight(row, q, cfg.cmt_cutoff, &dropped);
    rec.cmt_rows += g.context_miss;
    rec.cmt_dropped += dropped;
    Vec y(static_cast<size_t>(HS), 0.0);
    for (size_t j = 0; j < row.size(); ++j)
      for (int64_t e = 0; e < HS; ++e) y[e] += wt[j] * row[j].value[e];
    return y;
  }

  // One layer for the chunk's tokens x (n rows of C, updated in place); returns the local tokens
  // [tail | chunk] with their keys and values, which absorb files into the cache afterwards.
  std::vector<Token> layer(int64_t l, std::vector<Vec>& x, const std::vector<int32_t>& kinds) {
    const int64_t n = static_cast<int64_t>(x.size());
    const LayerWeights& lw = w[l];
    Layer& L = layers[l];
    std::vector<Token> local = L.tail;
    const int64_t tl = static_cast<int64_t>(local.size());
    const int64_t pos0 = cfg.positions == PositionMode::Exact ? aug_fed - tl : (cfg.k + 1) * (F + 1);
    std::vector<std::vector<Vec>> q(static_cast<size_t>(NH), std::vector<Vec>(static_cast<size_t>(n)));
    for (int64_t i = 0; i < n; ++i) {  // step 2: Q, K, V
      const Vec qkv = lw.qkv(lw.ln1(x[i]));
      local.push_back({Vec(qkv.begin() + C, qkv.begin() + 2 * C), Vec(qkv.begin() + 2 * C, qkv.end()), kinds[i]});
      for (int64_t h = 0; h < NH; ++h)
        q[h][i] = rotated(Vec(qkv.begin() + h * HS, qkv.begin() + (h + 1) * HS), pos0 + tl + i, base);
    }
    const int64_t nb = static_cast<int64_t>(L.blocks.size());
    Record rec{blocks_done - nb, nb, retrieve(L, q)};
    for (int64_t i = 0; i < n; ++i) {
      Vec att;  // the heads' outputs side by side (C)
      for (int64_t h = 0; h < NH; ++h) {
        const Vec y = attend(L, local, q[h][i], h, tl + i, pos0, rec.sel[h * n + i], rec);
        att.insert(att.end(), y.begin(), y.end());
      }
      const Vec out = lw.proj(att);
      for (int64_t c = 0; c < C; ++c) x[i][c] += out[c];
      mlp(lw, x[i]);
    }
    records.push_back(rec);
    return local;
  }

  // Step 3: every block of [tail | chunk] that a landmark closed joins the cache, the oldest
  // dropped beyond the capacity; what follows the last landmark is the new tail.
  int64_t absorb(Layer& L, const std::vector<Token>& local) const {
    int64_t finished = 0;
    L.tail.clear();
    for (const Token& t : local) {
      L.tail.push_back(t);
      if (t.kind != kLandmark) continue;
      L.blocks.push_back(std::exchange(L.tail, {}));
      ++finished;
      if (cfg.capacity > 0 && static_cast<int64_t>(L.blocks.size()) > cfg.capacity) L.blocks.pop_front();
    }
    return finished;
  }

  std::vector<Vec> feed_chunk(const std::vector<int32_t>& raw) {
    for (int32_t t : raw) LM_CHECK(t >= 0 && t < V, "reference: token " << t << " is outside the vocabulary");
    std::vector<int32_t> toks, kinds;  // step 1: a landmark after every F regular tokens
    for (int32_t t : raw) {
      toks.push_back(t);
      kinds.push_back(kRegular);
      if (++phase < F) continue;
      toks.push_back(landmark_id);
      kinds.push_back(kLandmark);
      phase = 0;
    }
    if (toks.empty()) return {};
    std::vector<Vec> x;
    for (int32_t t : toks) x.push_back(embed(t));
    std::vector<std::vector<Token>> local(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) local[l] = layer(static_cast<int64_t>(l), x, kinds);
    std::vector<Vec> logits;  // the regular positions only: one row per raw token
    for (size_t t = 0; t < toks.size(); ++t)
      if (kinds[t] == kRegular) logits.push_back(tied(ln_f(x[t])));
    int64_t finished = 0;
    for (size_t l = 0; l < layers.size(); ++l) finished = absorb(layers[l], local[l]);
    blocks_done += finished;
    aug_fed += static_cast<int64_t>(toks.size());
    return logits;
  }
};

CachedInference::CachedInference(const GPT& model, const InferConfig& cfg, int32_t landmark_id, int32_t cmt_id)
    : impl_(std::make_unique<Impl>(model, cfg, landmark_id)) {
  const GPTConfig& mc = model.config();
  LM_CHECK(mc.landmark(), "reference: cached retrieval needs a landmark model");
  LM_CHECK(cfg.chunk_len > 0 && cfg.k >= 0 && cfg.capacity >= 0, "reference: bad chunk length, k or capacity");
  LM_CHECK(!mc.context_miss || (cmt_id >= 0 && cmt_id < mc.vocab_size), "reference: the model needs its CMT id");
  if (mc.context_miss) impl_->init_cmt(cmt_id);
}

CachedInference::~CachedInference() = default;

std::vector<Vec> CachedInference::feed(const std::vector<int32_t>& raw) {
  std::vector<Vec> out;
  for (size_t at = 0; at < raw.size(); at += static_cast<size_t>(impl_->cfg.chunk_len)) {
    const size_t end = std::min(raw.size(), at + static_cast<size_t>(impl_->cfg.chunk_len));
    const std::vector<Vec> part = impl_->feed_chunk(std::vector<int32_t>(raw.begin() + at, raw.begin() + end));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::vector<Vec> CachedInference::feed_chunk(const std::vector<int32_t>& raw) { return impl_->feed_chunk(raw); }
const std::vector<Record>& CachedInference::records() const { return impl_->records; }

}  // namespace reference
}  // namespace lm
