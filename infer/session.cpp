// session.cpp: InferenceSession (session.h). The dense parts of a layer (layer norms, the qkv and
// output projections, the MLP) reuse the model's own modules; the attention over
// [retrieved | tail | chunk] is in infer/chunk_attention.cpp; the knobs' names and checks in
// infer/config.cpp.
#include "infer/session.h"

#include <algorithm>

#include "autograd/functions.h"
#include "infer/block_store.h"
#include "infer/chunk_attention.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "nn/functional.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

namespace lm {

struct InferenceSession::Impl {
  const GPT& model;
  InferConfig cfg;
  int64_t F, NH, HS, C;
  DType dtype;
  Device device;  // the model's: activations, landmark keys and tails live here; block K/V on the
                  // host unless cfg.blocks_on_device
  LandmarkInserter inserter;
  RotaryCache rope;  // cos/sin rows of the positions used so far
  int64_t raw_fed = 0, aug_fed = 0, blocks_done = 0, chunks = 0;
  std::vector<LayerCache> layers;
  std::vector<RetrievalRecord> log;
  AttentionCapture* capture = nullptr;
  RetrievalTrace* trace = nullptr;
  HookList hooks;                     // the extensions attached (hooks.h)
  OneTokenPath* one_token = nullptr;  // a faster path for one-token chunks (hooks.h), or none

  Impl(const GPT& m, const InferConfig& c, int32_t landmark_id, int32_t cmt_id)
      : model(m),
        cfg(c),
        F(m.config().landmark_every),
        NH(m.config().n_head),
        HS(m.config().head_size()),
        C(m.config().n_embd),
        dtype(m.wte.weight.dtype()),
        device(m.device()),
        inserter(m.config().landmark_every, landmark_id),
        rope(m.config().head_size(), m.config().rotary_base, m.wte.weight.dtype(), m.device()) {
    cfg.validate();
    // Stingy mode puts the chunk after k reserved slots of F + 1 positions: bound k so that every
    // position stays a small i32 (the rotary tables hold only the positions in use, so k itself
    // costs no memory: infer/rotary_cache.h). 2^20 positions are 20,000 slots at F = 50, far past
    // any useful k.
    constexpr int64_t kMaxStingyPositions = int64_t(1) << 20;
    const int64_t f1 = m.config().landmark_every + 1;
    LM_CHECK(cfg.positions == PositionMode::Exact ||
                 (cfg.k < kMaxStingyPositions / f1 && cfg.chunk_len < kMaxStingyPositions &&
                  (cfg.k + 1) * f1 + cfg.chunk_len + f1 <= kMaxStingyPositions),
             "inference: k " << cfg.k << " with chunks of " << cfg.chunk_len << " would put stingy positions past "
                             << kMaxStingyPositions << " (k + 1 slots of F + 1 = " << f1
                             << " positions, then the chunk); use a smaller --k or --chunk");
    LM_CHECK(m.config().landmark(), "inference: the model was trained with "
                                        << attention_kind_name(m.config().attention)
                                        << " attention; cached retrieval needs a landmark model");
    LM_CHECK(landmark_id >= 0 && landmark_id < m.config().vocab_size,
             "inference: landmark id " << landmark_id << " is outside the vocabulary of " << m.config().vocab_size);
    LM_CHECK(m.config().context_miss || cfg.cmt_cutoff == 0,
             "inference: a CMT cutoff (" << cfg.cmt_cutoff << ") needs a model trained with a context-miss token "
                                         << "(train --cmt); this one has none");
    for (int64_t l = 0; l < m.config().n_layer; ++l) {
      layers.emplace_back(
          NH, F, HS, dtype, cfg.capacity, cfg.block_dir, device, cfg.kv_f16,
          cfg.search != KeySearch::Scan && device == Device::CPU && cfg.granularity == Granularity::TokenHead,
          cfg.blocks_on_device);
    }
    if (m.config().context_miss) {
      LM_CHECK(cmt_id >= 0 && cmt_id < m.config().vocab_size,
               "inference: the model was trained with a context-miss token; give its id (the tokenizer's <|cmt|>), got "
                   << cmt_id);
      init_cmt(cmt_id);
    }
  }

