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
#include "infer/decode_step.h"

#include <algorithm>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

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
    if (c.indexed || c.device != Device::CPU || c.dtype != dt) return false;
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
template <class Scalar> void linear_rows(const Scalar* x, const Scalar* W, const Scalar* b, int64_t in, Share s,
                                         Scalar* y) {
  cpu::gemv_rows(x, W, in, in, s.begin, s.end, y);
  if (b)
    for (int64_t j = s.begin; j < s.end; ++j) y[j] = y[j] + b[j];
}

// The weights of one layer as raw pointers (the tensors stay owned by the model).
template <class Scalar> struct LayerWeights {
  const Scalar *ln1_w, *ln1_b, *ln2_w, *ln2_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
  double eps1, eps2;
};
template <class Scalar> const Scalar* ptr(const Var& v) {  // null for an absent bias
  if (!v.defined()) return nullptr;
  LM_CHECK(v.value().is_contiguous(), "decode_step: a weight " << describe(v.value()) << " is not contiguous");
  return v.value().data<Scalar>();
}

template <class Scalar>
Tensor decode_step_impl(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx0, int32_t token,
                        const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log) {
  const GPTConfig& cfg = model.config();
  const int64_t C = cfg.n_embd, NH = cfg.n_head, HS = cfg.head_size(), V = cfg.vocab_size, H4 = 4 * C;
  const int64_t nl = static_cast<int64_t>(layers.size()), F = ctx0.F, B1 = F + 1;
  const int64_t tl = layers[0].tail_len, L = tl + 1;
  const DType dt = model.wte.weight.dtype();
  LM_CHECK(static_cast<int64_t>(positions.size()) == L && ctx0.local_kinds &&
               static_cast<int64_t>(ctx0.local_kinds->size()) == L && ctx0.rope,
           "decode_step: " << positions.size() << " positions for a tail of " << tl << " and one token");
  LM_CHECK(token >= 0 && token < V, "decode_step: token " << token << " is outside the vocabulary of " << V);
  std::vector<LayerWeights<Scalar>> lw(static_cast<size_t>(nl));
  for (int64_t l = 0; l < nl; ++l) {
    const Block& b = *model.blocks[static_cast<size_t>(l)];
    lw[l] = {ptr<Scalar>(b.ln1.weight), ptr<Scalar>(b.ln1.bias), ptr<Scalar>(b.ln2.weight), ptr<Scalar>(b.ln2.bias),
             ptr<Scalar>(b.attn.qkv.weight), ptr<Scalar>(b.attn.qkv.bias), ptr<Scalar>(b.attn.proj.weight),
             ptr<Scalar>(b.attn.proj.bias), ptr<Scalar>(b.mlp.fc.weight), ptr<Scalar>(b.mlp.fc.bias),
             ptr<Scalar>(b.mlp.proj.weight), ptr<Scalar>(b.mlp.proj.bias), b.ln1.eps, b.ln2.eps};
  }
  const Scalar* wte = ptr<Scalar>(model.wte.weight);
  const Scalar* lnf_w = ptr<Scalar>(model.ln_f.weight);
  const Scalar* lnf_b = ptr<Scalar>(model.ln_f.bias);

  // The rotary rows every thread will read, grown here first (growing moves the tables): the
  // local positions, the stingy slots (scoring and placing), or every block's true place.
  RotaryCache& rope = *ctx0.rope;
  int64_t reach = *std::max_element(positions.begin(), positions.end()) + 1;
  reach = std::max(reach, ctx0.positions == PositionMode::Stingy ? (ctx0.k + 1) * B1 : ctx0.blocks_done * B1);
  rope.cos_rows<Scalar>(0, reach);
  rope.sin_rows<Scalar>(0, reach);
  const Scalar* cos_t = rope.cos_cols<Scalar>(reach);
  const Scalar* sin_t = rope.sin_cols<Scalar>(reach);
  const Scalar* cos_r = rope.cos_rows<Scalar>(0, reach);  // row p: HS/2 values at + p * HS/2
  const Scalar* sin_r = rope.sin_rows<Scalar>(0, reach);
  const int64_t cstride = rope.col_stride(), half = HS / 2;

  // Shared buffers, and every layer's new tail (the old one and the token's key/value).
  std::vector<Scalar> x(static_cast<size_t>(C)), qkv(static_cast<size_t>(3 * C)), att(static_cast<size_t>(C)),
      out(static_cast<size_t>(C)), hid(static_cast<size_t>(H4));
  std::copy(wte + token * C, wte + (token + 1) * C, x.begin());
  std::vector<Tensor> new_k(static_cast<size_t>(nl)), new_v(static_cast<size_t>(nl));
  for (int64_t l = 0; l < nl; ++l) {
    new_k[l] = Tensor({NH, L, HS}, dt, Device::CPU);
    new_v[l] = Tensor({NH, L, HS}, dt, Device::CPU);
  }
  Tensor logits({1, V}, dt, Device::CPU);
  Scalar* plog = logits.data<Scalar>();
  // Per layer and head: the chosen blocks (for the records) and whether S(CMT) fell below the cutoff.
  std::vector<RetrievalPlan> plans(static_cast<size_t>(nl));  // per layer: sel, one row per head
  for (RetrievalPlan& p : plans) p.sel.resize(static_cast<size_t>(NH));
  std::vector<uint8_t> dropped(static_cast<size_t>(nl * NH), 0);
  std::vector<int64_t> nbs(static_cast<size_t>(nl));
  for (int64_t l = 0; l < nl; ++l) nbs[l] = layers[l].store->size();
  const bool must_fetch = layers[0].store->needs_fetch();
  std::exception_ptr failure;  // an exception may not leave the parallel region: kept, rethrown after

  // Threads meet at five barriers per layer. Spinning idle threads answer one in well under a
  // microsecond; sleeping ones (OMP_WAIT_POLICY=PASSIVE) take tens of microseconds to wake, which
  // made the step 2.2 times slower than the chunk path (0.78 against 0.35 ms at 32k). The
  // parallel grain says which (tensor/cpu/parallel.h): threads only when the smallest product
  // between two barriers, C x C, is worth a parallel loop. (Read only by the pragma: unused in a
  // build without OpenMP, such as the fuzzing build.)
  [[maybe_unused]] const int T = C * C >= cpu::parallel_grain() ? std::max(1, static_cast<int>(std::min<int64_t>(cpu::num_threads(), NH))) : 1;
#pragma omp parallel num_threads(T) if (T > 1)
  {
#ifdef _OPENMP
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int t = 0, nt = 1;
#endif
    const Share cols3 = share_of(3 * C, t, nt), cols = share_of(C, t, nt), cols4 = share_of(H4, t, nt),
                heads = share_of(NH, t, nt), vocab = share_of(V, t, nt);
    const int64_t owned = heads.end - heads.begin;
    // Private: a layer norm's output; per owned head its rotated query and local keys; one row's scratch.
    std::vector<Scalar> ln(static_cast<size_t>(C)), q(static_cast<size_t>(owned * HS)), kt(static_cast<size_t>(owned * HS * L));
    static thread_local RowScratch<Scalar> scratch;
    for (int64_t l = 0; l < nl; ++l) {
      const LayerWeights<Scalar>& w = lw[l];
      LayerCache& cache = layers[l];
      ChunkContext ctx = ctx0;
      ctx.layer = l;
      const int64_t nb = nbs[l];
      // A. ln1, qkv
      cpu::layernorm_row(x.data(), w.ln1_w, w.ln1_b, C, w.eps1, ln.data());
      linear_rows(ln.data(), w.qkv_w, w.qkv_b, C, cols3, qkv.data());
#pragma omp barrier
      // B. the heads. The query at its position and the local keys at theirs, transposed (HS, L),
      // as the chunk path's rotary op and transpose give them, into the private buffers.
      auto rotate_head = [&](int64_t h) {
        Scalar* q_h = q.data() + (h - heads.begin) * HS;
        Scalar* kt_h = kt.data() + (h - heads.begin) * HS * L;
        const Scalar* qh = qkv.data() + h * HS;
        const Scalar* nk = new_k[l].data<Scalar>() + h * L * HS;
        const Scalar *cq = cos_r + positions[tl] * half, *sq = sin_r + positions[tl] * half;
        for (int64_t i = 0; i < half; ++i)
          nnmath::rotate_pair(qh[2 * i], qh[2 * i + 1], cq[i], sq[i], q_h[2 * i], q_h[2 * i + 1]);
        for (int64_t j = 0; j < L; ++j) {
          const Scalar *ck = cos_r + positions[j] * half, *sk = sin_r + positions[j] * half, *kj = nk + j * HS;
          for (int64_t i = 0; i < half; ++i)
            nnmath::rotate_pair(kj[2 * i], kj[2 * i + 1], ck[i], sk[i], kt_h[(2 * i) * L + j], kt_h[(2 * i + 1) * L + j]);
        }
      };
      auto attend_head = [&](int64_t h) {  // steps 2 and 3 for the rotated head
        const std::vector<int32_t>& chosen = plans[l].sel[h];
        const std::vector<int32_t> base = block_places(chosen, ctx, nb, ctx.blocks_done - nb);
        RowInput<Scalar> in;
        in.q = q.data() + (h - heads.begin) * HS;
        in.chosen = &chosen;
        in.base = &base;
        in.keys_t = kt.data() + (h - heads.begin) * HS * L;
        in.ld = L;
        in.values = new_v[l].data<Scalar>() + h * L * HS;
        in.nloc = L;
        in.local_kinds = ctx.local_kinds->data();
        in.cos_t = cos_t;
        in.sin_t = sin_t;
        in.cstride = cstride;
        in.head = h;
        attend_row(cache, ctx, in, scratch, att.data() + h * HS, &dropped[l * NH + h]);
      };
      for (int64_t h = heads.begin; h < heads.end; ++h) {
        Scalar* nk = new_k[l].data<Scalar>() + h * L * HS;  // the new tail: the old one, then the token
        Scalar* nv = new_v[l].data<Scalar>() + h * L * HS;
        if (tl > 0) {
          std::copy_n(cache.tail_k.data<Scalar>() + h * tl * HS, tl * HS, nk);
          std::copy_n(cache.tail_v.data<Scalar>() + h * tl * HS, tl * HS, nv);
        }
        std::copy_n(qkv.data() + C + h * HS, HS, nk + tl * HS);
        std::copy_n(qkv.data() + 2 * C + h * HS, HS, nv + tl * HS);
        rotate_head(h);
        std::vector<int32_t>& chosen = plans[l].sel[h];
        chosen.clear();
        if (nb > 0 && ctx.k > 0) select_head<Scalar>(cache, ctx, q.data() + (h - heads.begin) * HS, 1, h, &chosen);
      }
      if (!must_fetch)  // blocks readable in place: the rows at once
        for (int64_t h = heads.begin; h < heads.end; ++h) attend_head(h);
      if (must_fetch) {  // every head's blocks read in at once by one thread, then the rows
#pragma omp barrier
#pragma omp single
        {
          try {
            cache.store->fetch(plan_blocks(plans[l]));
          } catch (...) {
            failure = std::current_exception();
          }
        }  // (an implicit barrier)
        if (!failure)
          for (int64_t h = heads.begin; h < heads.end; ++h) attend_head(h);
      }
#pragma omp barrier
      // C. x += proj(att)
      linear_rows(att.data(), w.proj_w, w.proj_b, C, cols, out.data());
      for (int64_t j = cols.begin; j < cols.end; ++j) x[j] = x[j] + out[j];
#pragma omp barrier
      // D. ln2, fc, GELU
      cpu::layernorm_row(x.data(), w.ln2_w, w.ln2_b, C, w.eps2, ln.data());
      linear_rows(ln.data(), w.fc_w, w.fc_b, C, cols4, hid.data());
      for (int64_t j = cols4.begin; j < cols4.end; ++j) hid[j] = math::gelu(hid[j]);
#pragma omp barrier
      // E. x += proj(hid)
      linear_rows(hid.data(), w.fc2_w, w.fc2_b, H4, cols, out.data());
      for (int64_t j = cols.begin; j < cols.end; ++j) x[j] = x[j] + out[j];
#pragma omp barrier
    }
    // The logits: ln_f, then the tied embedding's rows.
    cpu::layernorm_row(x.data(), lnf_w, lnf_b, C, model.ln_f.eps, ln.data());
    linear_rows<Scalar>(ln.data(), wte, nullptr, C, vocab, plog);
  }
  if (failure) std::rethrow_exception(failure);

  // The token joins every layer's tail (it is regular: no block completes), and each layer's
  // record is what chunk_attention reports for a chunk of one.
  const bool cmt = layers[0].cmt_key_rot.defined();
  for (int64_t l = 0; l < nl; ++l) {
    LayerCache& cache = layers[l];
    cache.tail_k = new_k[l];
    cache.tail_v = new_v[l];
    cache.tail_len = L;
    int64_t fetched = 0;
    for (const std::vector<int32_t>& s : plans[l].sel) fetched += static_cast<int64_t>(s.size());
    const int64_t unique = static_cast<int64_t>(plan_blocks(plans[l]).size());
    RetrievalRecord rec{ctx0.chunk, l, nbs[l], unique, 1};
    rec.fetched = fetched;
    if (cmt) {
      rec.cmt_rows = NH;
      for (int64_t h = 0; h < NH; ++h) rec.cmt_dropped += dropped[l * NH + h];
    }
    rec.keys_scored = nbs[l] > 0 && ctx0.k > 0 ? NH * nbs[l] : 0;
    log.push_back(rec);
  }
  return logits;
}

}  // namespace

Tensor decode_step(const GPT& model, std::vector<LayerCache>& layers, const ChunkContext& ctx, int32_t token,
                   const std::vector<int32_t>& positions, std::vector<RetrievalRecord>& log) {
  LM_CHECK(decode_step_fits(model, layers, ctx), "decode_step: this model, cache or context needs the chunk path");
  if (model.wte.weight.dtype() == DType::F64) return decode_step_impl<double>(model, layers, ctx, token, positions, log);
  return decode_step_impl<float>(model, layers, ctx, token, positions, log);
}

}  // namespace lm
