// chunk_attention.cpp: retrieval + grouped softmax for one chunk of one layer (chunk_attention.h).
//
// For query i of head h the keys form one "virtual row": the k' retrieved blocks in
// chronological order (each F regular tokens and its landmark, at their mapped positions), then
// the local keys [tail | chunk] up to i. The row's layout (which block every key is in) is built
// on the spot and gsm::row_forward gives the weights, so a retrieved block is gated by its
// landmark exactly as an earlier block is in training. With exact positions and every cached
// block retrieved, the virtual row *is* the one-shot row: the equivalence test relies on that.
// Retrieval (what each row takes, and where) is planned here for both devices; the rows run here
// on the CPU or in infer/cuda/chunk_attention.cu on CUDA.
#include "infer/chunk_attention.h"

#include <algorithm>
#include <cmath>

#include "infer/cuda/chunk_attention.h"
#include "landmark/grouped_softmax.h"
#include "landmark/retrieval.h"
#include "nn/functional.h"
#include "nn/nn_math.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

LayerCache::LayerCache(int64_t nh, int64_t f, int64_t hs, DType dt, int64_t capacity, const std::string& path,
                       Device dev)
    : store(std::make_unique<BlockStore>(nh * (f + 1) * hs, dt, capacity, path)),
      NH(nh),
      F(f),
      HS(hs),
      dtype(dt),
      device(dev) {
  landmark_keys = zeros({nh, 0, hs}, dt, dev);
  landmark_keys_rot_t = zeros({nh, hs, 0}, dt, dev);
  tail_k = zeros({nh, 0, hs}, dt, dev);
  tail_v = zeros({nh, 0, hs}, dt, dev);
}

int64_t LayerCache::absorb(const Tensor& k_loc, const Tensor& v_loc, const std::vector<int32_t>& kinds, RotaryCache& rope,
                           PositionMode positions, int64_t first_gid) {
  const int64_t L = k_loc.size(1);
  LM_CHECK(static_cast<int64_t>(kinds.size()) == L, "LayerCache: " << kinds.size() << " kinds for " << L << " keys");
  LM_CHECK(k_loc.device() == device && v_loc.device() == device,
           "LayerCache: keys " << describe(k_loc) << " and values " << describe(v_loc) << " must be on "
                               << device_name(device) << ", the cache's device");
  int64_t end = 0;  // the completed blocks are [0, end): everything up to the last landmark
  for (int64_t j = 0; j < L; ++j)
    if (kinds[j] == kLandmark) end = j + 1;
  // The store is host memory: from a device, the completed blocks cross in one copy each for K
  // and V (on the CPU these are views, no copy).
  const Tensor k_host = k_loc.narrow(1, 0, end).to(Device::CPU), v_host = v_loc.narrow(1, 0, end).to(Device::CPU);
  std::vector<Tensor> keys{landmark_keys}, keys_rot{landmark_keys_rot_t};  // held keys, then the new ones
  int64_t begin = 0, completed = 0;
  for (int64_t j = 0; j < end; ++j) {
    if (kinds[j] != kLandmark) continue;
    LM_CHECK(j - begin == F, "LayerCache: a block of " << j - begin << " regular tokens (F = " << F << ")");
    // K transposed per head, (NH, HS, F+1): a query then scores a block by streaming along its
    // tokens (cpu::rotated_vec_times_rows); V as it is, (NH, F+1, HS).
    Tensor kb = k_host.narrow(1, begin, F + 1).transpose(1, 2).contiguous(), vb = v_host.narrow(1, begin, F + 1).contiguous();
    store->append(kb.raw_data(), vb.raw_data());
    keys.push_back(k_loc.narrow(1, j, 1));
    const int64_t gid = first_gid + completed;
    const int32_t p = static_cast<int32_t>(positions == PositionMode::Exact ? gid * (F + 1) + F : F);
    keys_rot.push_back(rotary(k_loc.narrow(1, j, 1).unsqueeze(0), rope.range(p, 1)).squeeze(0).transpose(1, 2));
    begin = j + 1;
    ++completed;
  }
  if (completed > 0) {  // keep as many landmark keys as the store keeps blocks (capacity): the newest
    const int64_t held = store->size();
    Tensor all = concat(keys, 1), all_rot = concat(keys_rot, 2);
    landmark_keys = all.narrow(1, all.size(1) - held, held).contiguous();
    landmark_keys_rot_t = all_rot.narrow(2, all_rot.size(2) - held, held).contiguous();
  }
  tail_len = L - begin;
  tail_k = k_loc.narrow(1, begin, tail_len).contiguous();
  tail_v = v_loc.narrow(1, begin, tail_len).contiguous();
  return completed;
}

