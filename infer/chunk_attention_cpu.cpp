// chunk_attention_cpu.cpp: step 3 of a layer's attention for one chunk on the CPU
// (chunk_attention_cpu.h): the chunk's rows in one parallel loop, each row by attend_row
// (cpu_rows.h), the block keys the rows share rotated once per chunk.
#include "infer/chunk_attention_cpu.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "infer/attention_record.h"
#include "infer/cpu_rows.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"

namespace lm {

namespace {

// The block keys a chunk's rows share, rotated (attend_cpu), in the thread that reads the chunks.
// Kept from one chunk to the next, so the chunks of a prompt reuse its pages (up to 32 MiB,
// share_rotated_keys); release_chunk_scratch hands them back.
template <class Scalar>
std::vector<Scalar>& rotated_scratch() {
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

// The rotary tables transposed (RowInput), covered here, before the parallel loop, so that the
// threads only read them: every position the plan's blocks are read at, place .. place + F for
// each block and its gate's turn (gate_turn). Only those: with few blocks cached and a large k, the
// stingy places sit just below the chunk, far from position 0. *kmax: the most blocks any row chose.
template <class Scalar>
RotaryColumns<Scalar> cover_places(const ChunkContext& ctx, const RetrievalPlan& plan, int64_t* kmax) {
  const int64_t B1 = ctx.F + 1;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  *kmax = 0;
  for (size_t r = 0; r < plan.places.size(); ++r) {
    *kmax = std::max<int64_t>(*kmax, static_cast<int64_t>(plan.sel[r].size()));
    for (int32_t place : plan.places[r]) {
      lo = std::min({lo, static_cast<int64_t>(place), gate_turn(ctx.positions, place)});
      hi = std::max<int64_t>(hi, place + B1);
    }
  }
  return ctx.rope->columns<Scalar>(std::min(lo, hi), hi);  // nothing placed: an empty span
}

// The rows of a chunk share most of their blocks: on a 131k pass-key prompt each (head, block,
// place) was chosen by 12 rows of its chunk on average. Each is rotated once (rotate_block_keys,
// into rotated_scratch), and the rows score the rotated copy (cpu::vec_times_rows gives the same
// bits as rotating while scoring). row(r)[c]: row r's c-th block, rotated; null when
// share_rotated_keys says no (or ctx.share_rotated is off): then each row rotates while it scores,
// as decoding does.
template <class Scalar>
struct SharedBlockKeys {
  std::vector<int64_t> off;        // row r's blocks start at off[r] in ptr
  std::vector<const Scalar*> ptr;  // empty when not shared
  const Scalar* const* row(int64_t r) const { return ptr.empty() ? nullptr : ptr.data() + off[r]; }
};

template <class Scalar>
SharedBlockKeys<Scalar> share_block_keys(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                                         int64_t n, const RotaryColumns<Scalar>& rot) {
  const int64_t rows = static_cast<int64_t>(plan.sel.size()), block_keys = cache.HS * (ctx.F + 1);
  SharedBlockKeys<Scalar> shared;
  shared.off.assign(static_cast<size_t>(rows + 1), 0);
  for (int64_t r = 0; r < rows; ++r) shared.off[r + 1] = shared.off[r] + static_cast<int64_t>(plan.sel[r].size());
  std::vector<int64_t> rot_at(static_cast<size_t>(shared.off[rows]));  // pair (r, c) -> its triple in uniq
  std::vector<std::array<int64_t, 3>> uniq;                            // (head, block, place) in first-seen order
  if (ctx.share_rotated) {
    std::map<std::array<int64_t, 3>, int64_t> seen;  // triple -> its index in uniq
    for (int64_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < plan.sel[r].size(); ++c) {
        const std::array<int64_t, 3> key{r / n, plan.sel[r][c], plan.places[r][c]};
        const auto [it, fresh] = seen.emplace(key, static_cast<int64_t>(uniq.size()));
        if (fresh) uniq.push_back(key);
        rot_at[shared.off[r] + c] = it->second;
      }
  }
  const int64_t nu = static_cast<int64_t>(uniq.size());
  if (!(ctx.share_rotated &&
        share_rotated_keys(nu, static_cast<int64_t>(rot_at.size()), block_keys * static_cast<int64_t>(sizeof(Scalar)))))
    return shared;
  std::vector<Scalar>& rotated = rotated_scratch<Scalar>();
  if (rotated.size() < static_cast<size_t>(nu * block_keys)) rotated.resize(static_cast<size_t>(nu * block_keys));
  Scalar* prot = rotated.data();
  cpu::parallel_for(nu, block_keys * 4, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u)
      rotate_block_keys(cache, ctx, uniq[u][0], static_cast<int32_t>(uniq[u][1]), uniq[u][2], rot,
                        prot + u * block_keys);
  });
  shared.ptr.resize(rot_at.size());
  for (size_t j = 0; j < rot_at.size(); ++j) shared.ptr[j] = prot + rot_at[j] * block_keys;
  return shared;
}

}  // namespace

