// chunk_attention.cpp: step 3 of a layer's attention for one chunk, the fast CPU rows, and the
// three steps together (chunk_attention.h).
//
// For query i of head h the keys form one "virtual row" (virtual_row.h): with a context-miss
// token the CMT first, then the k' retrieved blocks in chronological order (each F regular tokens
// and its landmark, at their planned places), then the local keys [tail | chunk] up to i. The
// row's layout is built on the spot and gsm::row_forward gives the weights, so a retrieved block
// is gated by its landmark exactly as an earlier block is in training (and by the CMT too, when
// there is one). With exact positions and every cached block retrieved, the virtual row *is* the
// one-shot row: the equivalence test relies on that. The rows run here on the CPU or in
// infer/cuda/chunk_attention.cu on CUDA; their oracle is the end-to-end reference (reference.h).
#include "infer/chunk_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "infer/cpu_rows.h"
#include "infer/cuda/chunk_attention.h"
#include "infer/virtual_row.h"
#include "landmark/grouped_softmax.h"
#include "nn/nn_math.h"
#include "tensor/cpu/parallel.h"
#include "tensor/cpu/vec_dot.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

namespace {
// The captured row of query i (head ctx.capture->head): w holds its weights, `first` entries
// (the CMT, weight 0, not shown) then kb (F+1) for the retrieved blocks, then tl + i + 1 for the
// local keys.
template <class Scalar>
AttentionCapture::Row capture_row(const ChunkContext& ctx, const RetrievalPlan& plan,
                                  const std::vector<int32_t>& chosen, int64_t i, int64_t tl, int64_t first,
                                  const Scalar* w) {
  const int64_t B1 = ctx.F + 1, kb = static_cast<int64_t>(chosen.size());
  AttentionCapture::Row row;
  row.query = ctx.aug_start + i;
  w += first;
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

// Block b's gate for head h, the block placed at `place`: its landmark key as the cache keeps it,
// rotated on by gate_turn positions (rotate_key_on), into out (feature d at out[d * out_stride]).
// The one spelling of the gate for attend_row and rotate_block_keys, so that a row scoring a
// shared copy and a row rotating its own get the same bits.
template <class Scalar>
void rotate_gate(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int32_t b, int64_t place, const Scalar* cos_t,
                 const Scalar* sin_t, int64_t cstride, Scalar* out, int64_t out_stride) {
  const int64_t turn = gate_turn(ctx.positions, place);
  int64_t stride = 0;
  const Scalar* key = cache.scored_key<Scalar>(h, b, &stride);
  rotate_key_on(key, stride, cos_t + turn, sin_t + turn, cstride, cache.HS, out, out_stride);
}

}  // namespace

template <class Scalar> void RowScratch<Scalar>::fit(int64_t max_row) {
  const size_t m = static_cast<size_t>(max_row);
  for (auto* v : {&s, &w})
    if (v->size() < m) v->resize(m);
  for (auto* v : {&kind, &block_of})
    if (v->size() < m) v->resize(m);
  if (block_start.size() < m + 1) block_start.resize(m + 1);
  if (vrows.size() < m) vrows.resize(m);
}

template <class Scalar>
int64_t attend_row(const LayerCache& cache, const ChunkContext& ctx, const RowInput<Scalar>& in, RowScratch<Scalar>& scratch,
                   Scalar* out, uint8_t* dropped) {
  const int64_t HS = cache.HS, F = ctx.F, B1 = F + 1, h = in.head, nloc = in.nloc;
  const bool cmt = cache.cmt_key_rot.defined();
  const int64_t first = cmt ? 1 : 0;  // the CMT's entry at the front of every row
  const std::vector<int32_t>& chosen = *in.chosen;
  const int64_t kb = static_cast<int64_t>(chosen.size()), len = first + kb * B1 + nloc;
  const Scalar scale = static_cast<Scalar>(score_scale(cache.dtype, HS));
  scratch.fit(len);
  Scalar* s = scratch.s.data();
  Scalar* w = scratch.w.data();
  const Scalar** vrows = scratch.vrows.data();
  // Scores: s = scale * q . k, for the CMT, each retrieved block, then the local keys. The CMT's
  // value is never read (its weight is 0): it points at a local value row.
  if (cmt) {
    s[0] = cpu::dot_vectors(in.q, cache.cmt_key_rot.data<Scalar>() + h * HS, HS);
    vrows[0] = in.values;
  }
  // A retrieved block: its F regular keys from the store, rotated at place .. place + F - 1, then
  // its gate, the landmark key from fast memory rotated on to place + F (rotate_key_on). The
  // gate's value is never read (its weight is 0, and zero weights are skipped): it points at a
  // row of zeros.
  if (static_cast<int64_t>(scratch.gate.size()) < HS) scratch.gate.resize(static_cast<size_t>(HS));
  if (static_cast<int64_t>(scratch.zero_row.size()) < HS) scratch.zero_row.assign(static_cast<size_t>(HS), Scalar(0));
  for (int64_t c = 0; c < kb; ++c) {
    const Scalar* vals = static_cast<const Scalar*>(cache.store->v(chosen[c])) + h * F * HS;
    Scalar* sc = s + first + c * B1;
    if (in.rotated) {  // rotated already, gate included: the same sums over the same rotated values
      cpu::vec_times_rows(in.q, in.rotated[c], HS, B1, B1, sc);
    } else {
      const Scalar* keys_t = static_cast<const Scalar*>(cache.store->k(chosen[c])) + h * HS * F;  // (HS, F)
      const int64_t place = (*in.base)[c];  // the block's first position
      cpu::rotated_vec_times_rows(in.q, keys_t, HS, F, F, in.cos_t + place, in.sin_t + place, in.cstride, sc);
      rotate_gate(cache, ctx, h, chosen[c], place, in.cos_t, in.sin_t, in.cstride, scratch.gate.data(), 1);
      cpu::vec_times_rows(in.q, scratch.gate.data(), HS, 1, 1, sc + F);  // one column: the same sum as in (HS, F + 1)
    }
    for (int64_t t = 0; t < F; ++t) vrows[first + c * B1 + t] = vals + t * HS;
    vrows[first + c * B1 + F] = scratch.zero_row.data();
  }
  cpu::vec_times_rows(in.q, in.keys_t, HS, in.ld, nloc, s + first + kb * B1);  // local keys (HS, ld)
  for (int64_t j = 0; j < len; ++j) s[j] *= scale;
  for (int64_t j = 0; j < nloc; ++j) vrows[first + kb * B1 + j] = in.values + j * HS;
  const RowLayout layout = virtual_row_layout(cmt, ctx.cmt_cutoff, kb, F, in.local_kinds, nloc, scratch.kind.data(),
                                              scratch.block_of.data(), scratch.block_start.data());
  gsm::row_forward<Scalar>(layout, static_cast<int>(len - 1), s, s, w);  // scores -> P' in place (allowed)
  if (cmt && dropped) *dropped = gsm::cmt_dropped(s[0], ctx.cmt_cutoff);  // s[0] = P'(CMT), before the cutoff
  cpu::weighted_row_sum(w, vrows, len, HS, out);
  return len;
}

template <class Scalar>
void rotate_block_keys(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int32_t b, int64_t place,
                       const Scalar* cos_t, const Scalar* sin_t, int64_t cstride, Scalar* out) {
  const int64_t HS = cache.HS, F = ctx.F, B1 = F + 1;
  const Scalar* keys_t = static_cast<const Scalar*>(cache.store->k(b)) + h * HS * F;  // (HS, F), un-rotated
  for (int64_t i = 0; i < HS / 2; ++i) {
    const Scalar *x0 = keys_t + (2 * i) * F, *x1 = keys_t + (2 * i + 1) * F;
    const Scalar *c = cos_t + i * cstride + place, *sn = sin_t + i * cstride + place;
    Scalar *y0 = out + (2 * i) * B1, *y1 = out + (2 * i + 1) * B1;
    for (int64_t t = 0; t < F; ++t) nnmath::rotate_pair(x0[t], x1[t], c[t], sn[t], y0[t], y1[t]);
  }
  rotate_gate(cache, ctx, h, b, place, cos_t, sin_t, cstride, out + F, B1);  // column F: the gate
}

template struct RowScratch<float>;
template struct RowScratch<double>;
template int64_t attend_row<float>(const LayerCache&, const ChunkContext&, const RowInput<float>&, RowScratch<float>&,
                                   float*, uint8_t*);
template int64_t attend_row<double>(const LayerCache&, const ChunkContext&, const RowInput<double>&, RowScratch<double>&,
                                    double*, uint8_t*);
template void rotate_block_keys<float>(const LayerCache&, const ChunkContext&, int64_t, int32_t, int64_t, const float*,
                                       const float*, int64_t, float*);
template void rotate_block_keys<double>(const LayerCache&, const ChunkContext&, int64_t, int32_t, int64_t, const double*,
                                        const double*, int64_t, double*);

bool share_rotated_keys(int64_t distinct, int64_t pairs, int64_t copy_bytes) {
  constexpr int64_t kMaxBytes = int64_t(32) << 20;
  return distinct > 0 && 2 * distinct <= pairs && distinct <= kMaxBytes / std::max<int64_t>(copy_bytes, 1);
}

namespace {

// The block keys a chunk's rows share, rotated (attend_cpu), in the thread that reads the chunks.
// Kept from one chunk to the next, so the chunks of a prompt reuse its pages (up to 32 MiB,
// share_rotated_keys); release_chunk_scratch hands them back.
template <class Scalar> std::vector<Scalar>& rotated_scratch() {
  static thread_local std::vector<Scalar> rotated;
  return rotated;
}

}  // namespace

void release_chunk_scratch() {
  std::vector<float>().swap(rotated_scratch<float>());
  std::vector<double>().swap(rotated_scratch<double>());
}

int64_t chunk_scratch_bytes() {
  return static_cast<int64_t>(rotated_scratch<float>().capacity() * sizeof(float) +
                              rotated_scratch<double>().capacity() * sizeof(double));
}

namespace {

// The rotary tables transposed (RowInput), grown here, before the parallel loop, to cover every
// place the plan uses, so the threads only read them; *kmax: the most blocks any row chose.
template <class Scalar> struct PlaceTables {
  const Scalar *cos_t, *sin_t;
  int64_t cstride;
};
template <class Scalar>
PlaceTables<Scalar> cover_places(const ChunkContext& ctx, const RetrievalPlan& plan, int64_t* kmax) {
  const int64_t B1 = ctx.F + 1;
  int64_t positions = 0;
  *kmax = 0;
  for (size_t r = 0; r < plan.base.size(); ++r) {
    *kmax = std::max<int64_t>(*kmax, static_cast<int64_t>(plan.sel[r].size()));
    for (int32_t b : plan.base[r]) positions = std::max<int64_t>(positions, b + B1);
  }
  PlaceTables<Scalar> t;
  t.cos_t = ctx.rope->cos_cols<Scalar>(positions);
  t.sin_t = ctx.rope->sin_cols<Scalar>(positions);
  t.cstride = ctx.rope->col_stride();
  return t;
}

// The rows of a chunk share most of their blocks: on a 131k pass-key prompt each (head, block,
// place) was chosen by 12 rows of its chunk on average. Each is rotated once (rotate_block_keys,
// into rotated_scratch), and the rows score the rotated copy (cpu::vec_times_rows gives the same
// bits as rotating while scoring). row(r)[c]: row r's c-th block, rotated; null when
// share_rotated_keys says no (or ctx.share_rotated is off): then each row rotates while it scores,
// as decoding does.
template <class Scalar> struct SharedBlockKeys {
  std::vector<int64_t> off;        // row r's blocks start at off[r] in ptr
  std::vector<const Scalar*> ptr;  // empty when not shared
  const Scalar* const* row(int64_t r) const { return ptr.empty() ? nullptr : ptr.data() + off[r]; }
};

template <class Scalar>
SharedBlockKeys<Scalar> share_block_keys(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                                         int64_t n, const PlaceTables<Scalar>& tab) {
  const int64_t rows = static_cast<int64_t>(plan.sel.size()), block_keys = cache.HS * (ctx.F + 1);
  SharedBlockKeys<Scalar> shared;
  shared.off.assign(static_cast<size_t>(rows + 1), 0);
  for (int64_t r = 0; r < rows; ++r) shared.off[r + 1] = shared.off[r] + static_cast<int64_t>(plan.sel[r].size());
  std::vector<int64_t> rot_at(static_cast<size_t>(shared.off[rows]));  // pair (r, c) -> its triple in uniq
  std::vector<std::array<int64_t, 3>> uniq;                              // (head, block, place) in first-seen order
  if (ctx.share_rotated) {
    std::map<std::array<int64_t, 3>, int64_t> seen;  // triple -> its index in uniq
    for (int64_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < plan.sel[r].size(); ++c) {
        const std::array<int64_t, 3> key{r / n, plan.sel[r][c], plan.base[r][c]};
        const auto [it, fresh] = seen.emplace(key, static_cast<int64_t>(uniq.size()));
        if (fresh) uniq.push_back(key);
        rot_at[shared.off[r] + c] = it->second;
      }
  }
  const int64_t nu = static_cast<int64_t>(uniq.size());
  if (!(ctx.share_rotated && share_rotated_keys(nu, static_cast<int64_t>(rot_at.size()),
                                                block_keys * static_cast<int64_t>(sizeof(Scalar)))))
    return shared;
  std::vector<Scalar>& rotated = rotated_scratch<Scalar>();
  if (rotated.size() < static_cast<size_t>(nu * block_keys)) rotated.resize(static_cast<size_t>(nu * block_keys));
  Scalar* prot = rotated.data();
  cpu::parallel_for(nu, block_keys * 4, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u)
      rotate_block_keys(cache, ctx, uniq[u][0], static_cast<int32_t>(uniq[u][1]), uniq[u][2], tab.cos_t, tab.sin_t,
                        tab.cstride, prot + u * block_keys);
  });
  shared.ptr.resize(rot_at.size());
  for (size_t j = 0; j < rot_at.size(); ++j) shared.ptr[j] = prot + rot_at[j] * block_keys;
  return shared;
}