Tensor retrieval_scores(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, bool cpu_loop) {
  LM_CHECK(q_rot.dim() == 3 && q_rot.size(0) == cache.NH && q_rot.size(2) == cache.HS && q_rot.device() == cache.device &&
               q_rot.dtype() == cache.dtype,
           "retrieval_scores: queries " << describe(q_rot) << " do not fit the cache (NH " << cache.NH << ", HS " << cache.HS
                                        << ", " << device_name(cache.device) << ")");
  LM_CHECK(ctx.rope != nullptr || ctx.positions != PositionMode::Stingy, "retrieval_scores: stingy scoring needs ctx.rope");
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), nb = cache.landmark_keys.size(1);
  const int64_t F = ctx.F, B1 = F + 1;
  // 1/sqrt(HS) rounded to the element type first, as the attention rows use it.
  const double exact = 1.0 / std::sqrt(static_cast<double>(HS));
  const double scale = q_rot.dtype() == DType::F32 ? static_cast<double>(static_cast<float>(exact)) : exact;
  // Every key was rotated at its usual scoring place when it was cached (LayerCache::absorb): one
  // product scores them all. In stingy mode the k newest sit in slots k..1 instead of 0: rescore
  // just those.
  Tensor scores = matmul(q_rot, cache.landmark_keys_rot_t);  // (NH, n, HS) x (NH, HS, nb) -> (NH, n, nb)
  if (nb == 0) return scores;
  if (!(cpu_loop && scores.device() == Device::CPU)) {  // tensor ops, on any device
    if (ctx.positions == PositionMode::Stingy) {
      const int64_t recent = std::min(nb, ctx.k);
      std::vector<int32_t> pos;
      for (int64_t b = nb - recent; b < nb; ++b) pos.push_back(static_cast<int32_t>(stingy_score_slot(b, nb, ctx.k) * B1 + F));
      Tensor recent_rot = rotary(cache.landmark_keys.narrow(1, nb - recent, recent).unsqueeze(0), ctx.rope->tables(pos)).squeeze(0);
      scores.narrow(2, nb - recent, recent).copy_(matmul(q_rot, recent_rot, false, true));
    }
    return mul(scores, scale);
  }
  // The same on the CPU without a tensor op per step (decoding runs this once per layer and
  // token): the k newest rescored in place (rotate_pair, as the rotary op; a dot product per
  // query), then scaled in place.
  LM_DISPATCH_FLOAT(scores.dtype(), "retrieval_scores", {
    scalar_t* ps = scores.data<scalar_t>();
    if (ctx.positions == PositionMode::Stingy) {
      const Tensor q_c = q_rot.contiguous();
      const scalar_t* q = q_c.data<scalar_t>();
      const scalar_t* lk = cache.landmark_keys.data<scalar_t>();  // (NH, nb, HS), contiguous
      std::vector<scalar_t> rk(static_cast<size_t>(HS));
      for (int64_t b = std::max<int64_t>(0, nb - ctx.k); b < nb; ++b) {
        const int64_t slot = stingy_score_slot(b, nb, ctx.k);
        const scalar_t* cs = ctx.rope->cos_rows<scalar_t>(slot * B1 + F, 1);
        const scalar_t* sn = ctx.rope->sin_rows<scalar_t>(slot * B1 + F, 1);
        for (int64_t h = 0; h < NH; ++h) {
          const scalar_t* key = lk + (h * nb + b) * HS;
          for (int64_t i = 0; i < HS / 2; ++i)
            nnmath::rotate_pair(key[2 * i], key[2 * i + 1], cs[i], sn[i], rk[2 * i], rk[2 * i + 1]);
          for (int64_t i = 0; i < n; ++i) ps[(h * n + i) * nb + b] = cpu::dot_vectors(q + (h * n + i) * HS, rk.data(), HS);
        }
      }
    }
    const scalar_t sc = static_cast<scalar_t>(scale);
    for (int64_t j = 0; j < NH * n * nb; ++j) ps[j] *= sc;
  });
  return scores;
}

