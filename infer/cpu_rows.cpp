// cpu_rows.cpp: the per-row pieces of a layer's cached attention on the CPU (cpu_rows.h), in the
// order of the three steps: scoring and choosing one head's blocks (select_head), placing one
// row's blocks (block_places), and one row's grouped softmax and values (attend_row). The chunk
// path calls them from its parallel loops (retrieval_plan.cpp, chunk_attention_cpu.cpp), the
// decode step from its one parallel region (beyond/decode_step.cpp).
#include "infer/cpu_rows.h"

#include <algorithm>
#include <cmath>

#include "infer/virtual_row.h"
#include "landmark/grouped_softmax.h"
#include "landmark/retrieval.h"
#include "nn/nn_math.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/vec_dot.h"

namespace lm {

// ---- step 1: scores and the top k of one head ----

double score_scale(DType dt, int64_t HS) {
  const double exact = 1.0 / std::sqrt(static_cast<double>(HS));
  return dt == DType::F32 ? static_cast<double>(static_cast<float>(exact)) : exact;
}

template <class Scalar>
void rotate_at_stingy_slot(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int64_t b, int64_t nb,
                           Scalar* out) {
  const int64_t turn = stingy_score_slot(b, nb, ctx.k) * (ctx.F + 1);
  int64_t stride = 0;
  const Scalar* key = cache.scored_key<Scalar>(h, b, &stride);
  const Scalar *cs = ctx.rope->cos_rows<Scalar>(turn, 1), *sn = ctx.rope->sin_rows<Scalar>(turn, 1);
  rotate_key_on(key, stride, cs, sn, 1, cache.HS, out);
}

template void rotate_at_stingy_slot<float>(const LayerCache&, const ChunkContext&, int64_t, int64_t, int64_t, float*);
template void rotate_at_stingy_slot<double>(const LayerCache&, const ChunkContext&, int64_t, int64_t, int64_t, double*);

constexpr int64_t kScanPiece = 1024;  // landmarks scored per GEMM call in select_head

template <class Scalar>
void select_head(const LayerCache& cache, const ChunkContext& ctx, const Scalar* q, int64_t n, int64_t h,
                 std::vector<int32_t>* sel) {
  const int64_t HS = cache.HS, nb = cache.key_count, cap = cache.key_capacity;
  const Scalar* rot_t = cache.keys_rot_t_buf.data<Scalar>() + cache.key_begin;
  const Scalar sc = static_cast<Scalar>(score_scale(cache.dtype, HS));
  const int64_t rescore_from = ctx.positions == PositionMode::Stingy ? std::max<int64_t>(0, nb - ctx.k) : nb;
  // Kept by each thread between calls (decoding runs this per head, layer and token).
  static thread_local std::vector<Scalar> piece, rotated;
  if (piece.size() < static_cast<size_t>(n * kScanPiece)) piece.resize(static_cast<size_t>(n * kScanPiece));
  if (rotated.size() < static_cast<size_t>(HS)) rotated.resize(static_cast<size_t>(HS));
  Scalar* rk = rotated.data();  // one landmark key rotated at its stingy slot
  std::vector<TopKStream<Scalar>> best = top_k_streams<Scalar>(n, std::min(ctx.k, nb));
  for (int64_t b0 = 0; b0 < nb; b0 += kScanPiece) {
    const int64_t len = std::min(kScanPiece, nb - b0);
    cpu::gemm_single<Scalar>(false, false, n, len, HS, static_cast<double>(sc), q, HS, rot_t + h * HS * cap + b0, cap,
                             0.0, piece.data(), kScanPiece);
    for (int64_t b = std::max(b0, rescore_from); b < b0 + len; ++b) {  // the k newest, at their slots
      rotate_at_stingy_slot(cache, ctx, h, b, nb, rk);
      for (int64_t i = 0; i < n; ++i) piece[i * kScanPiece + (b - b0)] = cpu::dot_vectors(q + i * HS, rk, HS) * sc;
    }
    for (int64_t i = 0; i < n; ++i) best[i].push(piece.data() + i * kScanPiece, b0, len);
  }
  for (int64_t i = 0; i < n; ++i) sel[i] = best[i].take();
}

template void select_head<float>(const LayerCache&, const ChunkContext&, const float*, int64_t, int64_t,
                                 std::vector<int32_t>*);
template void select_head<double>(const LayerCache&, const ChunkContext&, const double*, int64_t, int64_t,
                                  std::vector<int32_t>*);

// ---- step 2: where one row's blocks sit ----

PositionSpan retrieval_positions(const ChunkContext& ctx, int64_t nb) {
  const int64_t B1 = ctx.F + 1;
  if (nb == 0 || ctx.k == 0) return {};
  if (ctx.positions == PositionMode::Exact) return {0, ctx.blocks_done * B1};
  return {nb > ctx.k ? 0 : (ctx.k - nb + 1) * B1, (ctx.k + 1) * B1};
}

std::vector<int32_t> block_places(const std::vector<int32_t>& chosen, const ChunkContext& ctx, int64_t nb,
                                  int64_t first_gid) {
  const int64_t B1 = ctx.F + 1;
  std::vector<int32_t> places;
  if (chosen.empty()) return places;
  places.reserve(chosen.size());
  const std::vector<int32_t> slot =
      ctx.positions == PositionMode::Stingy ? stingy_attention_slots(chosen, nb, ctx.k) : std::vector<int32_t>();
  for (size_t c = 0; c < chosen.size(); ++c)
    places.push_back(
        static_cast<int32_t>(ctx.positions == PositionMode::Exact ? (first_gid + chosen[c]) * B1 : slot[c] * B1));
  return places;
}

// ---- step 3: one row's grouped softmax and values ----

namespace {

// Block b's gate for head h, the block placed at `place`: its landmark key as the cache keeps it,
// rotated on by gate_turn positions (rotate_key_on), into out (feature d at out[d * out_stride]).
// The one spelling of the gate for attend_row and rotate_block_keys, so that a row scoring a
// shared copy and a row rotating its own get the same bits.
template <class Scalar>
void rotate_gate(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int32_t b, int64_t place,
                 const RotaryColumns<Scalar>& rot, Scalar* out, int64_t out_stride) {
  const int64_t turn = gate_turn(ctx.positions, place);
  int64_t stride = 0;
  const Scalar* key = cache.scored_key<Scalar>(h, b, &stride);
  rotate_key_on(key, stride, rot.cos_at(turn), rot.sin_at(turn), rot.stride, cache.HS, out, out_stride);
}

}  // namespace

template <class Scalar>
void RowScratch<Scalar>::fit(int64_t max_row) {
  const size_t m = static_cast<size_t>(max_row);
  for (auto* v : {&s, &w})
    if (v->size() < m) v->resize(m);
  for (auto* v : {&kind, &block_of})
    if (v->size() < m) v->resize(m);
  if (block_start.size() < m + 1) block_start.resize(m + 1);
  if (vrows.size() < m) vrows.resize(m);
}

template <class Scalar>
int64_t attend_row(const LayerCache& cache, const ChunkContext& ctx, const RowInput<Scalar>& in,
                   RowScratch<Scalar>& scratch, Scalar* out, uint8_t* dropped, const HookList* observers) {
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
      const int64_t place = (*in.places)[c];  // the block's first position
      cpu::rotated_vec_times_rows(in.q, keys_t, HS, F, F, in.rot.cos_at(place), in.rot.sin_at(place), in.rot.stride,
                                  sc);
      rotate_gate(cache, ctx, h, chosen[c], place, in.rot, scratch.gate.data(), 1);
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
  if (observers)
    for (RetrievalHooks* o : *observers) o->row_scores(cache, in, layout, s, len, in.row);
  gsm::row_forward<Scalar>(layout, static_cast<int>(len - 1), s, s, w);  // scores -> P' in place (allowed)
  const bool cut = cmt && gsm::cmt_dropped(s[0], ctx.cmt_cutoff);        // s[0] = P'(CMT), before the cutoff
  if (cmt && dropped) *dropped = cut;
  cpu::weighted_row_sum(w, vrows, len, HS, out);
  if (observers)
    for (RetrievalHooks* o : *observers) o->row_done(cache, in.row, h, cmt ? static_cast<double>(s[0]) : 1.0, cut, out);
  return len;
}

template <class Scalar>
void rotate_block_keys(const LayerCache& cache, const ChunkContext& ctx, int64_t h, int32_t b, int64_t place,
                       const RotaryColumns<Scalar>& rot, Scalar* out) {
  const int64_t HS = cache.HS, F = ctx.F, B1 = F + 1;
  const Scalar* keys_t = static_cast<const Scalar*>(cache.store->k(b)) + h * HS * F;  // (HS, F), un-rotated
  for (int64_t i = 0; i < HS / 2; ++i) {
    const Scalar *x0 = keys_t + (2 * i) * F, *x1 = keys_t + (2 * i + 1) * F;
    const Scalar *c = rot.cos_at(place) + i * rot.stride, *sn = rot.sin_at(place) + i * rot.stride;
    Scalar *y0 = out + (2 * i) * B1, *y1 = out + (2 * i + 1) * B1;
    for (int64_t t = 0; t < F; ++t) nnmath::rotate_pair(x0[t], x1[t], c[t], sn[t], y0[t], y1[t]);
  }
  rotate_gate(cache, ctx, h, b, place, rot, out + F, B1);  // column F: the gate
}

bool share_rotated_keys(int64_t distinct, int64_t pairs, int64_t copy_bytes) {
  constexpr int64_t kMaxBytes = int64_t(32) << 20;
  return distinct > 0 && 2 * distinct <= pairs && distinct <= kMaxBytes / std::max<int64_t>(copy_bytes, 1);
}

template struct RowScratch<float>;
template struct RowScratch<double>;
template int64_t attend_row<float>(const LayerCache&, const ChunkContext&, const RowInput<float>&, RowScratch<float>&,
                                   float*, uint8_t*, const HookList*);
template int64_t attend_row<double>(const LayerCache&, const ChunkContext&, const RowInput<double>&,
                                    RowScratch<double>&, double*, uint8_t*, const HookList*);
template void rotate_block_keys<float>(const LayerCache&, const ChunkContext&, int64_t, int32_t, int64_t,
                                       const RotaryColumns<float>&, float*);
template void rotate_block_keys<double>(const LayerCache&, const ChunkContext&, int64_t, int32_t, int64_t,
                                        const RotaryColumns<double>&, double*);

}  // namespace lm