// Where one row's attention went (RowMass) from its weights w = [CMT (first entries) | kb blocks of
// B1 keys | tail (tl) | chunk up to the query]: per block, then the tail, then the chunk.
template <class Scalar>
std::vector<double> row_mass(const Scalar* w, int64_t first, int64_t kb, int64_t B1, int64_t tl, int64_t nloc) {
  std::vector<double> mass(static_cast<size_t>(kb + 2), 0.0);
  for (int64_t j = 0; j < kb * B1; ++j) mass[j / B1] += static_cast<double>(w[first + j]);
  for (int64_t j = 0; j < nloc; ++j) mass[kb + (j < tl ? 0 : 1)] += static_cast<double>(w[first + kb * B1 + j]);
  return mass;
}

// Step 3 on the CPU: per (head, query) the virtual row, its grouped softmax and the weighted
// values. Each chosen block's keys are rotated where the block was placed
// (cpu::rotated_vec_times_rows), from the store's un-rotated, transposed keys and the session's
// transposed cos/sin tables, either once per chunk (share_block_keys) or while each row scores.
template <class Scalar>
Tensor attend_cpu(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                  const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count, RowMass* mass) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const int64_t B1 = ctx.F + 1;
  const bool cmt = cache.cmt_key_rot.defined();
  const int64_t first = cmt ? 1 : 0;  // the CMT's entry at the front of every row
  int64_t kmax = 0;
  const PlaceTables<Scalar> tab = cover_places<Scalar>(ctx, plan, &kmax);
  const SharedBlockKeys<Scalar> shared = share_block_keys(cache, ctx, plan, n, tab);

  Tensor out = zeros({NH, n, HS}, q_rot.dtype());
  const Tensor k_rot_t = k_rot.transpose(1, 2).contiguous();  // (NH, HS, L): scores as row updates too
  const Scalar* pq = q_rot.data<Scalar>();
  const Scalar* pkt = k_rot_t.data<Scalar>();
  const Scalar* pv = v_loc.data<Scalar>();
  Scalar* po = out.data<Scalar>();
  const int64_t max_row = first + kmax * B1 + L;
  std::vector<AttentionCapture::Row> captured(ctx.capture ? static_cast<size_t>(n) : 0);
  std::vector<uint8_t> dropped(cmt ? static_cast<size_t>(NH * n) : 0, 0);  // per row: S(CMT) < cutoff
  if (mass) mass->assign(static_cast<size_t>(NH * n), std::vector<double>());  // each thread fills its rows

  cpu::parallel_for(NH * n, max_row * HS * 2, [&](int64_t r0, int64_t r1) {
    // Per-thread scratch for one virtual row, kept between calls: decoding calls this once per
    // layer and token, and fresh allocations showed up in its profile.
    static thread_local RowScratch<Scalar> scratch;
    scratch.fit(max_row);
    RowInput<Scalar> in;
    in.ld = L;
    in.local_kinds = ctx.local_kinds->data();
    in.cos_t = tab.cos_t;
    in.sin_t = tab.sin_t;
    in.cstride = tab.cstride;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r / n, i = r % n, kb = static_cast<int64_t>(plan.sel[r].size());
      in.q = pq + (h * n + i) * HS;
      in.chosen = &plan.sel[r];
      in.base = &plan.base[r];
      in.rotated = shared.row(r);
      in.keys_t = pkt + h * HS * L;
      in.values = pv + h * L * HS;
      in.nloc = tl + i + 1;
      in.head = h;
      attend_row(cache, ctx, in, scratch, po + (h * n + i) * HS, cmt ? &dropped[r] : nullptr);
      const Scalar* w = scratch.w.data();
      if (ctx.capture && h == ctx.capture->head) captured[i] = capture_row(ctx, plan, plan.sel[r], i, tl, first, w);
      if (mass) (*mass)[static_cast<size_t>(r)] = row_mass(w, first, kb, B1, tl, in.nloc);
    }
  });
  if (ctx.capture)
    for (auto& row : captured) ctx.capture->rows.push_back(std::move(row));
  if (cmt && cmt_count) {
    cmt_count->rows += NH * n;
    for (uint8_t d : dropped) cmt_count->dropped += d;
  }
  return out;
}

