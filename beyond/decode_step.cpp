// Beyond the paper: the one-token step of decode_step.h.
// decode_step.cpp: one token through every layer in one parallel region (decode_step.h).
//
// Per layer, with T threads (thread t owns a contiguous share of every product's output columns
// and of the heads):
//   A. ln1 (each thread, privately) and the qkv columns it owns            -> barrier
//   B. per owned head: rotary, the head's new tail, retrieval (select_head,
//      block_places), then the row (attend_row)                            -> barrier
//      (a store that must fetch blocks first: a barrier after retrieval, one thread fetches)
//   C. x += proj(att), owned columns                                       -> barrier
//   D. ln2 (privately) and the fc columns it owns, GELU                    -> barrier
//   E. x += proj(gelu(fc)), owned columns                                  -> barrier
// then ln_f and the owned logits. Every value is computed by exactly one thread with the same
// sums as the chunk path, so the thread count does not change the bits either.
// In the code: StepState is what the threads share, Worker one thread's part, layer_step steps A
// to E (attend_heads step B), run_thread one thread's whole step, finish_step the new tails and
// the records.
#include "beyond/decode_step.h"

#include <algorithm>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "infer/attention_record.h"
#include "infer/cpu_rows.h"
#include "landmark/tokens.h"
#include "nn/nn_math.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/layernorm_row.h"
#include "tensor/cpu/parallel.h"
#include "tensor/elementwise_math.h"

namespace lm {

bool decode_step_fits(const GPT& model, const std::vector<LayerCache>& layers, const ChunkContext& ctx) {
  const DType dt = model.wte.weight.dtype();
  if (model.device() != Device::CPU || (dt != DType::F32 && dt != DType::F64)) return false;
  if (model.is_training() && model.config().dropout > 0) return false;
  if (ctx.granularity != Granularity::TokenHead || ctx.capture || ctx.trace) return false;
  for (const LayerCache& c : layers)
    if (c.indexed || c.scoring || c.device != Device::CPU || c.dtype != dt) return false;
  return !layers.empty();
}

namespace {

// The share [begin, end) of n items that thread t of T owns.
struct Share {
  int64_t begin, end;
};
Share share_of(int64_t n, int t, int T) {
  const int64_t per = n / T, extra = n % T;
  const int64_t begin = t * per + std::min<int64_t>(t, extra);
  return {begin, begin + per + (t < extra ? 1 : 0)};
}

// y[j] = x . W[j] (+ b[j]) for the owned rows j of W (out, in): what Linear::forward gives one row
// (the GEMM's one-row path, cpu::gemv_rows, then the bias added).
template <class Scalar>
void linear_rows(const Scalar* x, const Scalar* W, const Scalar* b, int64_t in, Share s, Scalar* y) {
  cpu::gemv_rows(x, W, in, in, s.begin, s.end, y);
  if (b)
    for (int64_t j = s.begin; j < s.end; ++j) y[j] = y[j] + b[j];
}

// The weights of one layer as raw pointers (the tensors stay owned by the model).
template <class Scalar>
struct LayerWeights {
  const Scalar *ln1_w, *ln1_b, *ln2_w, *ln2_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
  double eps1, eps2;
};
template <class Scalar>
const Scalar* ptr(const Var& v) {  // null for an absent bias
  if (!v.defined()) return nullptr;
  LM_CHECK(v.value().is_contiguous(), "decode_step: a weight " << describe(v.value()) << " is not contiguous");
  return v.value().data<Scalar>();
}

// Every layer's weights as raw pointers.
template <class Scalar>
std::vector<LayerWeights<Scalar>> layer_weights(const GPT& model, int64_t nl) {
  std::vector<LayerWeights<Scalar>> lw(static_cast<size_t>(nl));
  for (int64_t l = 0; l < nl; ++l) {
    const Block& b = *model.blocks[static_cast<size_t>(l)];
    lw[l] = {ptr<Scalar>(b.ln1.weight),
             ptr<Scalar>(b.ln1.bias),
             ptr<Scalar>(b.ln2.weight),
             ptr<Scalar>(b.ln2.bias),
             ptr<Scalar>(b.attn.qkv.weight),
             ptr<Scalar>(b.attn.qkv.bias),
             ptr<Scalar>(b.attn.proj.weight),
             ptr<Scalar>(b.attn.proj.bias),
             ptr<Scalar>(b.mlp.fc.weight),
             ptr<Scalar>(b.mlp.fc.bias),
             ptr<Scalar>(b.mlp.proj.weight),
             ptr<Scalar>(b.mlp.proj.bias),
             b.ln1.eps,
             b.ln2.eps};
  }
  return lw;
}

// The rotary rows every thread reads: transposed for the retrieved blocks' keys (RowInput), as
// rows for the query and the local keys (position p: HS/2 values at + (p - origin) * HS/2).
template <class Scalar>
struct RotaryRows {
  RotaryColumns<Scalar> cols;
  const Scalar *cos_r, *sin_r;
  int64_t origin;  // the position of row 0
};

// The rows covered here first, before the threads start (growing moves the tables): the local
// positions and every position retrieval may use (retrieval_positions: the stingy slots, scoring
// and placing, or every block's true place).
template <class Scalar>
RotaryRows<Scalar> cover_rotary(RotaryCache& rope, const std::vector<int32_t>& positions, const ChunkContext& ctx,
                                int64_t nb) {
  const PositionSpan span = retrieval_positions(ctx, nb);
  int64_t lo = *std::min_element(positions.begin(), positions.end()),
          hi = *std::max_element(positions.begin(), positions.end()) + 1;
  if (span.hi > span.lo) {
    lo = std::min(lo, span.lo);
    hi = std::max(hi, span.hi);
  }
  RotaryRows<Scalar> r;
  r.cols = rope.columns<Scalar>(lo, hi);
  r.cos_r = rope.cos_rows<Scalar>(lo, hi - lo);  // row 0: position lo
  r.sin_r = rope.sin_rows<Scalar>(lo, hi - lo);
  r.origin = lo;
  return r;
}

// What the threads of one step share: the weights and rotary rows (read only), the token's
// activations (each value written by one thread between two barriers), every layer's new tail
// (the old one and the token's key/value), and per layer what retrieval chose and whether S(CMT)
// fell below the cutoff (per head).
template <class Scalar>
struct StepState {
  const GPT& model;
  std::vector<LayerCache>& layers;
  const ChunkContext& ctx0;
  const std::vector<int32_t>& positions;
  int64_t C, NH, HS, V, H4, nl, tl, L;
  std::vector<LayerWeights<Scalar>> lw;
  const Scalar *wte, *lnf_w, *lnf_b;
  RotaryRows<Scalar> rot;
  std::vector<Scalar> x, qkv, att, out, hid;
  std::vector<Tensor> new_k, new_v;  // per layer (NH, L, HS)
  Tensor logits;                     // (1, V)
  std::vector<RetrievalPlan> plans;  // per layer: sel, one row per head
  std::vector<uint8_t> dropped;      // (nl, NH)
  bool must_fetch;
  std::exception_ptr failure;  // an exception may not leave the parallel region: kept, rethrown after