  // The CMT's key in every layer (Appendix D). In training the CMT sits first and attends to
  // nothing (its attention output is 0), so its hidden state, and with it its key, is the same for
  // every input: one pass of the token alone through the layers gives them, rotated at position
  // -1, where training puts the CMT.
  void init_cmt(int32_t cmt_id) {
    NoGradGuard ng;
    const RotaryTables at_minus_one =
        rotary_tables(from_vector(std::vector<int32_t>{-1}, {1, 1}), HS, model.config().rotary_base, dtype, device);
    Var x = model.wte.forward(from_vector(std::vector<int32_t>{cmt_id}, {1, 1}).to(device));  // (1, 1, C)
    for (size_t l = 0; l < layers.size(); ++l) {
      const Block& blk = *model.blocks[l];
      Tensor qkv = blk.attn.qkv.forward(blk.ln1.forward(x)).value();        // (1, 1, 3C)
      Tensor k = qkv.narrow(2, C, C).reshape({1, NH, HS}).transpose(0, 1);  // (NH, 1, HS)
      layers[l].cmt_key_rot = rotary(k.unsqueeze(0), at_minus_one).squeeze(0).reshape({NH, HS}).contiguous();
      x = add(x, blk.attn.proj.forward(Var(zeros({1, 1, C}, dtype, device))));  // its attention output: 0
      x = add(x, blk.mlp.forward(blk.ln2.forward(x)));
    }
  }

  // Whether an attached hook must see every token through the chunk path (hooks.h).
  bool hooks_need_chunk_path() const {
    for (const RetrievalHooks* h : hooks)
      if (h->needs_chunk_path()) return true;
    return false;
  }

  // Positions of the local sequence [tail | chunk] (tl + n entries) under the position mode.
  std::vector<int32_t> local_positions(int64_t tl, int64_t n) const {
    std::vector<int32_t> p(static_cast<size_t>(tl + n));
    const int64_t base = cfg.positions == PositionMode::Exact ? aug_fed - tl : (cfg.k + 1) * (F + 1);
    for (int64_t j = 0; j < tl + n; ++j) p[j] = static_cast<int32_t>(base + j);
    return p;
  }

  // What every layer is told about the chunk of n queries whose [tail | chunk] kinds are
  // local_kinds (it points at them).
  ChunkContext chunk_context(const std::vector<int32_t>& local_kinds, int64_t n) {
    ChunkContext ctx;
    ctx.F = F;
    ctx.k = cfg.k;
    ctx.granularity = cfg.granularity;
    ctx.positions = cfg.positions;
    ctx.blocks_done = blocks_done;
    ctx.rotary_base = model.config().rotary_base;
    ctx.cmt_cutoff = cfg.cmt_cutoff;
    ctx.hooks = hooks.empty() ? nullptr : &hooks;
    ctx.search_tiles = cfg.search == KeySearch::Approx ? cfg.search_tiles : 0;
    ctx.local_kinds = &local_kinds;
    ctx.rope = &rope;
    ctx.chunk = chunks;
    ctx.aug_start = aug_fed;
    ctx.trace = trace && aug_fed + n > trace->from_query ? trace : nullptr;
    ctx.capture = capture;  // per layer in layer_forward; any capture keeps a token off the one-token path
    return ctx;
  }

  // Layer l on the chunk's hidden states x (1, n, C): its attention over [retrieved | tail | chunk]
  // (rotary at rot_local for [tail | chunk], rot_q for the chunk's queries), then its MLP. k_loc and
  // v_loc receive the layer's un-rotated keys and values of [tail | chunk], for absorb.
  Var layer_forward(size_t l, Var x, ChunkContext& ctx, const RotaryTables& rot_local, const RotaryTables& rot_q,
                    Tensor* k_loc, Tensor* v_loc, Tensor* q_loc) {
    const int64_t n = x.value().size(1), tl = layers[0].tail_len;
    const Block& blk = *model.blocks[l];
    Tensor qkv = blk.attn.qkv.forward(blk.ln1.forward(x)).value();  // (1, n, 3C)
    auto heads = [&](int64_t part) {
      return qkv.narrow(2, part * C, C).reshape({n, NH, HS}).transpose(0, 1).contiguous();
    };
    Tensor q = heads(0), k = heads(1), v = heads(2);  // (NH, n, HS), k and v un-rotated
    LayerCache& cache = layers[l];
    *k_loc = tl > 0 ? concat({cache.tail_k, k}, 1) : k;
    *v_loc = tl > 0 ? concat({cache.tail_v, v}, 1) : v;
    if (cache.scoring && cache.scoring->needs_queries()) *q_loc = tl > 0 ? concat({cache.tail_q, q}, 1) : q;
    Tensor k_rot = rotary(k_loc->unsqueeze(0), rot_local).squeeze(0), q_rot = rotary(q.unsqueeze(0), rot_q).squeeze(0);
    ctx.layer = static_cast<int64_t>(l);
    ctx.capture = capture && capture->layer == static_cast<int64_t>(l) ? capture : nullptr;
    RetrievalRecord rec;
    Tensor y = chunk_attention(cache, ctx, q_rot, k_rot, *v_loc, &rec);  // (NH, n, HS)
    log.push_back(rec);
    Var att(y.transpose(0, 1).contiguous().reshape({1, n, C}));
    x = add(x, blk.attn.proj.forward(att));
    return add(x, blk.mlp.forward(blk.ln2.forward(x)));
  }

