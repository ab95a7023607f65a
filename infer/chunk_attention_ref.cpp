// chunk_attention_ref.cpp: attend_plan_reference (chunk_attention.h), the naive twin of the fast
// rows in chunk_attention.cpp. It shares nothing with them but the plan: keys are gathered into an
// explicit list, retrieved blocks rotated at their places by the rotary op, and the grouped
// softmax is written from its definition (the paper's Section 3.1, Appendix D), group by group, in
// f64. Slow on purpose: it is what the fast version is tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "infer/chunk_attention.h"
#include "landmark/tokens.h"
#include "nn/functional.h"
#include "tensor/create.h"

namespace lm {

namespace {

struct Key {
  std::vector<double> k, v;  // rotated key, value
  int32_t kind;
};

// Softmax over the entries `idx` of s, into p (other entries untouched).
void softmax_over(const std::vector<double>& s, const std::vector<size_t>& idx, std::vector<double>& p) {
  double m = -INFINITY, z = 0;
  for (size_t j : idx) m = std::max(m, s[j]);
  for (size_t j : idx) z += std::exp(s[j] - m);
  for (size_t j : idx) p[j] = std::exp(s[j] - m) / z;
}

// The weights of one row of keys whose last entry is the query itself, from the definition:
// blocks end at landmarks; the top group is the query's own block's regular tokens (up to the
// query; its own landmark excluded), the free landmarks of earlier blocks and the CMT; the
// controlled landmarks form one group; each earlier block's regular tokens form their own. A
// token of an earlier block weighs gate x (its probability in its block), with gate = P(free
// landmark), or P(CMT) x P(landmark in the controlled group), P(CMT) set to 0 below the cutoff.
std::vector<double> weights_by_definition(const std::vector<Key>& row, const std::vector<double>& s, double cutoff,
                                          bool* dropped) {
  const size_t len = row.size();
  std::vector<std::vector<size_t>> blocks(1);  // positions of each block, landmark last
  size_t cmt = len;
  for (size_t j = 0; j < len; ++j) {
    if (row[j].kind == kContextMiss) {
      cmt = j;
      continue;
    }
    blocks.back().push_back(j);
    if ((row[j].kind == kLandmark || row[j].kind == kControlledLandmark) && j + 1 < len) blocks.emplace_back();
  }
  // The query's own block is the last one; if the query is a landmark it closes that block.
  const std::vector<size_t>& own = blocks.back();
  std::vector<size_t> top, controlled;
  for (size_t j : own)
    if (row[j].kind == kRegular) top.push_back(j);
  for (size_t b = 0; b + 1 < blocks.size(); ++b) {
    const size_t lm = blocks[b].back();
    (row[lm].kind == kLandmark ? top : controlled).push_back(lm);
  }
  if (cmt < len) top.push_back(cmt);
  std::vector<double> p_top(len, 0), p_ctrl(len, 0), w(len, 0);
  softmax_over(s, top, p_top);
  if (!controlled.empty()) softmax_over(s, controlled, p_ctrl);
  // Dropped when below the cutoff; a cutoff of 1 drops every row (even a probability of exactly 1).
  double p_cmt = cmt < len ? p_top[cmt] : 0;
  const bool drop = p_cmt < cutoff || cutoff >= 1;
  if (dropped) *dropped = cmt < len && drop;
  if (drop) p_cmt = 0;
  for (size_t j : own)
    if (row[j].kind == kRegular) w[j] = p_top[j];
  for (size_t b = 0; b + 1 < blocks.size(); ++b) {
    const size_t lm = blocks[b].back();
    const double gate = row[lm].kind == kLandmark ? p_top[lm] : p_cmt * p_ctrl[lm];
    std::vector<size_t> members(blocks[b].begin(), blocks[b].end() - 1);
    std::vector<double> p_in(len, 0);
    softmax_over(s, members, p_in);
    for (size_t j : members) w[j] = gate * p_in[j];
  }
  return w;
}

}  // namespace

Tensor attend_plan_reference(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan,
                             const Tensor& q_rot, const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count,
                             RowMass* mass) {
  LM_CHECK(q_rot.device() == Device::CPU && cache.device == Device::CPU, "attend_plan_reference: CPU only");
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1), tl = L - n;
  const int64_t F = ctx.F, B1 = F + 1;
  LM_CHECK(static_cast<int64_t>(plan.sel.size()) == NH * n && static_cast<int64_t>(ctx.local_kinds->size()) == L,
           "attend_plan_reference: the plan or the local kinds do not fit q " << describe(q_rot));
  if (cache.store->needs_fetch()) cache.store->fetch(plan_blocks(plan));  // the chosen blocks' K/V from disk or f16
  const std::vector<double> q = q_rot.to_double_vector(), kl = k_rot.to_double_vector(), vl = v_loc.to_double_vector();
  const bool has_cmt = cache.cmt_key_rot.defined();
  const std::vector<double> cmt_key = has_cmt ? cache.cmt_key_rot.to_double_vector() : std::vector<double>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  std::vector<double> out(static_cast<size_t>(NH * n * HS), 0.0);
  if (mass) mass->assign(static_cast<size_t>(NH * n), std::vector<double>());
  for (int64_t h = 0; h < NH; ++h)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = h * n + i;
      std::vector<Key> row;
      if (has_cmt) row.push_back({std::vector<double>(cmt_key.begin() + h * HS, cmt_key.begin() + (h + 1) * HS),
                                  std::vector<double>(static_cast<size_t>(HS), 0.0), kContextMiss});
      for (size_t c = 0; c < plan.sel[r].size(); ++c) {
        // The block's regular keys of head h, (F, HS) un-rotated (the store keeps them as
        // (HS, F)), rotated at positions base .. base + F - 1 by the rotary op; its values (F, HS).
        const int64_t b = plan.sel[r][c], place = plan.base[r][c];
        Tensor kt({NH, HS, F}, cache.dtype), vb({NH, F, HS}, cache.dtype);
        std::memcpy(kt.raw_data(), cache.store->k(b), static_cast<size_t>(NH * HS * F) * dtype_size(cache.dtype));
        std::memcpy(vb.raw_data(), cache.store->v(b), static_cast<size_t>(NH * F * HS) * dtype_size(cache.dtype));
        std::vector<int32_t> pos(static_cast<size_t>(F));
        for (int64_t t = 0; t < F; ++t) pos[t] = static_cast<int32_t>(place + t);
        const Tensor k_h = kt.select(0, h).transpose(0, 1).to(DType::F64).reshape({1, 1, F, HS});
        const RotaryTables tables =
            rotary_tables(from_vector(pos, {1, F}), HS, ctx.rotary_base, DType::F64, Device::CPU);
        const std::vector<double> kr = rotary(k_h, tables).to_double_vector(), vr = vb.select(0, h).to_double_vector();
        for (int64_t t = 0; t < F; ++t)
          row.push_back({std::vector<double>(kr.begin() + t * HS, kr.begin() + (t + 1) * HS),
                         std::vector<double>(vr.begin() + t * HS, vr.begin() + (t + 1) * HS), kRegular});
        // Its gate: the landmark key as the cache keeps it (rotated at its scoring place), rotated
        // on by the rotary op to place + F; a landmark's value is not kept (its weight is 0).
        std::vector<double> kept(static_cast<size_t>(HS));
        LM_DISPATCH_FLOAT(cache.dtype, "attend_plan_reference", {
          int64_t stride = 0;
          const scalar_t* key = cache.scored_key<scalar_t>(h, b, &stride);
          for (int64_t d = 0; d < HS; ++d) kept[d] = static_cast<double>(key[d * stride]);
        });
        // The cache rotated it at position F in stingy mode, at its true position in exact mode.
        const int64_t scored_at = ctx.positions == PositionMode::Stingy ? F : (plan.first_gid + b) * B1 + F;
        const std::vector<int32_t> turn{static_cast<int32_t>(place + F - scored_at)};
        const std::vector<double> gate =
            rotary(from_vector(kept, {1, 1, 1, HS}),
                   rotary_tables(from_vector(turn, {1, 1}), HS, ctx.rotary_base, DType::F64, Device::CPU))
                .to_double_vector();
        row.push_back({gate, std::vector<double>(static_cast<size_t>(HS), 0.0), has_cmt ? kControlledLandmark : kLandmark});
      }
      for (int64_t j = 0; j <= tl + i; ++j) {
        const size_t at = static_cast<size_t>((h * L + j) * HS);
        row.push_back({std::vector<double>(kl.begin() + at, kl.begin() + at + HS),
                       std::vector<double>(vl.begin() + at, vl.begin() + at + HS), (*ctx.local_kinds)[j]});
      }
      std::vector<double> s(row.size());
      for (size_t j = 0; j < row.size(); ++j) {
        double d = 0;
        for (int64_t e = 0; e < HS; ++e) d += q[r * HS + e] * row[j].k[e];
        s[j] = d * scale;
      }
      bool dropped = false;
      const std::vector<double> w = weights_by_definition(row, s, has_cmt ? ctx.cmt_cutoff : 0.0, &dropped);
      for (size_t j = 0; j < row.size(); ++j)
        for (int64_t e = 0; e < HS; ++e) out[r * HS + e] += w[j] * row[j].v[e];
      if (mass) {  // the row, key by key: [CMT] | retrieved block c's F + 1 keys | tail | chunk up to i
        const size_t kb = plan.sel[r].size(), first = has_cmt ? 1 : 0;
        std::vector<double>& m = (*mass)[static_cast<size_t>(r)];
        m.assign(kb + 2, 0.0);
        for (size_t j = first; j < row.size(); ++j) {
          const int64_t at = static_cast<int64_t>(j - first);  // index after the CMT
          const size_t part = at < static_cast<int64_t>(kb) * B1 ? static_cast<size_t>(at / B1)
                              : at - static_cast<int64_t>(kb) * B1 < tl ? kb : kb + 1;
          m[part] += w[j];
        }
      }
      if (has_cmt && cmt_count) {
        ++cmt_count->rows;
        cmt_count->dropped += dropped;
      }
    }
  return from_vector(out, {NH, n, HS}).to(q_rot.dtype());
}

}  // namespace lm