namespace {

// Steps 1 and 2 of both devices: every query scores every cached landmark key and keeps its top
// k; then each chosen block gets its place. The scores are computed on q_rot's device and only
// the (NH, n, nb) score matrix comes to the host, where the selection runs.
template <class T> RetrievalPlan plan_retrieval(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1);
  const int64_t F = ctx.F, B1 = F + 1, nb = cache.store->size();
  RetrievalPlan plan;
  plan.nb = nb;
  plan.first_gid = ctx.blocks_done - nb;
  const int64_t first_gid = plan.first_gid;
  LM_CHECK(cache.landmark_keys.size(1) == nb,
           "chunk_attention: " << cache.landmark_keys.size(1) << " landmark keys for " << nb << " cached blocks");

  // --- 1. retrieval: every query scores every cached landmark key, keeps its top k ---
  plan.sel.resize(static_cast<size_t>(NH * n));
  if (nb > 0 && ctx.k > 0) {
    const Tensor scores = retrieval_scores(cache, ctx, q_rot).to(Device::CPU);  // (NH, n, nb)
    plan.sel = select_blocks<T>(scores.data<T>(), NH, n, nb, ctx.k, ctx.granularity);
  }

  // --- 2. where each chosen block sits ---
  plan.base.resize(plan.sel.size());  // first position of each chosen block
  for (size_t r = 0; r < plan.sel.size(); ++r) {
    const std::vector<int32_t>& sel = plan.sel[r];
    if (sel.empty()) continue;
    std::vector<int32_t> slot =
        ctx.positions == PositionMode::Stingy ? stingy_attention_slots(sel, nb, ctx.k) : std::vector<int32_t>();
    for (size_t c = 0; c < sel.size(); ++c)
      plan.base[r].push_back(
          static_cast<int32_t>(ctx.positions == PositionMode::Exact ? (first_gid + sel[c]) * B1 : slot[c] * B1));
  }
  return plan;
}

// The captured row of query i (head ctx.capture->head): w holds its weights, kb (F+1) for the
// retrieved blocks, then tl + i + 1 for the local keys.
template <class T>
AttentionCapture::Row capture_row(const ChunkContext& ctx, const RetrievalPlan& plan, const std::vector<int32_t>& chosen,
                                  int64_t i, int64_t tl, const T* w) {
  const int64_t B1 = ctx.F + 1, kb = static_cast<int64_t>(chosen.size());
  AttentionCapture::Row row;
  row.query = ctx.aug_start + i;
  for (int64_t c = 0; c < kb; ++c) {
    row.retrieved.push_back(plan.first_gid + chosen[c]);
    for (int64_t t = 0; t < B1; ++t) {
      row.keys.push_back((plan.first_gid + chosen[c]) * B1 + t);  // true global positions
      row.weights.push_back(static_cast<double>(w[c * B1 + t]));
    }
  }
  for (int64_t j = 0; j < tl + i + 1; ++j) {
    row.keys.push_back(ctx.aug_start - tl + j);
    row.weights.push_back(static_cast<double>(w[kb * B1 + j]));
  }
  return row;
}

