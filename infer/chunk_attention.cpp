// chunk_attention.cpp: retrieval + grouped softmax for one chunk of one layer (chunk_attention.h).
//
// For query i of head h the keys form one "virtual row": the k' retrieved blocks in
// chronological order (each F regular tokens and its landmark, at their mapped positions), then
// the local keys [tail | chunk] up to i. The row's layout (which block every key is in) is built
// on the spot and gsm::row_forward gives the weights, so a retrieved block is gated by its
// landmark exactly as an earlier block is in training. With exact positions and every cached
// block retrieved, the virtual row *is* the one-shot row: the equivalence test relies on that.
#include "infer/chunk_attention.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "landmark/grouped_softmax.h"
#include "landmark/retrieval.h"
#include "nn/functional.h"
#include "tensor/cpu/parallel.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

LayerCache::LayerCache(int64_t nh, int64_t f, int64_t hs, DType dt, int64_t capacity, const std::string& path)
    : store(std::make_unique<BlockStore>(nh * (f + 1) * hs, dt, capacity, path)), NH(nh), F(f), HS(hs), dtype(dt) {
  tail_k = zeros({nh, 0, hs}, dt);
  tail_v = zeros({nh, 0, hs}, dt);
}

int64_t LayerCache::absorb(const Tensor& k_loc, const Tensor& v_loc, const std::vector<int32_t>& kinds) {
  const int64_t L = k_loc.size(1);
  LM_CHECK(static_cast<int64_t>(kinds.size()) == L, "LayerCache: " << kinds.size() << " kinds for " << L << " keys");
  int64_t begin = 0, completed = 0;
  for (int64_t j = 0; j < L; ++j) {
    if (kinds[j] != kLandmark) continue;
    LM_CHECK(j - begin == F, "LayerCache: a block of " << j - begin << " regular tokens (F = " << F << ")");
    Tensor kb = k_loc.narrow(1, begin, F + 1).contiguous(), vb = v_loc.narrow(1, begin, F + 1).contiguous();
    store->append(kb.raw_data(), vb.raw_data());
    landmark_keys.push_back(k_loc.select(1, j).contiguous());
    while (static_cast<int64_t>(landmark_keys.size()) > store->size()) landmark_keys.pop_front();  // capacity
    begin = j + 1;
    ++completed;
  }
  tail_len = L - begin;
  tail_k = k_loc.narrow(1, begin, tail_len).contiguous();
  tail_v = v_loc.narrow(1, begin, tail_len).contiguous();
  return completed;
}