  // Logits of the regular positions only (kinds: the chunk's), aligned 1:1 with the raw tokens.
  Tensor regular_logits(const Var& x, const std::vector<int32_t>& kinds) const {
    const int64_t n = static_cast<int64_t>(kinds.size());
    Tensor h = model.ln_f.forward(x).value().reshape({n, C});
    std::vector<Tensor> rows;
    for (int64_t t = 0; t < n; ++t)
      if (kinds[t] == kRegular) rows.push_back(h.narrow(0, t, 1));
    return matmul(concat(rows, 0), model.wte.weight.value(), false, true);
  }

  Tensor feed_chunk(const std::vector<int32_t>& raw) {
    LM_CHECK(static_cast<int64_t>(raw.size()) <= cfg.chunk_len,
             "feed_chunk: " << raw.size() << " tokens exceed the chunk length " << cfg.chunk_len);
    for (int32_t t : raw)  // checked before anything changes state
      LM_CHECK(t >= 0 && t < model.config().vocab_size, "inference: token " << t << " is outside the vocabulary");
    std::vector<int32_t> toks, kinds;
    inserter.push(raw, toks, &kinds);
    const int64_t n = static_cast<int64_t>(toks.size());
    if (n == 0) return zeros({0, model.config().vocab_size}, dtype, device);
    NoGradGuard ng;
    const int64_t tl = layers[0].tail_len;
    std::vector<int32_t> pos = local_positions(tl, n);
    std::vector<int32_t> local_kinds(static_cast<size_t>(tl), kRegular);  // the tail holds no landmark
    local_kinds.insert(local_kinds.end(), kinds.begin(), kinds.end());
    RotaryTables rot_local = rope.tables(pos);
    RotaryTables rot_q{rot_local.cos.narrow(1, tl, n), rot_local.sin.narrow(1, tl, n)};
    ChunkContext ctx = chunk_context(local_kinds, n);

    // A generated token (a chunk of one regular token) through the one-token path, when one is set
    // and takes it.
    if (n == 1 && one_token && !hooks_need_chunk_path() && one_token->fits(model, layers, ctx)) {
      Tensor logits = one_token->step(model, layers, ctx, toks[0], pos, log);
      raw_fed += 1;
      aug_fed += 1;
      ++chunks;
      return logits;
    }

    Var x = model.wte.forward(from_vector(toks, {1, n}).to(device));  // (1, n, C)
    std::vector<Tensor> new_k(layers.size()), new_v(layers.size()), new_q(layers.size());
    for (size_t l = 0; l < layers.size(); ++l)
      x = layer_forward(l, x, ctx, rot_local, rot_q, &new_k[l], &new_v[l], &new_q[l]);
    Tensor logits = regular_logits(x, kinds);

    // The chunk's completed blocks join the caches; what follows the last landmark is the tail.
    int64_t completed = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
      completed = layers[l].absorb(new_k[l], new_v[l], local_kinds, rope, cfg.positions, blocks_done,
                                   new_q[l].defined() ? &new_q[l] : nullptr);
      ctx.layer = static_cast<int64_t>(l);
      for (RetrievalHooks* h : hooks) h->absorbed(layers[l], ctx, new_k[l], new_v[l], local_kinds);
    }
    blocks_done += completed;
    raw_fed += static_cast<int64_t>(raw.size());
    aug_fed += n;
    ++chunks;
    return logits;
  }
};

InferenceSession::InferenceSession(const GPT& model, const InferConfig& cfg, int32_t landmark_id, int32_t cmt_id)
    : impl_(std::make_unique<Impl>(model, cfg, landmark_id, cmt_id)), cfg_(cfg) {}
InferenceSession::InferenceSession(std::unique_ptr<ChunkReader> reader, const InferConfig& cfg)
    : other_(std::move(reader)), cfg_(cfg) {
  LM_CHECK(other_ != nullptr, "InferenceSession: no reader given");
}
InferenceSession::~InferenceSession() = default;
InferenceSession::InferenceSession(InferenceSession&&) noexcept = default;