// Steps 2b and 3 on the CPU: rotate each chosen block's keys at its place (once per (block,
// place)), then per (head, query) the virtual row, its grouped softmax and the weighted values.
template <class T>
Tensor attend(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
              const Tensor& k_rot, const Tensor& v_loc) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const int64_t F = ctx.F, B1 = F + 1;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(HS)));
  const DType dt = q_rot.dtype();
  const std::vector<std::vector<int32_t>>& sel = plan.sel;
  const std::vector<std::vector<int32_t>>& base = plan.base;

  // Each chosen block's keys are rotated where the block was placed while they are scored
  // (cpu::rotated_vec_times_rows), from the store's un-rotated, transposed keys and the session's
  // transposed cos/sin tables: nothing rotated is stored. The tables are grown here, before the
  // parallel loop, to cover every place used, so the threads only read them.
  int64_t positions = 0;
  for (const auto& row : base)
    for (int32_t b : row) positions = std::max<int64_t>(positions, b + B1);
  const T* cos_t = ctx.rope->cos_cols<T>(positions);
  const T* sin_t = ctx.rope->sin_cols<T>(positions);
  const int64_t cstride = ctx.rope->col_stride();

  // --- per (head, query): the virtual row, its grouped softmax, the weighted values ---
  Tensor out = zeros({NH, n, HS}, dt);
  const T* pq = q_rot.data<T>();
  const Tensor k_rot_t = k_rot.transpose(1, 2).contiguous();  // (NH, HS, L): scores as row updates too
  const T* pkt = k_rot_t.data<T>();
  const T* pv = v_loc.data<T>();
  T* po = out.data<T>();
  const std::vector<int32_t>& lkind = *ctx.local_kinds;
  const int64_t max_row = ctx.k * B1 + L;
  std::vector<AttentionCapture::Row> captured(ctx.capture ? static_cast<size_t>(n) : 0);
  cpu::parallel_for(NH * n, max_row * HS * 2, [&](int64_t r0, int64_t r1) {
    // Per-thread scratch for one virtual row, kept between calls: decoding calls this once per
    // layer and token, and fresh allocations showed up in its profile.
    struct Scratch {
      std::vector<T> s, pp, w;
      std::vector<int32_t> kind, block_of, block_start;
      std::vector<const T*> vrows;
    };
    static thread_local Scratch scratch;
    const size_t m = static_cast<size_t>(max_row);
    for (auto* v : {&scratch.s, &scratch.pp, &scratch.w})
      if (v->size() < m) v->resize(m);
    for (auto* v : {&scratch.kind, &scratch.block_of})
      if (v->size() < m) v->resize(m);
    if (scratch.block_start.size() < m + 1) scratch.block_start.resize(m + 1);
    if (scratch.vrows.size() < m) scratch.vrows.resize(m);
    std::vector<T>&s = scratch.s, &pp = scratch.pp, &w = scratch.w;
    std::vector<int32_t>&kind = scratch.kind, &block_of = scratch.block_of, &block_start = scratch.block_start;
    std::vector<const T*>& vrows = scratch.vrows;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r / n, i = r % n;
      const T* q = pq + (h * n + i) * HS;
      const std::vector<int32_t>& chosen = sel[r];
      const int64_t kb = static_cast<int64_t>(chosen.size()), len = kb * B1 + tl + i + 1;
      // Scores: s = scale * sum_d q[d] K[d, :], over each retrieved block, then the local keys.
      for (int64_t c = 0; c < kb; ++c) {
        const T* keys_t = static_cast<const T*>(cache.store->k(chosen[c])) + h * HS * B1;  // (HS, F+1)
        const T* vals = static_cast<const T*>(cache.store->v(chosen[c])) + h * B1 * HS;
        const int64_t place = base[r][c];  // the block's first position
        cpu::rotated_vec_times_rows(q, keys_t, HS, B1, B1, cos_t + place, sin_t + place, cstride, s.data() + c * B1);
        for (int64_t t = 0; t < B1; ++t) {
          kind[c * B1 + t] = t < F ? kRegular : kLandmark;
          vrows[c * B1 + t] = vals + t * HS;
        }
      }
      const int64_t nloc = tl + i + 1;
      cpu::vec_times_rows(q, pkt + h * HS * L, HS, L, nloc, s.data() + kb * B1);  // local keys (HS, L)
      for (int64_t j = 0; j < len; ++j) s[j] *= scale;
      for (int64_t j = 0; j < nloc; ++j) {
        kind[kb * B1 + j] = lkind[j];
        vrows[kb * B1 + j] = pv + (h * L + j) * HS;
      }
      // The layout of this row: blocks end at landmarks; no CMT at inference.
      int32_t blk = 0;
      block_start[0] = 0;
      for (int64_t j = 0; j < len; ++j) {
        block_of[j] = blk;
        if (kind[j] == kLandmark) block_start[++blk] = static_cast<int32_t>(j + 1);
      }
      const RowLayout layout{kind.data(), block_of.data(), block_start.data(), -1};
      gsm::row_forward<T>(layout, static_cast<int>(len - 1), s.data(), pp.data(), w.data());
      cpu::weighted_row_sum(w.data(), vrows.data(), len, HS, po + (h * n + i) * HS);
      if (ctx.capture && h == ctx.capture->head) captured[i] = capture_row(ctx, plan, chosen, i, tl, w.data());
    }
  });
  if (ctx.capture)
    for (auto& row : captured) ctx.capture->rows.push_back(std::move(row));
  return out;
}