  StepState(const GPT& m, std::vector<LayerCache>& ls, const ChunkContext& ctx, int32_t token,
            const std::vector<int32_t>& pos)
      : model(m), layers(ls), ctx0(ctx), positions(pos) {
    const GPTConfig& cfg = model.config();
    C = cfg.n_embd;
    NH = cfg.n_head;
    HS = cfg.head_size();
    V = cfg.vocab_size;
    H4 = 4 * C;
    nl = static_cast<int64_t>(layers.size());
    tl = layers[0].tail_len;
    L = tl + 1;
    const DType dt = model.wte.weight.dtype();
    lw = layer_weights<Scalar>(model, nl);
    wte = ptr<Scalar>(model.wte.weight);
    lnf_w = ptr<Scalar>(model.ln_f.weight);
    lnf_b = ptr<Scalar>(model.ln_f.bias);
    rot = cover_rotary<Scalar>(*ctx0.rope, positions, ctx0, layers[0].store->size());
    x.resize(static_cast<size_t>(C));
    qkv.resize(static_cast<size_t>(3 * C));
    att.resize(static_cast<size_t>(C));
    out.resize(static_cast<size_t>(C));
    hid.resize(static_cast<size_t>(H4));
    std::copy(wte + token * C, wte + (token + 1) * C, x.begin());
    new_k.resize(static_cast<size_t>(nl));
    new_v.resize(static_cast<size_t>(nl));
    for (int64_t l = 0; l < nl; ++l) {
      new_k[l] = Tensor({NH, L, HS}, dt, Device::CPU);
      new_v[l] = Tensor({NH, L, HS}, dt, Device::CPU);
    }
    logits = Tensor({1, V}, dt, Device::CPU);
    // Each layer's plan as the chunk path makes it for a chunk of one: every cached landmark
    // scored (the scan) when there is anything to retrieve.
    plans.resize(static_cast<size_t>(nl));
    for (int64_t l = 0; l < nl; ++l) {
      RetrievalPlan& p = plans[l];
      p.nb = layers[l].store->size();
      p.first_gid = ctx0.blocks_done - p.nb;
      p.sel.resize(static_cast<size_t>(NH));
      p.keys_scored = p.nb > 0 && ctx0.k > 0 ? NH * p.nb : 0;
    }
    dropped.assign(static_cast<size_t>(nl * NH), 0);
    must_fetch = layers[0].store->needs_fetch();
  }
};

// One thread's part of a step: thread t of nt owns a share of every product's output columns and
// of the heads; privately it keeps a layer norm's output and, per owned head, the rotated query
// and local keys.
template <class Scalar>
struct Worker {
  Share cols3, cols, cols4, heads, vocab;
  std::vector<Scalar> ln, q, kt;
  Worker(const StepState<Scalar>& s, int t, int nt)
      : cols3(share_of(3 * s.C, t, nt)),
        cols(share_of(s.C, t, nt)),
        cols4(share_of(s.H4, t, nt)),
        heads(share_of(s.NH, t, nt)),
        vocab(share_of(s.V, t, nt)) {
    const int64_t owned = heads.end - heads.begin;
    ln.resize(static_cast<size_t>(s.C));
    q.resize(static_cast<size_t>(owned * s.HS));
    kt.resize(static_cast<size_t>(owned * s.HS * s.L));
  }
};

// Head h's new tail in layer l: the old tail, then the token's key and value from qkv.
template <class Scalar>
void new_tail(StepState<Scalar>& s, int64_t l, int64_t h) {
  const int64_t HS = s.HS, L = s.L, tl = s.tl;
  const LayerCache& cache = s.layers[l];
  Scalar* nk = s.new_k[l].template data<Scalar>() + h * L * HS;
  Scalar* nv = s.new_v[l].template data<Scalar>() + h * L * HS;
  if (tl > 0) {
    std::copy_n(cache.tail_k.data<Scalar>() + h * tl * HS, tl * HS, nk);
    std::copy_n(cache.tail_v.data<Scalar>() + h * tl * HS, tl * HS, nv);
  }
  std::copy_n(s.qkv.data() + s.C + h * HS, HS, nk + tl * HS);
  std::copy_n(s.qkv.data() + 2 * s.C + h * HS, HS, nv + tl * HS);
}

// The query of head h at its position and the head's local keys at theirs, transposed (HS, L), as
// the chunk path's rotary op and transpose give them, into the worker's private buffers.
template <class Scalar>
void rotate_head(const StepState<Scalar>& s, Worker<Scalar>& w, int64_t l, int64_t h) {
  const int64_t HS = s.HS, L = s.L, half = HS / 2;
  const std::vector<int32_t>& positions = s.positions;
  Scalar* q_h = w.q.data() + (h - w.heads.begin) * HS;
  Scalar* kt_h = w.kt.data() + (h - w.heads.begin) * HS * L;
  const Scalar* qh = s.qkv.data() + h * HS;
  const Scalar* nk = s.new_k[l].template data<Scalar>() + h * L * HS;
  const int64_t at_q = (positions[s.tl] - s.rot.origin) * half;  // the query's row
  const Scalar *cq = s.rot.cos_r + at_q, *sq = s.rot.sin_r + at_q;
  for (int64_t i = 0; i < half; ++i)
    nnmath::rotate_pair(qh[2 * i], qh[2 * i + 1], cq[i], sq[i], q_h[2 * i], q_h[2 * i + 1]);
  for (int64_t j = 0; j < L; ++j) {
    const int64_t at_k = (positions[j] - s.rot.origin) * half;  // key j's row
    const Scalar *ck = s.rot.cos_r + at_k, *sk = s.rot.sin_r + at_k, *kj = nk + j * HS;
    for (int64_t i = 0; i < half; ++i)
      nnmath::rotate_pair(kj[2 * i], kj[2 * i + 1], ck[i], sk[i], kt_h[(2 * i) * L + j], kt_h[(2 * i + 1) * L + j]);
  }
}

// Steps 2 and 3 for the rotated head h of layer l: its blocks' places, then its row (attend_row)
// into att.
template <class Scalar>
void attend_head(StepState<Scalar>& s, Worker<Scalar>& w, const ChunkContext& ctx, int64_t l, int64_t h) {
  // One row's scratch per thread, kept between calls.
  static thread_local RowScratch<Scalar> scratch;
  const int64_t HS = s.HS, L = s.L, nb = s.plans[l].nb;
  const std::vector<int32_t>& chosen = s.plans[l].sel[h];
  const std::vector<int32_t> places = block_places(chosen, ctx, nb, ctx.blocks_done - nb);
  RowInput<Scalar> in;
  in.q = w.q.data() + (h - w.heads.begin) * HS;
  in.chosen = &chosen;
  in.places = &places;
  in.keys_t = w.kt.data() + (h - w.heads.begin) * HS * L;
  in.ld = L;
  in.values = s.new_v[l].template data<Scalar>() + h * L * HS;
  in.nloc = L;
  in.local_kinds = ctx.local_kinds->data();
  in.rot = s.rot.cols;
  in.head = h;
  attend_row(s.layers[l], ctx, in, scratch, s.att.data() + h * HS, &s.dropped[l * s.NH + h]);
}

// B. the owned heads of layer l: the new tail, rotary, retrieval (select_head), then the rows.
// A store that must fetch its blocks first: a barrier after retrieval, one thread fetches every
// head's blocks at once, then the rows.
template <class Scalar>
void attend_heads(StepState<Scalar>& s, Worker<Scalar>& w, const ChunkContext& ctx, int64_t l) {
  LayerCache& cache = s.layers[l];
  const int64_t nb = s.plans[l].nb;
  for (int64_t h = w.heads.begin; h < w.heads.end; ++h) {
    new_tail(s, l, h);
    rotate_head(s, w, l, h);
    std::vector<int32_t>& chosen = s.plans[l].sel[h];
    chosen.clear();
    if (nb > 0 && ctx.k > 0) select_head<Scalar>(cache, ctx, w.q.data() + (h - w.heads.begin) * s.HS, 1, h, &chosen);
  }
  if (!s.must_fetch)  // blocks readable in place: the rows at once
    for (int64_t h = w.heads.begin; h < w.heads.end; ++h) attend_head(s, w, ctx, l, h);
  if (s.must_fetch) {
#pragma omp barrier
#pragma omp single
    {
      try {
        cache.store->fetch(plan_blocks(s.plans[l]));
      } catch (...) {
        s.failure = std::current_exception();
      }
    }  // (an implicit barrier)
    if (!s.failure)
      for (int64_t h = w.heads.begin; h < w.heads.end; ++h) attend_head(s, w, ctx, l, h);
  }
}

// Layer l, steps A to E, this worker's part; every step ends at a barrier.
template <class Scalar>
void layer_step(StepState<Scalar>& s, Worker<Scalar>& w, int64_t l) {
  const LayerWeights<Scalar>& lw = s.lw[l];
  const int64_t C = s.C;
  ChunkContext ctx = s.ctx0;
  ctx.layer = l;
  // A. ln1, qkv
  cpu::layernorm_row(s.x.data(), lw.ln1_w, lw.ln1_b, C, lw.eps1, w.ln.data());
  linear_rows(w.ln.data(), lw.qkv_w, lw.qkv_b, C, w.cols3, s.qkv.data());
#pragma omp barrier
  // B. the heads
  attend_heads(s, w, ctx, l);
#pragma omp barrier
  // C. x += proj(att)
  linear_rows(s.att.data(), lw.proj_w, lw.proj_b, C, w.cols, s.out.data());
  for (int64_t j = w.cols.begin; j < w.cols.end; ++j) s.x[j] = s.x[j] + s.out[j];
#pragma omp barrier
  // D. ln2, fc, GELU
  cpu::layernorm_row(s.x.data(), lw.ln2_w, lw.ln2_b, C, lw.eps2, w.ln.data());
  linear_rows(w.ln.data(), lw.fc_w, lw.fc_b, C, w.cols4, s.hid.data());
  for (int64_t j = w.cols4.begin; j < w.cols4.end; ++j) s.hid[j] = math::gelu(s.hid[j]);
#pragma omp barrier
  // E. x += proj(hid)
  linear_rows(s.hid.data(), lw.fc2_w, lw.fc2_b, s.H4, w.cols, s.out.data());
  for (int64_t j = w.cols.begin; j < w.cols.end; ++j) s.x[j] = s.x[j] + s.out[j];
#pragma omp barrier
}

// Thread t of nt: every layer, then the owned logits (ln_f, then the tied embedding's rows).
template <class Scalar>
void run_thread(StepState<Scalar>& s, int t, int nt) {
  Worker<Scalar> w(s, t, nt);
  for (int64_t l = 0; l < s.nl; ++l) layer_step(s, w, l);
  cpu::layernorm_row(s.x.data(), s.lnf_w, s.lnf_b, s.C, s.model.ln_f.eps, w.ln.data());
  linear_rows<Scalar>(w.ln.data(), s.wte, nullptr, s.C, w.vocab, s.logits.template data<Scalar>());
}

// After the step: the token joins every layer's tail (it is regular: no block completes), and each
// layer's record is what chunk_attention reports for a chunk of one.
template <class Scalar>
void finish_step(StepState<Scalar>& s, std::vector<RetrievalRecord>& log) {
  const bool cmt = s.layers[0].cmt_key_rot.defined();
  for (int64_t l = 0; l < s.nl; ++l) {
    LayerCache& cache = s.layers[l];
    cache.tail_k = s.new_k[l];
    cache.tail_v = s.new_v[l];
    cache.tail_len = s.L;
    CmtCount count;
    if (cmt) {
      count.rows = s.NH;
      for (int64_t h = 0; h < s.NH; ++h) count.dropped += s.dropped[l * s.NH + h];
    }
    ChunkContext ctx = s.ctx0;
    ctx.layer = l;
    log.push_back(retrieval_record(ctx, s.plans[l], 1, count));
  }
}

template <class Scalar>
Tensor decode_step_impl(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx0, int32_t token,
                        const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log) {
  const GPTConfig& cfg = model.config();
  const int64_t C = cfg.n_embd, NH = cfg.n_head, V = cfg.vocab_size, tl = layers[0].tail_len, L = tl + 1;
  LM_CHECK(static_cast<int64_t>(positions.size()) == L && ctx0.local_kinds &&
               static_cast<int64_t>(ctx0.local_kinds->size()) == L && ctx0.rope,
           "decode_step: " << positions.size() << " positions for a tail of " << tl << " and one token");
  LM_CHECK(token >= 0 && token < V, "decode_step: token " << token << " is outside the vocabulary of " << V);
  StepState<Scalar> s(model, layers, ctx0, token, positions);

  // Threads meet at five barriers per layer. Spinning idle threads answer one in well under a
  // microsecond; sleeping ones (OMP_WAIT_POLICY=PASSIVE) take tens of microseconds to wake, which
  // made the step 2.2 times slower than the chunk path (0.78 against 0.35 ms at 32k). The
  // parallel grain says which (tensor/cpu/parallel.h): threads only when the smallest product
  // between two barriers, C x C, is worth a parallel loop. (Read only by the pragma: unused in a
  // build without OpenMP, such as the fuzzing build.)
  [[maybe_unused]] const int T =
      C * C >= cpu::parallel_grain() ? std::max(1, static_cast<int>(std::min<int64_t>(cpu::num_threads(), NH))) : 1;
#pragma omp parallel num_threads(T) if (T > 1)
  {
#ifdef _OPENMP
    run_thread(s, omp_get_thread_num(), omp_get_num_threads());
#else
    run_thread(s, 0, 1);
#endif
  }
  if (s.failure) std::rethrow_exception(s.failure);
  finish_step(s, log);
  return s.logits;
}

}  // namespace

Tensor decode_step(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx, int32_t token,
                   const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log) {
  LM_CHECK(decode_step_fits(model, layers, ctx), "decode_step: this model, cache or context needs the chunk path");
  if (model.wte.weight.dtype() == DType::F64)
    return decode_step_impl<double>(model, layers, ctx, token, positions, log);
  return decode_step_impl<float>(model, layers, ctx, token, positions, log);
}

}  // namespace lm
