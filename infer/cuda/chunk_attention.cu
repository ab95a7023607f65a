// infer/cuda/chunk_attention.cu: the CUDA rows of attend_plan (infer/chunk_attention.h), given
// the host's retrieval plan. Block K/V stay in the host BlockStore, and the distinct retrieved
// blocks of a chunk cross to the device in one staging copy, or, kept on the device
// (InferConfig::blocks_on_device), one kernel gathers them; their keys are rotated at each place they
// take, and a warp per (head, query) runs its virtual row: scores and output a lane per key and
// per feature, the row itself through gsm::row_forward, the very row function of the CPU twin
// (cpu_rows.cpp) and of training. Not flash attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "infer/cuda/chunk_attention.h"
#include "infer/virtual_row.h"
#include "landmark/grouped_softmax.h"
#include "nn/functional.h"
#include "tensor/create.h"
#include "tensor/cuda/common.cuh"
#include "tensor/ops.h"

namespace lm {
namespace cuda {

namespace {

// Everything the warp of row r = h * n + i needs, passed by value. The scratch rows
// (max_row entries each, max_row = (CMT) + kmax (F+1) + L) are in global memory: a row is too long for
// registers and the rows of a block too many for shared memory.
template <class Scalar>
struct VirtualRows {
  const Scalar* q;            // (NH, n, HS) rotated queries
  const Scalar* k_loc;        // (NH, L, HS) rotated keys of [tail | chunk]
  const Scalar* v_loc;        // (NH, L, HS) values of [tail | chunk]
  const Scalar* keys;         // (P, NH, F+1, HS) retrieved keys, rotated, gate last, one set per (block, place)
  const Scalar* vals;         // (U, NH, F, HS) retrieved values (regular tokens), one set per distinct block
  const int32_t* count;       // (rows) blocks retrieved by each row
  const int32_t* key_of;      // (rows, kmax) which key set of `keys` the row's c-th block uses
  const int32_t* val_of;      // (rows, kmax) which value set of `vals` it uses
  const int32_t* local_kind;  // (L) kinds of [tail | chunk]
  const Scalar* cmt_key;      // (NH, HS) the CMT's rotated key, or null (no CMT)
  int32_t* dropped;           // (rows) 1 where the cutoff dropped S(CMT) (gsm::cmt_dropped; with a CMT)
  Scalar* s;                  // (rows, max_row) scores, turned into P' in place
  Scalar* w;                  // (rows, max_row) final weights
  int32_t* layout;            // (rows, 3 max_row + 1) kind | block_of | block_start of each row
  Scalar* out;                // (NH, n, HS)
  int64_t NH, n, HS, L, F, kmax, max_row;
  Scalar scale;
  double cmt_cutoff;
};

// The CPU twin's score (attend_row, cpu_rows.cpp) in the same order: products added one feature at
// a time, d = 0 .. HS-1. With --fmad=false both round every product and sum alike.
template <class Scalar>
__device__ Scalar dot_in_order(const Scalar* a, const Scalar* b, int64_t n) {
  Scalar s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

constexpr int kWarp = 32;

// A warp per row r = h * n + i; each value is computed by one lane in the CPU twin's order, so the
// row is what the CPU computes (up to exp and the GEMMs outside it), whichever lane does what. A
// row is the CMT (with one), its kb retrieved blocks (F regular keys and a landmark each), then the
// local keys 0..tl+i (the layout: virtual_row_layout, as on the CPU). Three steps:
//   1. the scores: a lane per key (keys lane, lane + 32, ...), each a dot_in_order;
//   2. lane 0 builds the layout and runs gsm::row_forward, the shared definition (the training
//      kernels in landmark/cuda/attention.cu give a warp to each row and spell it again), S -> P'
//      in place and the weights;
//   3. y = sum_j w_j v_j: a lane per feature d, in the CPU's order (ascending j, zero weights
//      skipped).
// The first version gave one thread to a row: a decoded token has NH rows, so 4 threads did all
// of a layer's work, which was most of a decode step's time on the GPU (docs/cuda.md section 12).
template <class Scalar>
__global__ void virtual_rows_kernel(VirtualRows<Scalar> a, int64_t rows) {
  const int64_t B1 = a.F + 1, HS = a.HS, tl = a.L - a.n;
  const bool cmt = a.cmt_key != nullptr;
  const int64_t first = cmt ? 1 : 0;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps_per_block = blockDim.x / kWarp;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / kWarp; r < rows;
       r += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t h = r / a.n, i = r % a.n;
    const Scalar* q = a.q + r * HS;  // (h, i) of (NH, n, HS)
    Scalar* s = a.s + r * a.max_row;
    Scalar* w = a.w + r * a.max_row;
    const int32_t* key_of = a.key_of + r * a.kmax;
    const int32_t* val_of = a.val_of + r * a.kmax;
    const int64_t kb = a.count[r], nloc = tl + i + 1, len = first + kb * B1 + nloc;
    for (int64_t j = lane; j < len; j += kWarp) {
      const Scalar* key;
      const int64_t x = j - first;  // position after the CMT
      if (x < 0)
        key = a.cmt_key + h * HS;
      else if (x < kb * B1)
        key = a.keys + ((key_of[x / B1] * a.NH + h) * B1 + x % B1) * HS;
      else
        key = a.k_loc + (h * a.L + (x - kb * B1)) * HS;
      s[j] = dot_in_order(q, key, HS) * a.scale;
    }
    __syncwarp();  // every score is in place before lane 0 reads the row
    if (lane == 0) {
      int32_t* kind = a.layout + r * (3 * a.max_row + 1);
      int32_t* block_of = kind + a.max_row;
      int32_t* block_start = block_of + a.max_row;
      const RowLayout layout =
          virtual_row_layout(cmt, a.cmt_cutoff, kb, a.F, a.local_kind, nloc, kind, block_of, block_start);
      gsm::row_forward<Scalar>(layout, static_cast<int>(len - 1), s, s, w);  // S -> P' in place (allowed)
      if (cmt) a.dropped[r] = gsm::cmt_dropped(s[0], a.cmt_cutoff);          // s[0] = P'(CMT), before the cutoff
    }
    __syncwarp();  // the weights are in place before the lanes read them
    Scalar* y = a.out + r * HS;
    for (int64_t d = lane; d < HS; d += kWarp) {
      Scalar acc = 0;
      for (int64_t c = 0; c < kb; ++c) {
        // The F regular tokens; the gate (weight 0) has no value kept.
        const Scalar* vals = a.vals + (val_of[c] * a.NH + h) * a.F * HS + d;
        for (int64_t t = 0; t < a.F; ++t) {
          const Scalar wj = w[first + c * B1 + t];
          if (wj != Scalar(0)) acc += wj * vals[t * HS];
        }
      }
      for (int64_t j = 0; j < nloc; ++j) {
        const Scalar wj = w[first + kb * B1 + j];
        if (wj != Scalar(0)) acc += wj * a.v_loc[(h * a.L + j) * HS + d];
      }
      y[d] = acc;
    }
  }
}

// Stages blocks kept on the device (BlockStore's device backing) the way the host path stages
// them: out (2, U, E), K of block u at [0][u] transposed back to (NH, F, HS) from the store's
// (NH, HS, F), V at [1][u] as stored. kv: 2U device addresses, K then V of each block.
template <class Scalar>
__global__ void gather_blocks_kernel(const unsigned long long* kv, Scalar* out, int64_t U, int64_t NH, int64_t F,
                                     int64_t HS) {
  const int64_t E = NH * F * HS, total = 2 * U * E;
  LM_CUDA_FOR(x, total) {
    const int64_t which = x / (U * E), u = (x / E) % U, e = x % E;
    const Scalar* src = reinterpret_cast<const Scalar*>(kv[2 * u + which]);
    if (which == 1) {
      out[x] = src[e];
    } else {
      const int64_t h = e / (F * HS), t = (e / HS) % F, d = e % HS;
      out[x] = src[(h * HS + d) * F + t];
    }
  }
}

// Which distinct blocks a plan stages (U of them, numbered in ascending cached index, which is
// chronological) and which (block, place) key sets it rotates (P, numbered in ascending order):
// a block placed at several places (stingy mode) needs its keys once per place.
struct Staging {
  std::map<int32_t, int32_t> staged;                    // cached index -> staged index
  std::map<std::pair<int32_t, int32_t>, int32_t> sets;  // (cached index, place) -> key set
  int64_t kmax = 0;                                     // the most blocks any row chose
  int64_t U() const { return static_cast<int64_t>(staged.size()); }
  int64_t P() const { return static_cast<int64_t>(sets.size()); }
};

Staging plan_staging(const RetrievalPlan& plan) {
  Staging st;
  for (size_t r = 0; r < plan.sel.size(); ++r) {
    st.kmax = std::max<int64_t>(st.kmax, static_cast<int64_t>(plan.sel[r].size()));
    for (size_t c = 0; c < plan.sel[r].size(); ++c) {
      st.staged.emplace(plan.sel[r][c], 0);
      st.sets.emplace(std::make_pair(plan.sel[r][c], plan.places[r][c]), 0);
    }
  }
  int32_t next = 0;
  for (auto& [block, u] : st.staged) u = next++;
  next = 0;
  for (auto& [key, p] : st.sets) p = next++;
  return st;
}

// The host's tables for the rows and the key sets. meta: the small i32 tables, sent in one
// transfer: count (rows) | key_of (rows, kmax) | val_of (rows, kmax) | local kinds (L) |
// set_block (P, the staged index of each key set's block). Per key set: the positions of its F
// regular keys, its gate's block and turn (LayerCache::gate_keys). identity: every block at one
// place, key set p = staged block p, so the key sets need no gather.
struct RowTables {
  std::vector<int32_t> meta, set_pos, gate_block, gate_turns;
  bool identity = true;
};

RowTables row_tables(const Staging& st, const RetrievalPlan& plan, const ChunkContext& ctx, int64_t L) {
  const int64_t rows = static_cast<int64_t>(plan.sel.size()), kmax = st.kmax, P = st.P(), F = ctx.F;
  RowTables t;
  t.meta.assign(static_cast<size_t>(rows * (1 + 2 * kmax) + L + P), 0);
  int32_t* count = t.meta.data();
  int32_t* key_of = count + rows;
  int32_t* val_of = key_of + rows * kmax;
  int32_t* local_kind = val_of + rows * kmax;
  int32_t* set_block = local_kind + L;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int32_t>& sel = plan.sel[r];
    count[r] = static_cast<int32_t>(sel.size());
    for (size_t c = 0; c < sel.size(); ++c) {
      key_of[r * kmax + static_cast<int64_t>(c)] = st.sets.at({sel[c], plan.places[r][c]});
      val_of[r * kmax + static_cast<int64_t>(c)] = st.staged.at(sel[c]);
    }
  }
  for (int64_t j = 0; j < L; ++j) local_kind[j] = (*ctx.local_kinds)[j];
  t.identity = P == st.U();
  t.set_pos.resize(static_cast<size_t>(P * F));
  t.gate_block.resize(static_cast<size_t>(P));
  t.gate_turns.resize(static_cast<size_t>(P));
  for (const auto& [key, p] : st.sets) {
    set_block[p] = st.staged.at(key.first);
    t.identity = t.identity && set_block[p] == p;
    for (int64_t i = 0; i < F; ++i) t.set_pos[p * F + i] = static_cast<int32_t>(key.second + i);
    t.gate_block[p] = key.first;
    t.gate_turns[p] = static_cast<int32_t>(gate_turn(ctx.positions, key.second));
  }
  return t;
}

// K then V of the staged blocks, (2, U, E) on the device, E = NH * F * HS, K transposed back to
// (NH, F, HS). A device store: one gather kernel from the blocks' device addresses, which cross as
// raw bytes in an i32 tensor (the library has no 64-bit integer dtype), two words per address, K
// then V of each block. A host store: one host buffer and one copy to the device.
Tensor stage_blocks(const LayerCache& cache, const Staging& st, int64_t NH, int64_t F, int64_t HS, DType dt) {
  const int64_t U = st.U(), E = NH * F * HS;
  if (cache.store->device() == Device::CUDA) {
    std::vector<unsigned long long> addr(static_cast<size_t>(2 * U));
    for (const auto& [block, u] : st.staged) {
      addr[static_cast<size_t>(2 * u)] = reinterpret_cast<unsigned long long>(cache.store->k(block));
      addr[static_cast<size_t>(2 * u + 1)] = reinterpret_cast<unsigned long long>(cache.store->v(block));
    }
    Tensor words({4 * U}, DType::I32);
    std::memcpy(words.raw_data(), addr.data(), addr.size() * sizeof(unsigned long long));
    const Tensor words_d = words.to(Device::CUDA);
    Tensor staged_d({2, U, E}, dt, Device::CUDA);
    LM_DISPATCH_FLOAT(dt, "chunk_attention gather", {
      gather_blocks_kernel<scalar_t><<<blocks_for(2 * U * E), kThreads>>>(
          static_cast<const unsigned long long*>(words_d.raw_data()), staged_d.data<scalar_t>(), U, NH, F, HS);
      LM_CUDA_CHECK_LAUNCH("gather_blocks_kernel");
    });
    return staged_d;
  }
  Tensor host({2, U, E}, dt);
  const size_t bytes = static_cast<size_t>(E) * dtype_size(dt);
  char* dst = static_cast<char*>(host.raw_data());
  LM_DISPATCH_FLOAT(dt, "chunk_attention staging", {
    for (const auto& [block, u] : st.staged) {
      // The store keeps K transposed per head, (NH, HS, F) (the CPU scores along tokens);
      // the kernels here read (NH, F, HS), so K is transposed back while it is staged.
      const scalar_t* ksrc = static_cast<const scalar_t*>(cache.store->k(block));
      scalar_t* kdst = reinterpret_cast<scalar_t*>(dst + static_cast<size_t>(u) * bytes);
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t d = 0; d < HS; ++d)
          for (int64_t t = 0; t < F; ++t) kdst[(h * F + t) * HS + d] = ksrc[(h * HS + d) * F + t];
      std::memcpy(dst + static_cast<size_t>(U + u) * bytes, cache.store->v(block), bytes);
    }
  });
  return host.to(Device::CUDA);
}

// The P key sets, (P, NH, F+1, HS): each block's staged keys (k_staged (U, E)) gathered once per
// place (embedding is exactly a row gather; set_block: (P) i32 on the device) unless `identity`,
// rotated at the set's own positions, and ended by its gate: the landmark key from fast memory
// rotated on to place + F (LayerCache::gate_keys, the CPU's rotate_key_on as tensor ops).
Tensor rotated_key_sets(const LayerCache& cache, const ChunkContext& ctx, const Tensor& k_staged,
                        const Tensor& set_block, const RowTables& t, int64_t P, int64_t NH, int64_t HS) {
  const int64_t F = ctx.F;
  const Tensor k_sets = t.identity ? k_staged : embedding(k_staged, set_block);
  const RotaryTables flat = ctx.rope->tables(t.set_pos);  // (1, P * F, HS/2): cached rows
  const RotaryTables rt{flat.cos.reshape({P, F, HS / 2}), flat.sin.reshape({P, F, HS / 2})};
  const Tensor regular = rotary(k_sets.reshape({P, NH, F, HS}), rt);
  return concat({regular, cache.gate_keys(t.gate_block, t.gate_turns, *ctx.rope)}, 2);
}

// The pointers and sizes of virtual_rows_kernel's rows: q_rot, k_rot, v_loc, keys, vals, the
// meta tables on the device (meta_p), the CMT key, and the scratch sw (2, rows, max_row), layout
// and dropped; out receives the rows' outputs.
template <class Scalar>
VirtualRows<Scalar> virtual_rows(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot,
                                 const Tensor& k_rot, const Tensor& v_loc, const Tensor& keys, const Tensor& vals,
                                 const int32_t* meta_p, int64_t kmax, Tensor& sw, Tensor& layout, Tensor& dropped,
                                 Tensor& out) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), rows = NH * n;
  const bool cmt = cache.cmt_key_rot.defined(), staged = keys.defined();
  VirtualRows<Scalar> a;
  a.q = q_rot.data<Scalar>();
  a.k_loc = k_rot.data<Scalar>();
  a.v_loc = v_loc.data<Scalar>();
  a.keys = staged ? keys.data<Scalar>() : nullptr;
  a.vals = staged ? vals.data<Scalar>() : nullptr;
  a.count = meta_p;
  a.key_of = meta_p + rows;
  a.val_of = meta_p + rows + rows * kmax;
  a.local_kind = meta_p + rows * (1 + 2 * kmax);
  a.cmt_key = cmt ? cache.cmt_key_rot.data<Scalar>() : nullptr;
  a.dropped = cmt ? dropped.data<int32_t>() : nullptr;
  a.cmt_cutoff = ctx.cmt_cutoff;
  a.max_row = sw.size(2);
  a.s = sw.data<Scalar>();
  a.w = sw.data<Scalar>() + rows * a.max_row;
  a.layout = layout.data<int32_t>();
  a.out = out.data<Scalar>();
  a.NH = NH;
  a.n = n;
  a.HS = HS;
  a.L = k_rot.size(1);
  a.F = ctx.F;
  a.kmax = kmax;
  a.scale = static_cast<Scalar>(1.0 / std::sqrt(static_cast<double>(HS)));
  return a;
}

}  // namespace