// The CUDA rows (infer/cuda/chunk_attention.cu) and, when capturing, the captured head's weights
// brought back to build the same rows as the CPU.
template <class T>
Tensor attend_cuda(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc) {
#ifdef LANDMARK_WITH_CUDA
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), tl = k_rot.size(1) - n;
  const bool capture = ctx.capture && ctx.capture->head >= 0 && ctx.capture->head < NH;
  Tensor head_w;  // (n, max_row) on the host
  Tensor out = cuda::chunk_attention(cache, ctx, plan, q_rot, k_rot, v_loc, capture ? &head_w : nullptr);
  if (capture) {
    const int64_t h = ctx.capture->head, max_row = head_w.size(1);
    for (int64_t i = 0; i < n; ++i)
      ctx.capture->rows.push_back(capture_row(ctx, plan, plan.sel[h * n + i], i, tl, head_w.data<T>() + i * max_row));
  } else if (ctx.capture) {  // a head outside [0, NH): n empty rows, as the CPU gives
    ctx.capture->rows.resize(ctx.capture->rows.size() + static_cast<size_t>(n));
  }
  return out;
#else
  (void)cache;
  (void)ctx;
  (void)plan;
  (void)k_rot;
  (void)v_loc;
  LM_FAIL("chunk_attention: q " << describe(q_rot)
                                << " is on cuda but this build has no CUDA support (configure with -DLANDMARK_CUDA=ON)");
#endif
}

}  // namespace

Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                       const Tensor& v_loc, RetrievalRecord* rec) {
  LM_CHECK(q_rot.dim() == 3 && k_rot.dim() == 3 && v_loc.shape() == k_rot.shape() && q_rot.size(0) == k_rot.size(0) &&
               q_rot.size(2) == k_rot.size(2) && k_rot.size(1) >= q_rot.size(1),
           "chunk_attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc));
  LM_CHECK(k_rot.device() == q_rot.device() && v_loc.device() == q_rot.device() && cache.device == q_rot.device(),
           "chunk_attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc)
                                 << " and the cache (" << device_name(cache.device) << ") must share a device");
  LM_CHECK(ctx.local_kinds && static_cast<int64_t>(ctx.local_kinds->size()) == k_rot.size(1),
           "chunk_attention: need one kind per local key");
  Tensor out;
  LM_DISPATCH_FLOAT(q_rot.dtype(), "chunk_attention", {
    const Tensor q = q_rot.contiguous(), k = k_rot.contiguous(), v = v_loc.contiguous();
    const RetrievalPlan plan = plan_retrieval<scalar_t>(cache, ctx, q);
    if (rec) {
      // Distinct blocks over all rows: one sorted vector (this runs per layer and token).
      std::vector<int32_t> all;
      for (const auto& s : plan.sel) all.insert(all.end(), s.begin(), s.end());
      std::sort(all.begin(), all.end());
      const int64_t unique = std::unique(all.begin(), all.end()) - all.begin();
      *rec = RetrievalRecord{ctx.chunk, ctx.layer, plan.nb, unique, q.size(1)};
    }
    out = q.device() == Device::CPU ? attend<scalar_t>(cache, ctx, plan, q, k, v)
                                    : attend_cuda<scalar_t>(cache, ctx, plan, q, k, v);
  });
  return out;
}

}  // namespace lm
