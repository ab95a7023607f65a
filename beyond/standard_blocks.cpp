// standard_blocks.cpp: beyond the paper. A standard model read in blocks with a training-free
// scorer (standard_blocks.h).
#include "beyond/standard_blocks.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "beyond/block_scorers.h"
#include "infer/attention_record.h"
#include "infer/cpu_rows.h"
#include "infer/rotary_cache.h"
#include "infer/session.h"
#include "landmark/retrieval.h"
#include "nn/functional.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

namespace {

// One layer's memory: each cached block's un-rotated K (NH, HS, F: transposed, so that scoring
// vectorises over the block's tokens) and V (NH, F, HS), oldest first, their
// summaries, and the unfinished tail's K, V and queries (NH, tail, HS).
struct StandardLayer {
  std::vector<Tensor> keys, values;
  std::unique_ptr<BlockSummaries> sum;
  Tensor tail_k, tail_v, tail_q;
};

}  // namespace

struct StandardBlockSession::Impl {
  const GPT& model;
  BeyondConfig cfg;
  int64_t F, NH, HS, C, T;
  DType dtype;
  RotaryCache rope;
  int64_t raw_fed = 0, blocks_done = 0, chunks = 0, tail_len = 0;
  std::vector<StandardLayer> layers;
  std::vector<RetrievalRecord> log;
  std::vector<OracleAgreement> agreements;  // with mass recall: per record of `log`, as mass_recall.h keeps them
  RetrievalTrace* trace = nullptr;

  Impl(const GPT& m, const BeyondConfig& c)
      : model(m),
        cfg(c),
        F(m.config().landmark_every),
        NH(m.config().n_head),
        HS(m.config().head_size()),
        C(m.config().n_embd),
        T(m.config().block_size),
        dtype(m.wte.weight.dtype()),
        rope(m.config().head_size(), m.config().rotary_base, m.wte.weight.dtype(), Device::CPU) {
    cfg.validate();
    LM_CHECK(!m.config().landmark(), "standard blocks: a landmark model is read by InferenceSession");
    LM_CHECK(cfg.scorer != BlockScorer::Landmark,
             "--scorer landmark: a standard model has no landmark keys; choose mean, quest, reps or oracle");
    LM_CHECK(m.device() == Device::CPU && (dtype == DType::F32 || dtype == DType::F64),
             "--scorer on a standard model: the CPU, f32 or f64 (this model is " << dtype_name(dtype) << " on "
                                                                                 << device_name(m.device()) << ")");
    LM_CHECK(cfg.block_dir.empty() && !cfg.kv_f16 && !cfg.blocks_on_device && cfg.cmt_cutoff == 0,
             "--scorer on a standard model: block K/V stay in RAM as f32/f64 (no --block-dir, --kv-dtype f16, "
             "--blocks-on-device or --cmt-cutoff)");
    LM_CHECK(m.config().xl_cache == 0, "--scorer: a Transformer-XL model reads its own memory, not blocks");
    LM_CHECK(F >= 1, "standard blocks: the model's landmark_every (the block length) must be positive");
    LM_CHECK(cfg.positions == PositionMode::Exact || cfg.k * F + (F - 1) + cfg.chunk_len <= T,
             "--scorer on a standard model: k F + F - 1 + chunk = "
                 << cfg.k * F + F - 1 + cfg.chunk_len
                 << " positions (the k retrieved blocks, the tail "
                    "and the chunk) exceed the "
                 << T << " it was trained on; use a smaller --k or --chunk");
    rope.cover(0, T);  // every position used is below T (checked per chunk)
    layers.resize(static_cast<size_t>(m.config().n_layer));
    for (StandardLayer& L : layers) {
      L.sum = std::make_unique<BlockSummaries>(cfg.scorer, NH, F, HS, cfg.reps, cfg.mass_recall, dtype);
      L.tail_k = L.tail_v = L.tail_q = zeros({NH, 0, HS}, dtype);
    }
  }

  int64_t cached() const { return static_cast<int64_t>(layers[0].keys.size()); }

  // Where cached block b (of nb) sits when it is the c-th of k' chosen blocks: its first position.
  int64_t place(int64_t b, int64_t c, int64_t kchosen, int64_t nb) const {
    return cfg.positions == PositionMode::Exact ? (blocks_done - nb + b) * F : (cfg.k - kchosen + c) * F;
  }