// The CUDA rows (infer/cuda/chunk_attention.cu) and, when capturing, the captured head's weights
// brought back to build the same rows as the CPU.
template <class Scalar>
Tensor attend_cuda(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count, RowMass* mass) {
  LM_CHECK(mass == nullptr, "chunk attention: where each row's attention went (a detailed retrieval trace, the "
                            "explorer) is recorded by the CPU rows only; run on the CPU");
#ifdef LANDMARK_WITH_CUDA
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), tl = k_rot.size(1) - n;
  const bool capture = ctx.capture && ctx.capture->head >= 0 && ctx.capture->head < NH;
  Tensor head_w;  // (n, max_row) on the host
  Tensor out = cuda::attend_plan(cache, ctx, plan, q_rot, k_rot, v_loc, capture ? &head_w : nullptr, cmt_count);
  if (capture) {
    const int64_t h = ctx.capture->head, max_row = head_w.size(1), first = cache.cmt_key_rot.defined() ? 1 : 0;
    for (int64_t i = 0; i < n; ++i)
      ctx.capture->rows.push_back(capture_row(ctx, plan, plan.sel[h * n + i], i, tl, first,
                                              head_w.data<Scalar>() + i * max_row));
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
  (void)cmt_count;
  LM_FAIL("chunk_attention: q " << describe(q_rot)
                                << " is on cuda but this build has no CUDA support (configure with -DLANDMARK_CUDA=ON)");
#endif
}

}  // namespace