// The end of a reading: the chunk path's shared rotated keys and this thread's idle small
// buffers (tensor/storage.h) go back, so that between readings a session's memory is its caches.
// Measured at 32k tokens (bench_decode, the demo's shape): 18.5 MB and 5.4 MB.
void InferenceSession::release_scratch() {
  release_chunk_scratch();
  host_release_cached();
}

// The length limit (set_token_limit), checked before a reading starts (not at the chunk that passes it).
void InferenceSession::check_length(size_t more) const {
  const int64_t total = tokens_fed() + static_cast<int64_t>(more);
  LM_CHECK(token_limit_ == 0 || total <= token_limit_,
           token_limit_why_ << " up to " << token_limit_ << " tokens; this one reaches " << total);
}
void InferenceSession::set_token_limit(int64_t tokens, const std::string& why) {
  token_limit_ = tokens;
  token_limit_why_ = why;
}
void InferenceSession::set_block_scoring(const std::function<std::unique_ptr<BlockScoring>(int64_t layer)>& make) {
  LM_CHECK(impl_ && tokens_fed() == 0, "inference: a block scoring is set on a landmark model's fresh session");
  for (size_t l = 0; l < impl_->layers.size(); ++l) impl_->layers[l].scoring = make(static_cast<int64_t>(l));
}

Tensor InferenceSession::chunk(const std::vector<int32_t>& raw) {
  check_length(raw.size());
  return other_ ? other_->feed_chunk(raw) : impl_->feed_chunk(raw);
}

Tensor InferenceSession::feed(const std::vector<int32_t>& raw, const std::function<void(int64_t, int64_t)>& progress) {
  check_length(raw.size());
  std::vector<Tensor> parts;
  const size_t len = static_cast<size_t>(cfg_.chunk_len);
  for (size_t at = 0; at < raw.size(); at += len) {
    size_t end = std::min(raw.size(), at + len);
    parts.push_back(chunk(std::vector<int32_t>(raw.begin() + at, raw.begin() + end)));
    if (progress) progress(static_cast<int64_t>(end), static_cast<int64_t>(raw.size()));
  }
  Tensor out = parts.empty() ? chunk({}) : parts.size() == 1 ? parts[0] : concat(parts, 0);
  parts.clear();
  release_scratch();
  return out;
}

Tensor InferenceSession::read(const std::vector<int32_t>& raw, const std::function<void(int64_t, int64_t)>& progress) {
  LM_CHECK(!raw.empty(), "inference: read() needs at least one token");
  check_length(raw.size());
  Tensor last;
  const size_t len = static_cast<size_t>(cfg_.chunk_len);
  for (size_t at = 0; at < raw.size(); at += len) {
    size_t end = std::min(raw.size(), at + len);
    const Tensor logits = chunk(std::vector<int32_t>(raw.begin() + at, raw.begin() + end));
    last = logits.narrow(0, logits.size(0) - 1, 1).contiguous();  // a copy: the chunk's logits go
    if (progress) progress(static_cast<int64_t>(end), static_cast<int64_t>(raw.size()));
  }
  release_scratch();
  return last;
}

Tensor InferenceSession::feed_chunk(const std::vector<int32_t>& raw) { return chunk(raw); }
int64_t InferenceSession::cached_blocks() const {
  return other_ ? other_->cached_blocks() : impl_->layers[0].store->size();
}
int64_t InferenceSession::tokens_fed() const { return other_ ? other_->tokens_fed() : impl_->raw_fed; }
int64_t InferenceSession::augmented_fed() const { return other_ ? other_->tokens_fed() : impl_->aug_fed; }
const std::vector<RetrievalRecord>& InferenceSession::retrieval_log() const {
  return other_ ? other_->retrieval_log() : impl_->log;
}
void InferenceSession::attach(RetrievalHooks* h) {
  LM_CHECK(impl_ && h, "inference: extensions attach to a landmark model's session (not a standard model's)");
  impl_->hooks.push_back(h);
}
void InferenceSession::set_capture(AttentionCapture* c) {
  LM_CHECK(!other_ || c == nullptr, "attention capture (attn-map, explore) needs a landmark model");
  if (impl_) impl_->capture = c;
}
void InferenceSession::set_trace(RetrievalTrace* t) {
  if (other_)
    other_->set_trace(t);
  else
    impl_->trace = t;
}
const InferConfig& InferenceSession::config() const { return other_ ? cfg_ : impl_->cfg; }
void InferenceSession::set_one_token_path(OneTokenPath* path) {
  if (impl_) impl_->one_token = path;
}
int64_t InferenceSession::rotary_rows() const { return other_ ? 0 : impl_->rope.rows_held(); }
int64_t InferenceSession::blocks_read() const {
  int64_t n = 0;
  if (impl_)
    for (const LayerCache& layer : impl_->layers) n += layer.store->blocks_read();
  return n;
}
int64_t InferenceSession::summary_bytes_per_block() const {
  if (other_) return other_->summary_bytes_per_block();
  int64_t n = 0;
  for (const LayerCache& layer : impl_->layers)
    n += layer.scoring ? layer.scoring->bytes_per_block()
                       : layer.NH * layer.HS * static_cast<int64_t>(dtype_size(layer.dtype));
  return n;
}
void InferenceSession::move_blocks_to_host() {
  if (!impl_) return;
  for (LayerCache& layer : impl_->layers) layer.store->move_to_host();
  impl_->cfg.blocks_on_device = false;
}