  // Step 1: each row's top k of the scorer's scores (and, with mass recall, against the oracle).
  // With `score`, each chosen block's score too, row by row as the choice (a detailed trace).
  template <class Scalar>
  std::vector<std::vector<int32_t>> choose(const StandardLayer& L, const Tensor& q_rot, RetrievalRecord* rec,
                                           OracleAgreement* oracle, std::vector<std::vector<double>>* score) {
    const int64_t n = q_rot.size(1), nb = cached();
    std::vector<std::vector<int32_t>> sel(static_cast<size_t>(NH * n));
    if (score) score->assign(sel.size(), std::vector<double>());
    if (nb == 0 || cfg.k == 0) return sel;
    const double scale = score_scale(dtype, HS);
    static thread_local std::vector<Scalar> scores;
    rec->keys_scored = score_all_heads<Scalar>(*L.sum, cfg.scorer, q_rot.data<Scalar>(), NH, n, scale, scores);
    sel = select_blocks<Scalar>(scores.data(), NH, n, nb, cfg.k, cfg.granularity);
    if (cfg.mass_recall) *oracle = oracle_agreement<Scalar>(*L.sum, q_rot.data<Scalar>(), NH, n, scale, sel);
    if (score)
      for (size_t r = 0; r < sel.size(); ++r)
        for (int32_t b : sel[r]) (*score)[r].push_back(static_cast<double>(scores[r * static_cast<size_t>(nb) + b]));
    return sel;
  }