// Step 3 on the CPU: per (head, query) the virtual row, its grouped softmax and the weighted
// values. Each chosen block's keys are rotated where the block was placed
// (cpu::rotated_vec_times_rows), from the store's un-rotated, transposed keys and the session's
// transposed cos/sin tables, either once per chunk (share_block_keys) or while each row scores.
template <class Scalar>
Tensor attend_cpu(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                  const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count, RowMass* mass,
                  const HookList* observers) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const int64_t B1 = ctx.F + 1;
  const bool cmt = cache.cmt_key_rot.defined();
  const int64_t first = cmt ? 1 : 0;  // the CMT's entry at the front of every row
  int64_t kmax = 0;
  const RotaryColumns<Scalar> rot = cover_places<Scalar>(ctx, plan, &kmax);
  const SharedBlockKeys<Scalar> shared = share_block_keys(cache, ctx, plan, n, rot);

  Tensor out = zeros({NH, n, HS}, q_rot.dtype());
  const Tensor k_rot_t = k_rot.transpose(1, 2).contiguous();  // (NH, HS, L): scores as row updates too
  const Scalar* pq = q_rot.data<Scalar>();
  const Scalar* pkt = k_rot_t.data<Scalar>();
  const Scalar* pv = v_loc.data<Scalar>();
  Scalar* po = out.data<Scalar>();
  const int64_t max_row = first + kmax * B1 + L;
  std::vector<AttentionCapture::Row> captured(ctx.capture ? static_cast<size_t>(n) : 0);
  std::vector<uint8_t> dropped(cmt ? static_cast<size_t>(NH * n) : 0, 0);      // per row: S(CMT) < cutoff
  if (mass) mass->assign(static_cast<size_t>(NH * n), std::vector<double>());  // each thread fills its rows

  cpu::parallel_for(NH * n, max_row * HS * 2, [&](int64_t r0, int64_t r1) {
    // Per-thread scratch for one virtual row, kept between calls: decoding calls this once per
    // layer and token, and fresh allocations showed up in its profile.
    static thread_local RowScratch<Scalar> scratch;
    scratch.fit(max_row);
    RowInput<Scalar> in;
    in.ld = L;
    in.local_kinds = ctx.local_kinds->data();
    in.rot = rot;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r / n, i = r % n, kb = static_cast<int64_t>(plan.sel[r].size());
      in.q = pq + (h * n + i) * HS;
      in.chosen = &plan.sel[r];
      in.places = &plan.places[r];
      in.rotated = shared.row(r);
      in.keys_t = pkt + h * HS * L;
      in.values = pv + h * L * HS;
      in.nloc = tl + i + 1;
      in.head = h;
      in.row = r;
      attend_row(cache, ctx, in, scratch, po + (h * n + i) * HS, cmt ? &dropped[r] : nullptr, observers);
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

template Tensor attend_cpu<float>(const LayerCache&, const ChunkContext&, const RetrievalPlan&, const Tensor&,
                                  const Tensor&, const Tensor&, CmtCount*, RowMass*, const HookList*);
template Tensor attend_cpu<double>(const LayerCache&, const ChunkContext&, const RetrievalPlan&, const Tensor&,
                                   const Tensor&, const Tensor&, CmtCount*, RowMass*, const HookList*);

}  // namespace lm