Tensor one_shot_logits(const GPT& model, const std::vector<int32_t>& raw, int32_t landmark_id, int64_t phase,
                       const OneShotCmt& cmt) {
  NoGradGuard ng;
  const bool has_cmt = model.config().context_miss;
  LM_CHECK(!has_cmt || (cmt.id >= 0 && cmt.id < model.config().vocab_size),
           "one_shot_logits: the model was trained with a context-miss token; give its id, got " << cmt.id);
  LM_CHECK(cmt.chunk_len >= 0, "one_shot_logits: chunk length must be >= 0, got " << cmt.chunk_len);
  std::vector<int32_t> toks, kinds, pos, chunk_of;  // chunk_of: the chunk a cached reading puts each position in
  if (has_cmt) {
    toks.push_back(cmt.id);
    kinds.push_back(kContextMiss);
    pos.push_back(-1);
    chunk_of.push_back(0);
  }
  LandmarkInserter ins(model.config().landmark_every, landmark_id, phase);
  const int64_t per_chunk = cmt.chunk_len > 0 ? cmt.chunk_len : std::max<int64_t>(1, static_cast<int64_t>(raw.size()));
  for (size_t at = 0; at < raw.size(); at += static_cast<size_t>(per_chunk)) {  // the session's chunks
    const size_t end = std::min(raw.size(), at + static_cast<size_t>(per_chunk));
    const size_t before = toks.size();
    ins.push(std::vector<int32_t>(raw.begin() + at, raw.begin() + end), toks, &kinds);
    chunk_of.resize(toks.size(), static_cast<int32_t>(at / static_cast<size_t>(per_chunk)));
    for (size_t j = before; j < toks.size(); ++j) pos.push_back(static_cast<int32_t>(pos.empty() ? 0 : pos.back() + 1));
  }
  const int64_t n = static_cast<int64_t>(toks.size()), chunks = chunk_of.empty() ? 0 : chunk_of.back() + 1;
  const Tensor kinds_t = from_vector(kinds, {1, n}), positions = from_vector(pos, {1, n});
  AttentionFn core;
  if (!has_cmt || chunks <= 1) {
    LandmarkLayout layout = make_layout(kinds_t, model.device());
    layout.cmt_cutoff = cmt.cutoff;
    core = landmark_attention_core(layout);
  } else {
    // Per chunk c: the landmarks of earlier chunks are controlled (memory), the rest free; the
    // rows of chunk c come from the forward with that layout (causal, so later rows do not matter).
    std::vector<LandmarkLayout> layouts;
    std::vector<int64_t> starts;
    for (int32_t c = 0; c < chunks; ++c) {
      std::vector<int32_t> kc = kinds;
      for (int64_t j = 0; j < n; ++j)
        if (kc[j] == kLandmark && chunk_of[j] < c) kc[j] = kControlledLandmark;
      layouts.push_back(make_layout(from_vector(kc, {1, n}), model.device()));
      layouts.back().cmt_cutoff = cmt.cutoff;
      starts.push_back(std::find(chunk_of.begin(), chunk_of.end(), c) - chunk_of.begin());
    }
    starts.push_back(n);
    core = [layouts, starts](const Var& q, const Var& k, const Var& v) {
      std::vector<Tensor> parts;
      for (size_t c = 0; c < layouts.size(); ++c)
        parts.push_back(
            landmark_attention(q, k, v, layouts[c]).value().narrow(2, starts[c], starts[c + 1] - starts[c]));
      return Var(concat(parts, 2));
    };
  }
  Tensor logits = model.forward(from_vector(toks, {1, n}), positions, core).value();  // (1, n, V)
  return select_regular(logits, kinds_t).squeeze(0);
}

}  // namespace lm