  // Step 2: per (head, query) the ordinary softmax over [chosen blocks at their places | tail |
  // chunk up to the query], written to out (NH, n, HS). A chosen block's keys are rotated to its
  // place while they are scored (cpu::rotated_vec_times_rows on the transposed keys and rotary
  // columns), the already rotated [tail | chunk] keys by dot products; the values are summed with
  // the normalised weights (cpu::weighted_row_sum). With `mass`, each row's weight on each chosen
  // block, then on the tail, then on the chunk (a detailed trace). The reference this must equal
  // is the model's own forward (tests/test_block_scorers.cpp, exact positions, every block chosen).
  template <class Scalar>
  void attend(const StandardLayer& L, const std::vector<std::vector<int32_t>>& sel, const Tensor& q_rot,
              const Tensor& k_rot, const Tensor& v_loc, Scalar* out, std::vector<std::vector<double>>* mass) {
    if (mass) mass->assign(sel.size(), std::vector<double>());
    const int64_t n = q_rot.size(1), Lloc = k_rot.size(1), tl = Lloc - n, nb = cached();
    const RotaryColumns<Scalar> rot = rope.columns<Scalar>(0, T);
    const Scalar scale = static_cast<Scalar>(score_scale(dtype, HS));
    const Scalar *pq = q_rot.data<Scalar>(), *pk = k_rot.data<Scalar>(), *pv = v_loc.data<Scalar>();
    cpu::parallel_for(NH * n, (cfg.k * F + Lloc) * HS * 2, [&](int64_t r0, int64_t r1) {
      std::vector<Scalar> s, w;
      std::vector<const Scalar*> vrow;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t h = r / n, i = r % n, kc = static_cast<int64_t>(sel[r].size()), len = kc * F + tl + i + 1;
        const Scalar* q = pq + r * HS;
        s.resize(static_cast<size_t>(len));
        vrow.resize(static_cast<size_t>(len));
        for (int64_t c = 0; c < kc; ++c) {
          const int32_t b = sel[r][c];
          const int64_t p0 = place(b, c, kc, nb);
          const Scalar* vb = L.values[b].data<Scalar>() + h * F * HS;
          cpu::rotated_vec_times_rows(q, L.keys[b].data<Scalar>() + h * HS * F, HS, F, F, rot.cos_at(p0),
                                      rot.sin_at(p0), rot.stride, s.data() + c * F);
          for (int64_t t = 0; t < F; ++t) vrow[c * F + t] = vb + t * HS;
        }
        for (int64_t j = 0; j <= tl + i; ++j) {
          s[kc * F + j] = cpu::dot_vectors(q, pk + (h * Lloc + j) * HS, HS);
          vrow[kc * F + j] = pv + (h * Lloc + j) * HS;
        }
        Scalar mx = s[0] * scale;
        for (Scalar& x : s) mx = std::max(mx, x *= scale);
        double z = 0;
        for (Scalar& x : s) z += static_cast<double>(x = std::exp(x - mx));
        w.resize(s.size());
        for (size_t j = 0; j < s.size(); ++j) w[j] = static_cast<Scalar>(static_cast<double>(s[j]) / z);
        cpu::weighted_row_sum(w.data(), vrow.data(), len, HS, out + r * HS);
        if (mass) (*mass)[static_cast<size_t>(r)] = row_mass(w.data(), 0, kc, F, tl, tl + i + 1);
      }
    });
  }

  // What a chunk's retrieval did in one layer, counted as the landmark path counts it.
  RetrievalRecord record(int64_t l, int64_t n, const std::vector<std::vector<int32_t>>& sel, RetrievalRecord rec) {
    rec.chunk = chunks;
    rec.layer = l;
    rec.cached = cached();
    rec.queries = n;
    rec.fetched = fetched_blocks(sel, n, cfg.granularity);
    std::vector<int32_t> all;
    for (const std::vector<int32_t>& row : sel) all.insert(all.end(), row.begin(), row.end());
    std::sort(all.begin(), all.end());
    rec.unique = static_cast<int64_t>(std::unique(all.begin(), all.end()) - all.begin());
    return rec;
  }

  // Layer l on the chunk's hidden states x (1, n, C); k_loc, v_loc, q_loc receive [tail | chunk]'s
  // un-rotated keys, values and queries (for absorb).
  Var layer_forward(size_t l, Var x, const RotaryTables& rot_local, const RotaryTables& rot_q, Tensor* k_loc,
                    Tensor* v_loc, Tensor* q_loc) {
    const int64_t n = x.value().size(1);
    const Block& blk = *model.blocks[l];
    StandardLayer& L = layers[l];
    Tensor qkv = blk.attn.qkv.forward(blk.ln1.forward(x)).value();  // (1, n, 3C)
    auto heads = [&](int64_t part) {
      return qkv.narrow(2, part * C, C).reshape({n, NH, HS}).transpose(0, 1).contiguous();
    };
    const Tensor q = heads(0), k = heads(1), v = heads(2);
    *k_loc = concat({L.tail_k, k}, 1);
    *q_loc = concat({L.tail_q, q}, 1);
    *v_loc = concat({L.tail_v, v}, 1);
    const Tensor k_rot = rotary(k_loc->unsqueeze(0), rot_local).squeeze(0).contiguous();
    const Tensor q_rot = rotary(q.unsqueeze(0), rot_q).squeeze(0).contiguous();
    RetrievalRecord rec;
    OracleAgreement oracle;
    Tensor y({NH, n, HS}, dtype, Device::CPU);
    std::vector<std::vector<int32_t>> sel;
    const bool traced = trace && raw_fed + n > trace->from_query, detail = traced && trace->detail;
    RetrievalTrace::Step st;
    LM_DISPATCH_FLOAT(dtype, "standard blocks", {
      sel = choose<scalar_t>(L, q_rot, &rec, &oracle, detail ? &st.score : nullptr);
      attend<scalar_t>(L, sel, q_rot, k_rot, *v_loc, y.data<scalar_t>(), detail ? &st.mass : nullptr);
    });
    if (traced) {
      st.layer = static_cast<int64_t>(l);
      st.aug_start = raw_fed;
      st.first_gid = blocks_done - cached();
      st.cached = cached();
      st.n = n;
      st.sel = sel;
      trace->steps.push_back(std::move(st));
    }
    log.push_back(record(static_cast<int64_t>(l), n, sel, rec));
    agreements.push_back(oracle);
    const Var att(y.transpose(0, 1).contiguous().reshape({1, n, C}));
    x = add(x, blk.attn.proj.forward(att));
    return add(x, blk.mlp.forward(blk.ln2.forward(x)));
  }

  // The chunk's finished blocks (every F tokens of [tail | chunk]) join each layer's memory.
  void absorb(const std::vector<Tensor>& kv, const std::vector<Tensor>& qs) {
    const int64_t Lloc = kv[0].size(1), done = Lloc / F;
    for (size_t l = 0; l < layers.size(); ++l) {
      StandardLayer& L = layers[l];
      const Tensor &k = kv[2 * l], &v = kv[2 * l + 1], &q = qs[l];
      for (int64_t b = 0; b < done; ++b) {
        L.keys.push_back(k.narrow(1, b * F, F).transpose(1, 2).contiguous());  // (NH, HS, F), see attend
        L.values.push_back(v.narrow(1, b * F, F).contiguous());
        summarise_block(*L.sum, k, &q, b * F, cfg.positions == PositionMode::Exact ? (blocks_done + b) * F : 0, rope);
      }
      const int64_t over = cfg.capacity > 0 ? cached() - cfg.capacity : 0;
      if (over > 0) {
        L.keys.erase(L.keys.begin(), L.keys.begin() + over);
        L.values.erase(L.values.begin(), L.values.begin() + over);
        L.sum->drop_oldest(over);
      }
      L.tail_k = k.narrow(1, done * F, Lloc - done * F).contiguous();
      L.tail_v = v.narrow(1, done * F, Lloc - done * F).contiguous();
      L.tail_q = q.narrow(1, done * F, Lloc - done * F).contiguous();
    }
    blocks_done += done;
    tail_len = Lloc - done * F;
  }

  Tensor feed_chunk(const std::vector<int32_t>& raw) {
    const int64_t n = static_cast<int64_t>(raw.size()), V = model.config().vocab_size;
    LM_CHECK(n <= cfg.chunk_len, "feed_chunk: " << n << " tokens exceed the chunk length " << cfg.chunk_len);
    for (int32_t t : raw) LM_CHECK(t >= 0 && t < V, "inference: token " << t << " is outside the vocabulary");
    if (n == 0) return zeros({0, V}, dtype);
    const int64_t tl = tail_len, base = cfg.positions == PositionMode::Exact ? raw_fed - tl : cfg.k * F;
    LM_CHECK(base + tl + n <= T, "--positions exact on a standard model: token " << raw_fed + n - 1
                                                                                 << " would sit past the " << T
                                                                                 << " positions it was trained on; "
                                                                                    "use --positions stingy");
    NoGradGuard ng;
    const RotaryTables rot_local = rope.range(base, tl + n);
    const RotaryTables rot_q{rot_local.cos.narrow(1, tl, n), rot_local.sin.narrow(1, tl, n)};
    Var x = model.wte.forward(from_vector(raw, {1, n}));
    std::vector<Tensor> kv(2 * layers.size()), qs(layers.size());
    for (size_t l = 0; l < layers.size(); ++l)
      x = layer_forward(l, x, rot_local, rot_q, &kv[2 * l], &kv[2 * l + 1], &qs[l]);
    const Tensor h = model.ln_f.forward(x).value().reshape({n, C});
    Tensor logits = matmul(h, model.wte.weight.value(), false, true);
    absorb(kv, qs);
    raw_fed += n;
    ++chunks;
    return logits;
  }
};

StandardBlockSession::StandardBlockSession(const GPT& model, const BeyondConfig& cfg)
    : impl_(std::make_unique<Impl>(model, cfg)) {}
StandardBlockSession::~StandardBlockSession() = default;
Tensor StandardBlockSession::feed_chunk(const std::vector<int32_t>& raw) { return impl_->feed_chunk(raw); }
int64_t StandardBlockSession::cached_blocks() const { return impl_->cached(); }
int64_t StandardBlockSession::tokens_fed() const { return impl_->raw_fed; }
const std::vector<RetrievalRecord>& StandardBlockSession::retrieval_log() const { return impl_->log; }
const std::vector<OracleAgreement>& StandardBlockSession::agreements() const { return impl_->agreements; }
void StandardBlockSession::set_trace(RetrievalTrace* trace) { impl_->trace = trace; }
int64_t StandardBlockSession::summary_bytes_per_block() const {
  return impl_->layers[0].sum->bytes_per_block() * static_cast<int64_t>(impl_->layers.size());
}

}  // namespace lm