namespace {

// Dot product with an explicit summation order: four independent partial sums (which the
// compiler can keep in vector lanes) added at the end. Deterministic and fast without
// -ffast-math, which would let the compiler reorder sums on its own.
template <class T> T dot(const T* a, const T* b, int64_t n) {
  T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < n; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

template <class T>
Tensor attend(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
              const Tensor& v_loc, RetrievalRecord* rec) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const int64_t F = ctx.F, B1 = F + 1, nb = cache.store->size();
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(HS)));
  const DType dt = q_rot.dtype();
  const int64_t first_gid = ctx.blocks_done - nb;  // global index of the oldest cached block

  // --- 1. retrieval: every query scores every cached landmark key, keeps its top k ---
  std::vector<std::vector<int32_t>> sel(static_cast<size_t>(NH * n));
  if (nb > 0 && ctx.k > 0) {
    Tensor lk({NH, nb, HS}, dt);
    for (int64_t b = 0; b < nb; ++b) lk.select(1, b).copy_(cache.landmark_keys[b]);
    std::vector<int32_t> score_pos(static_cast<size_t>(nb));
    std::vector<int32_t> slots = stingy_score_slots(nb, ctx.k);
    for (int64_t b = 0; b < nb; ++b)
      score_pos[b] = static_cast<int32_t>(ctx.positions == PositionMode::Exact ? (first_gid + b) * B1 + F : slots[b] * B1 + F);
    RotaryTables rt = rotary_tables(from_vector(score_pos, {1, nb}), HS, ctx.rotary_base, dt, Device::CPU);
    Tensor lk_rot = rotary(lk.unsqueeze(0), rt).squeeze(0);
    Tensor scores = mul(matmul(q_rot, lk_rot, false, true), static_cast<double>(scale));  // (NH, n, nb)
    sel = select_blocks<T>(scores.data<T>(), NH, n, nb, ctx.k, ctx.granularity);
  }
  std::set<int32_t> unique;
  for (const auto& s : sel) unique.insert(s.begin(), s.end());
  if (rec) *rec = RetrievalRecord{ctx.chunk, ctx.layer, nb, static_cast<int64_t>(unique.size()), n};

  // --- 2. where each chosen block sits, and its keys rotated there (once per (block, place)) ---
  std::vector<std::vector<int32_t>> base(sel.size());  // first position of each chosen block
  std::map<std::pair<int32_t, int32_t>, Tensor> rotated;
  for (size_t r = 0; r < sel.size(); ++r) {
    if (sel[r].empty()) continue;
    std::vector<int32_t> slot = ctx.positions == PositionMode::Stingy ? stingy_attention_slots(sel[r], nb, ctx.k)
                                                                      : std::vector<int32_t>();
    for (size_t c = 0; c < sel[r].size(); ++c) {
      const int32_t p = static_cast<int32_t>(ctx.positions == PositionMode::Exact ? (first_gid + sel[r][c]) * B1 : slot[c] * B1);
      base[r].push_back(p);
      rotated.emplace(std::make_pair(sel[r][c], p), Tensor());
    }
  }
  for (auto& [key, t] : rotated) {
    Tensor kb({1, NH, B1, HS}, dt);
    std::memcpy(kb.raw_data(), cache.store->k(key.first), static_cast<size_t>(NH * B1 * HS) * dtype_size(dt));
    RotaryTables rt = rotary_tables(arange(key.second, key.second + B1, 1, DType::I32).reshape({1, B1}), HS,
                                    ctx.rotary_base, dt, Device::CPU);
    t = rotary(kb, rt).squeeze(0);  // (NH, F+1, HS)
  }

  // --- 3. per (head, query): the virtual row, its grouped softmax, the weighted values ---
  Tensor out = zeros({NH, n, HS}, dt);
  const T* pq = q_rot.data<T>();
  const T* pk = k_rot.data<T>();
  const T* pv = v_loc.data<T>();
  T* po = out.data<T>();
  const std::vector<int32_t>& lkind = *ctx.local_kinds;
  const int64_t max_row = ctx.k * B1 + L;
  std::vector<AttentionCapture::Row> captured(ctx.capture ? static_cast<size_t>(n) : 0);
  cpu::parallel_for(NH * n, max_row * HS * 2, [&](int64_t r0, int64_t r1) {
    std::vector<T> s(static_cast<size_t>(max_row)), pp(static_cast<size_t>(max_row)), w(static_cast<size_t>(max_row));
    std::vector<int32_t> kind(static_cast<size_t>(max_row)), block_of(static_cast<size_t>(max_row)),
        block_start(static_cast<size_t>(max_row + 1));
    std::vector<const T*> vrows(static_cast<size_t>(max_row));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t h = r / n, i = r % n;
      const T* q = pq + (h * n + i) * HS;
      const std::vector<int32_t>& chosen = sel[r];
      const int64_t kb = static_cast<int64_t>(chosen.size()), len = kb * B1 + tl + i + 1;
      for (int64_t c = 0; c < kb; ++c) {
        const T* keys = rotated.at({chosen[c], base[r][c]}).template data<T>() + h * B1 * HS;
        const T* vals = static_cast<const T*>(cache.store->v(chosen[c])) + h * B1 * HS;
        for (int64_t t = 0; t < B1; ++t) {
          s[c * B1 + t] = dot(q, keys + t * HS, HS) * scale;
          kind[c * B1 + t] = t < F ? kRegular : kLandmark;
          vrows[c * B1 + t] = vals + t * HS;
        }
      }
      for (int64_t j = 0; j < tl + i + 1; ++j) {
        s[kb * B1 + j] = dot(q, pk + (h * L + j) * HS, HS) * scale;
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
      T* y = po + (h * n + i) * HS;
      for (int64_t j = 0; j < len; ++j) {
        const T wj = w[j];
        if (wj == T(0)) continue;
        const T* vr = vrows[j];
        for (int64_t d = 0; d < HS; ++d) y[d] += wj * vr[d];
      }
      if (ctx.capture && h == ctx.capture->head) {
        AttentionCapture::Row& row = captured[i];
        row.query = ctx.aug_start + i;
        for (int64_t c = 0; c < kb; ++c) {
          row.retrieved.push_back(first_gid + chosen[c]);
          for (int64_t t = 0; t < B1; ++t) {
            row.keys.push_back((first_gid + chosen[c]) * B1 + t);  // true global positions
            row.weights.push_back(static_cast<double>(w[c * B1 + t]));
          }
        }
        for (int64_t j = 0; j < tl + i + 1; ++j) {
          row.keys.push_back(ctx.aug_start - tl + j);
          row.weights.push_back(static_cast<double>(w[kb * B1 + j]));
        }
      }
    }
  });
  if (ctx.capture)
    for (auto& row : captured) ctx.capture->rows.push_back(std::move(row));
  return out;
}

}  // namespace

Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                       const Tensor& v_loc, RetrievalRecord* rec) {
  LM_CHECK(q_rot.dim() == 3 && k_rot.dim() == 3 && v_loc.shape() == k_rot.shape() && q_rot.size(0) == k_rot.size(0) &&
               q_rot.size(2) == k_rot.size(2) && k_rot.size(1) >= q_rot.size(1),
           "chunk_attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc));
  LM_CHECK(ctx.local_kinds && static_cast<int64_t>(ctx.local_kinds->size()) == k_rot.size(1),
           "chunk_attention: need one kind per local key");
  Tensor out;
  LM_DISPATCH_FLOAT(q_rot.dtype(), "chunk_attention", {
    out = attend<scalar_t>(cache, ctx, q_rot.contiguous(), k_rot.contiguous(), v_loc.contiguous(), rec);
  });
  return out;
}

}  // namespace lm