Tensor attend_plan(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt, RowMass* mass) {
  LM_CHECK(q_rot.dim() == 3 && k_rot.dim() == 3 && v_loc.shape() == k_rot.shape() && q_rot.size(0) == k_rot.size(0) &&
               q_rot.size(2) == k_rot.size(2) && k_rot.size(1) >= q_rot.size(1) && q_rot.size(0) == cache.NH &&
               q_rot.size(2) == cache.HS && q_rot.dtype() == cache.dtype,
           "chunk attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc)
                                 << " do not fit each other or the cache (NH " << cache.NH << ", HS " << cache.HS << ")");
  LM_CHECK(k_rot.device() == q_rot.device() && v_loc.device() == q_rot.device() && cache.device == q_rot.device(),
           "chunk attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc)
                                 << " and the cache (" << device_name(cache.device) << ") must share a device");
  LM_CHECK(ctx.local_kinds && static_cast<int64_t>(ctx.local_kinds->size()) == k_rot.size(1),
           "chunk attention: need one kind per local key");
  LM_CHECK(static_cast<int64_t>(plan.sel.size()) == q_rot.size(0) * q_rot.size(1) && plan.base.size() == plan.sel.size(),
           "chunk attention: a plan for " << plan.sel.size() << " rows, expected " << q_rot.size(0) * q_rot.size(1));
  // On disk, the chosen blocks' K/V are read into the store's staging (the blocks held do not
  // change). In RAM every block is readable as it is: nothing to collect (this runs per layer and
  // token while decoding).
  if (cache.store->needs_fetch()) cache.store->fetch(plan_blocks(plan));
  Tensor out;
  LM_DISPATCH_FLOAT(q_rot.dtype(), "chunk_attention", {
    const Tensor q = q_rot.contiguous(), k = k_rot.contiguous(), v = v_loc.contiguous();
    out = q.device() == Device::CPU ? attend_cpu<scalar_t>(cache, ctx, plan, q, k, v, cmt, mass)
                                    : attend_cuda<scalar_t>(cache, ctx, plan, q, k, v, cmt, mass);
  });
  return out;
}

Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                       const Tensor& v_loc, RetrievalRecord* rec) {
  const Tensor q = q_rot.contiguous();
  const RetrievalPlan plan = plan_retrieval(cache, ctx, q);
  CmtCount cmt;
  const bool detail = ctx.trace && ctx.trace->detail;
  RowMass mass;
  Tensor out = attend_plan(cache, ctx, plan, q, k_rot, v_loc, &cmt, detail ? &mass : nullptr);
  if (ctx.trace) {
    RetrievalTrace::Step step{ctx.layer, ctx.aug_start, plan.first_gid, plan.nb, q.size(1), plan.sel, {}, {}};
    if (detail) {
      step.score = plan.score;
      step.mass = std::move(mass);
    }
    ctx.trace->steps.push_back(std::move(step));
  }
  if (rec) {
    // Distinct blocks over all rows: one sorted vector (this runs per layer and token). Fetched:
    // one per member of each distinct set, as the paper's Table 2 counts them (a set shared by
    // the heads of a token, or by the tokens of a head, is fetched once).
    const int64_t NH = q.size(0), n = q.size(1);
    int64_t fetched = 0;
    for (int64_t r = 0; r < NH * n; ++r) {
      const std::vector<int32_t>& s = plan.sel[r];
      const bool counts = ctx.granularity == Granularity::TokenHead || (ctx.granularity == Granularity::Token && r < n) ||
                          (ctx.granularity == Granularity::Head && r % n == 0);
      if (counts) fetched += static_cast<int64_t>(s.size());
    }
    const int64_t unique = static_cast<int64_t>(plan_blocks(plan).size());
    *rec = RetrievalRecord{ctx.chunk, ctx.layer, plan.nb, unique, n};
    rec->fetched = fetched;
    rec->cmt_rows = cmt.rows;
    rec->cmt_dropped = cmt.dropped;
    rec->keys_scored = plan.keys_scored;
    rec->budget_cut = plan.budget_cut;
  }
  return out;
}

}  // namespace lm