Tensor attend_plan(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, Tensor* head_weights, CmtCount* cmt_count) {
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), HS = q_rot.size(2), L = k_rot.size(1);
  const int64_t F = ctx.F, B1 = F + 1, rows = NH * n;
  const DType dt = q_rot.dtype();
  LM_CHECK(q_rot.device() == Device::CUDA && q_rot.is_contiguous() && k_rot.is_contiguous() && v_loc.is_contiguous(),
           "chunk_attention on cuda: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc)
                                         << " must be contiguous cuda tensors");
  LM_CHECK(static_cast<int64_t>(plan.sel.size()) == rows && plan.places.size() == plan.sel.size(),
           "chunk_attention on cuda: a plan for " << plan.sel.size() << " rows, expected " << rows);
  Tensor out({NH, n, HS}, dt, Device::CUDA);
  if (rows == 0) return out;

  // --- what to stage and rotate; the small tables in one transfer ---
  const Staging st = plan_staging(plan);
  const int64_t U = st.U(), P = st.P(), kmax = st.kmax;
  const RowTables tables = row_tables(st, plan, ctx, L);
  const Tensor meta_d = from_vector(tables.meta, {static_cast<int64_t>(tables.meta.size())}).to(Device::CUDA);

  // --- stage K then V of the U blocks, then rotate the keys once per (block, place) ---
  Tensor keys, vals;  // (P, NH, F+1, HS) rotated with the gates last, (U, E)
  if (U > 0) {
    const Tensor staged_d = stage_blocks(cache, st, NH, F, HS, dt);  // (2, U, E)
    vals = staged_d.select(0, 1);
    keys = rotated_key_sets(cache, ctx, staged_d.select(0, 0), meta_d.narrow(0, rows * (1 + 2 * kmax) + L, P), tables,
                            P, NH, HS);
  }

  // --- a warp per (head, query) ---
  const bool cmt = cache.cmt_key_rot.defined();
  LM_CHECK(
      !cmt || (cache.cmt_key_rot.device() == Device::CUDA && cache.cmt_key_rot.is_contiguous()),
      "chunk_attention on cuda: the CMT key " << describe(cache.cmt_key_rot) << " must be a contiguous cuda tensor");
  const int64_t max_row = (cmt ? 1 : 0) + kmax * B1 + L;
  Tensor sw({2, rows, max_row}, dt, Device::CUDA);                   // s -> P', then w
  Tensor layout({rows, 3 * max_row + 1}, DType::I32, Device::CUDA);  // kind | block_of | block_start
  Tensor dropped = zeros({cmt ? rows : 0}, DType::I32, Device::CUDA);
  LM_DISPATCH_FLOAT(dt, "chunk_attention", {
    const VirtualRows<scalar_t> a = virtual_rows<scalar_t>(cache, ctx, q_rot, k_rot, v_loc, keys, vals,
                                                           meta_d.data<int32_t>(), kmax, sw, layout, dropped, out);
    virtual_rows_kernel<scalar_t><<<blocks_for(rows * kWarp), kThreads>>>(a, rows);
    LM_CUDA_CHECK_LAUNCH("virtual_rows_kernel");
  });
  if (head_weights) *head_weights = sw.select(0, 1).narrow(0, ctx.capture->head * n, n).to(Device::CPU);
  if (cmt && cmt_count) {
    cmt_count->rows += rows;
    for (int32_t d : dropped.to_vector<int32_t>()) cmt_count->dropped += d;
  }
  return out;
}

}  // namespace cuda
}  // namespace lm
