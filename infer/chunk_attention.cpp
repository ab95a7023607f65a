// chunk_attention.cpp: the three steps of a layer's attention for one chunk together
// (chunk_attention), and step 3 sent to its device (attend_plan): the CPU rows in
// chunk_attention_cpu.cpp (each row by attend_row, cpu_rows.cpp), the CUDA rows in
// infer/cuda/chunk_attention.cu. What the attention reports beside its output (captured rows,
// the trace, the retrieval record) is built in attention_record.cpp.
//
// For query i of head h the keys form one "virtual row" (virtual_row.h): with a context-miss
// token the CMT first, then the k' retrieved blocks in chronological order (each F regular tokens
// and its landmark, at their planned places), then the local keys [tail | chunk] up to i. The
// row's layout is built on the spot and gsm::row_forward gives the weights, so a retrieved block
// is gated by its landmark exactly as an earlier block is in training (and by the CMT too, when
// there is one). With exact positions and every cached block retrieved, the virtual row *is* the
// one-shot row: the equivalence test relies on that. The rows' oracle is the end-to-end
// reference (reference.h).
#include "infer/chunk_attention.h"

#include <algorithm>

#include "infer/attention_record.h"
#include "infer/chunk_attention_cpu.h"
#include "infer/cuda/chunk_attention.h"

namespace lm {

namespace {

// The CUDA rows (infer/cuda/chunk_attention.cu) and, when capturing, the captured head's weights
// brought back to build the same rows as the CPU.
template <class Scalar>
Tensor attend_cuda(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt_count, RowMass* mass) {
  LM_CHECK(mass == nullptr,
           "chunk attention: where each row's attention went (a detailed retrieval trace, the "
           "explorer) is recorded by the CPU rows only; run on the CPU");
#ifdef LANDMARK_WITH_CUDA
  const int64_t NH = q_rot.size(0), n = q_rot.size(1), tl = k_rot.size(1) - n;
  const bool capture = ctx.capture && ctx.capture->head >= 0 && ctx.capture->head < NH;
  Tensor head_w;  // (n, max_row) on the host
  Tensor out = cuda::attend_plan(cache, ctx, plan, q_rot, k_rot, v_loc, capture ? &head_w : nullptr, cmt_count);
  if (capture) {
    const int64_t h = ctx.capture->head, max_row = head_w.size(1), first = cache.cmt_key_rot.defined() ? 1 : 0;
    for (int64_t i = 0; i < n; ++i)
      ctx.capture->rows.push_back(
          capture_row(ctx, plan, plan.sel[h * n + i], i, tl, first, head_w.data<Scalar>() + i * max_row));
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
  LM_FAIL(
      "chunk_attention: q " << describe(q_rot)
                            << " is on cuda but this build has no CUDA support (configure with -DLANDMARK_CUDA=ON)");
#endif
}

}  // namespace

namespace {
// The hooks of ctx that observe rows (hooks.h), in `out`; null when none does.
const HookList* row_observers(const ChunkContext& ctx, HookList& out) {
  if (ctx.hooks)
    for (RetrievalHooks* h : *ctx.hooks)
      if (h->observes_rows(ctx)) out.push_back(h);
  return out.empty() ? nullptr : &out;
}
}  // namespace

Tensor attend_plan(const LayerCache& cache, const ChunkContext& ctx, const RetrievalPlan& plan, const Tensor& q_rot,
                   const Tensor& k_rot, const Tensor& v_loc, CmtCount* cmt, RowMass* mass) {
  LM_CHECK(q_rot.dim() == 3 && k_rot.dim() == 3 && v_loc.shape() == k_rot.shape() && q_rot.size(0) == k_rot.size(0) &&
               q_rot.size(2) == k_rot.size(2) && k_rot.size(1) >= q_rot.size(1) && q_rot.size(0) == cache.NH &&
               q_rot.size(2) == cache.HS && q_rot.dtype() == cache.dtype,
           "chunk attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc)
                                 << " do not fit each other or the cache (NH " << cache.NH << ", HS " << cache.HS
                                 << ")");
  LM_CHECK(k_rot.device() == q_rot.device() && v_loc.device() == q_rot.device() && cache.device == q_rot.device(),
           "chunk attention: q " << describe(q_rot) << ", k " << describe(k_rot) << ", v " << describe(v_loc)
                                 << " and the cache (" << device_name(cache.device) << ") must share a device");
  LM_CHECK(ctx.local_kinds && static_cast<int64_t>(ctx.local_kinds->size()) == k_rot.size(1),
           "chunk attention: need one kind per local key");
  LM_CHECK(
      static_cast<int64_t>(plan.sel.size()) == q_rot.size(0) * q_rot.size(1) && plan.places.size() == plan.sel.size(),
      "chunk attention: a plan for " << plan.sel.size() << " rows, expected " << q_rot.size(0) * q_rot.size(1));
  HookList observing;
  const HookList* observers = row_observers(ctx, observing);
  if (observers)
    for (RetrievalHooks* h : *observers) h->begin_rows(cache, ctx, q_rot.size(0) * q_rot.size(1));
  // On disk, the chosen blocks' K/V are read into the store's staging (the blocks held do not
  // change). In RAM every block is readable as it is: nothing to collect (this runs per layer and
  // token while decoding).
  if (cache.store->needs_fetch()) cache.store->fetch(plan_blocks(plan));
  Tensor out;
  LM_DISPATCH_FLOAT(q_rot.dtype(), "chunk_attention", {
    const Tensor q = q_rot.contiguous(), k = k_rot.contiguous(), v = v_loc.contiguous();
    out = q.device() == Device::CPU ? attend_cpu<scalar_t>(cache, ctx, plan, q, k, v, cmt, mass, observers)
                                    : attend_cuda<scalar_t>(cache, ctx, plan, q, k, v, cmt, mass);
  });
  return out;
}

Tensor chunk_attention(const LayerCache& cache, const ChunkContext& ctx, const Tensor& q_rot, const Tensor& k_rot,
                       const Tensor& v_loc, RetrievalRecord* rec) {
  const Tensor q = q_rot.contiguous();
  RetrievalPlan plan = plan_retrieval(cache, ctx, q);
  // The attached extensions (hooks.h): the blocks kept, then perhaps fewer blocks read.
  static const HookList kNone;
  const HookList& hooks = ctx.hooks ? *ctx.hooks : kNone;
  for (RetrievalHooks* h : hooks) h->keep(cache, ctx, q, k_rot, plan);
  RetrievalPlan fewer;
  const RetrievalPlan* read = &plan;
  for (RetrievalHooks* h : hooks) {
    RetrievalPlan next;
    if (h->read_fewer(cache, ctx, q, k_rot, *read, next)) {
      fewer = std::move(next);
      read = &fewer;
    }
  }
  CmtCount cmt;
  const bool detail = ctx.trace && ctx.trace->detail;
  RowMass mass;
  Tensor out = attend_plan(cache, ctx, *read, q, k_rot, v_loc, &cmt, detail ? &mass : nullptr);
  for (RetrievalHooks* h : hooks) h->end_chunk(cache, ctx, plan, *read);
  if (ctx.trace) ctx.trace->steps.push_back(trace_step(ctx, plan, q.size(1), detail ? &mass : nullptr));
  if (rec) *rec = retrieval_record(ctx, plan, q.size(1), cmt);
  return out;
}

}  // namespace lm
