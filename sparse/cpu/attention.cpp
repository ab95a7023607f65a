// sparse/cpu/attention.cpp: top-k landmark attention on the CPU (sparse/rows.h). Heads in
// parallel. Per head, the landmark keys of the earlier blocks are gathered into one small matrix,
// so that the landmark scores of a block of 64 query rows are one GEMM (rows x blocks, T x T/F in
// all); every other product touches only a row's own block and its K chosen blocks, each a run of
// contiguous keys (gemv_rows). Cost per head: O(T (T/F + (K + 1) F) HS); memory: the chosen
// indices (T x K), and per thread a 64 x T/F score block and a few rows of length T. Nothing is
// T x T. Naive twin: sparse_landmark_reference (sparse/reference.cpp); CUDA twin:
// sparse/cuda/attention.cu.
#include <algorithm>
#include <vector>

#include "sparse/kernels.h"
#include "sparse/rows.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/parallel.h"
#include "tensor/dispatch.h"

namespace lm {
namespace cpu {

namespace {
constexpr int64_t kRowBlock = 64;

RowLayout row_layout(const Tensor& kind, const Tensor& block_of, const Tensor& block_start, int64_t b) {
  const int64_t T = kind.size(1);
  return RowLayout{kind.data<int32_t>() + b * T, block_of.data<int32_t>() + b * T,
                   block_start.data<int32_t>() + b * (T + 1), -1, 0.0};
}

// Scratch of one thread. Lengths: T for the per-row arrays (a row's own block plus its chosen
// blocks never exceed T), kRowBlock x nb for the landmark score block.
template <class Scalar>
struct Scratch {
  std::vector<Scalar> klm, dklm, s_lm, ds_lm, own, tok, g_own, g_tok, best;
  Scratch(int64_t T, int64_t HS, int64_t nb, int64_t top_k)
      : klm(nb * HS),
        dklm(nb * HS),
        s_lm(kRowBlock * nb),
        ds_lm(kRowBlock * nb),
        own(T),
        tok(T),
        g_own(T),
        g_tok(T),
        best(top_k) {}
};

// The number of blocks that are an earlier block of some row: every block before the last
// position's (the CMT is refused by the front, so block_of >= 0).
int64_t earlier_blocks(const RowLayout& L, int64_t T) { return T == 0 ? 0 : L.block_of[T - 1]; }

template <class Scalar>
void gather_landmark_keys(const RowLayout& L, const Scalar* k, int64_t nb, int64_t HS, Scalar* klm) {
  for (int64_t g = 0; g < nb; ++g) {
    const Scalar* src = k + static_cast<int64_t>(sparse::block_landmark(L, static_cast<int>(g))) * HS;
    std::copy(src, src + HS, klm + g * HS);
  }
}

// scale times the dot products of x with the key rows [j0, j1): y[0..j1-j0).
template <class Scalar>
void row_scores(const Scalar* x, const Scalar* keys, int64_t HS, int64_t j0, int64_t j1, Scalar scale, Scalar* y) {
  if (j1 <= j0) return;
  gemv_rows<Scalar>(x, keys + j0 * HS, HS, HS, 0, j1 - j0, y);
  for (int64_t j = 0; j < j1 - j0; ++j) y[j] *= scale;
}

// out[0..HS) += sum_j c[j] rows[j0 + j]
template <class Scalar>
void add_rows(const Scalar* c, const Scalar* rows, int64_t HS, int64_t j0, int64_t j1, Scalar* out) {
  for (int64_t j = j0; j < j1; ++j) {
    const Scalar cj = c[j - j0], *r = rows + j * HS;
    for (int64_t d = 0; d < HS; ++d) out[d] += cj * r[d];
  }
}

// rows[j0 + j] += c[j] x for j in [0, j1 - j0)
template <class Scalar>
void add_outer(const Scalar* c, const Scalar* x, int64_t HS, int64_t j0, int64_t j1, Scalar* rows) {
  for (int64_t j = j0; j < j1; ++j) {
    const Scalar cj = c[j - j0];
    Scalar* r = rows + j * HS;
    for (int64_t d = 0; d < HS; ++d) r[d] += cj * x[d];
  }
}

// Scores of row i's own block and chosen blocks (into sc.own, sc.tok) and its P' (in place;
// p_lm over the row's landmark scores). Returns M_i.
template <class Scalar>
Scalar row_probabilities(const RowLayout& L, const sparse::SparseRow& r, bool all_gates, const Scalar* qi,
                         const Scalar* k, int64_t HS, Scalar scale, Scalar* p_lm, Scratch<Scalar>& sc) {
  row_scores(qi, k, HS, r.own_begin, r.own_end, scale, sc.own.data());
  int64_t off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
    row_scores(qi, k, HS, j0, j1, scale, sc.tok.data() + off);
    off += j1 - j0;
  }
  return sparse::row_forward<Scalar>(L, r, all_gates, sc.own.data(), p_lm, sc.tok.data(), sc.own.data(), p_lm,
                                     sc.tok.data());
}

template <class Scalar>
void forward_head(const RowLayout& L, const Scalar* q, const Scalar* k, const Scalar* v, int64_t top_k, bool all_gates,
                  Scalar scale, int32_t* chosen, Scalar* left_out, Scalar* o, int64_t T, int64_t HS,
                  Scratch<Scalar>& sc) {
  const int64_t nb = earlier_blocks(L, T);
  gather_landmark_keys(L, k, nb, HS, sc.klm.data());
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0);
    const int64_t nb_here = L.block_of[r0 + rows - 1];  // the last row sees the most blocks
    if (nb_here > 0)
      gemm_single<Scalar>(false, true, rows, nb_here, HS, scale, q + r0 * HS, HS, sc.klm.data(), HS, 0.0,
                          sc.s_lm.data(), nb_here);
    for (int64_t rr = 0; rr < rows; ++rr) {
      const int i = static_cast<int>(r0 + rr);
      int32_t* ch = chosen + static_cast<int64_t>(i) * top_k;
      Scalar* p_lm = sc.s_lm.data() + rr * nb_here;
      const int n = sparse::select_top_k<Scalar>(p_lm, L.block_of[i], static_cast<int>(top_k), ch, sc.best.data());
      std::fill(ch + n, ch + top_k, -1);
      const sparse::SparseRow r = sparse::sparse_row(L, i, ch, n);
      const Scalar m = row_probabilities(L, r, all_gates, q + i * HS, k, HS, scale, p_lm, sc);
      if (left_out) left_out[i] = m;
      Scalar* oi = o + static_cast<int64_t>(i) * HS;
      std::fill(oi, oi + HS, Scalar(0));
      add_rows(sc.own.data(), v, HS, r.own_begin, r.own_end, oi);
      int64_t off = 0;
      for (int c = 0; c < n; ++c) {
        const int g = ch[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
        for (int64_t j = 0; j < j1 - j0; ++j) sc.tok[off + j] *= p_lm[g];  // P' -> weights
        add_rows(sc.tok.data() + off, v, HS, j0, j1, oi);
        off += j1 - j0;
      }
    }
  }
}

// Row i's backward: G of its attended tokens, dS, and their shares of dq_i, dk and dv; the
// landmark part of dS goes to ds_lm (a row of the block's dS matrix, multiplied out by GEMMs).
template <class Scalar>
void backward_row(const RowLayout& L, const sparse::SparseRow& r, bool all_gates, const Scalar* qi, const Scalar* k,
                  const Scalar* v, const Scalar* doi, Scalar scale, Scalar* p_lm, Scalar* ds_lm, Scalar* dqi,
                  Scalar* dk, Scalar* dv, int64_t HS, Scratch<Scalar>& sc) {
  row_probabilities(L, r, all_gates, qi, k, HS, scale, p_lm, sc);
  row_scores(doi, v, HS, r.own_begin, r.own_end, Scalar(1), sc.g_own.data());  // G = dout v^T
  int64_t off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
    row_scores(doi, v, HS, j0, j1, Scalar(1), sc.g_tok.data() + off);
    off += j1 - j0;
  }
  add_outer(sc.own.data(), doi, HS, r.own_begin, r.own_end, dv);  // dv += w^T dout (own: w = P')
  off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
    for (int64_t j = j0; j < j1; ++j) {
      const Scalar w = p_lm[g] * sc.tok[off + j - j0], *dr = doi;
      Scalar* row = dv + j * HS;
      for (int64_t d = 0; d < HS; ++d) row[d] += w * dr[d];
    }
    off += j1 - j0;
  }
  sparse::row_backward<Scalar>(L, r, all_gates, sc.own.data(), p_lm, sc.tok.data(), sc.g_own.data(), sc.g_tok.data(),
                               sc.g_own.data(), ds_lm, sc.g_tok.data());
  // dq_i = scale dS k, dk += scale dS^T q_i (own block and chosen tokens; landmarks by GEMM)
  for (int64_t j = 0; j < r.own_end - r.own_begin; ++j) sc.g_own[j] *= scale;
  add_rows(sc.g_own.data(), k, HS, r.own_begin, r.own_end, dqi);
  add_outer(sc.g_own.data(), qi, HS, r.own_begin, r.own_end, dk);
  off = 0;
  for (int c = 0; c < r.n_chosen; ++c) {
    const int g = r.chosen[c], j0 = sparse::block_first(L, g), j1 = sparse::block_landmark(L, g);
    for (int64_t j = 0; j < j1 - j0; ++j) sc.g_tok[off + j] *= scale;
    add_rows(sc.g_tok.data() + off, k, HS, j0, j1, dqi);
    add_outer(sc.g_tok.data() + off, qi, HS, j0, j1, dk);
    off += j1 - j0;
  }
}

template <class Scalar>
void backward_head(const RowLayout& L, const Scalar* q, const Scalar* k, const Scalar* v, const int32_t* chosen,
                   const Scalar* dout, int64_t top_k, bool all_gates, Scalar scale, Scalar* dq, Scalar* dk, Scalar* dv,
                   int64_t T, int64_t HS, Scratch<Scalar>& sc) {
  std::fill(dq, dq + T * HS, Scalar(0));
  std::fill(dk, dk + T * HS, Scalar(0));
  std::fill(dv, dv + T * HS, Scalar(0));
  const int64_t nb = earlier_blocks(L, T);
  gather_landmark_keys(L, k, nb, HS, sc.klm.data());
  std::fill(sc.dklm.begin(), sc.dklm.begin() + nb * HS, Scalar(0));
  for (int64_t r0 = 0; r0 < T; r0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, T - r0);
    const int64_t nb_here = L.block_of[r0 + rows - 1];
    if (nb_here > 0)
      gemm_single<Scalar>(false, true, rows, nb_here, HS, scale, q + r0 * HS, HS, sc.klm.data(), HS, 0.0,
                          sc.s_lm.data(), nb_here);
    std::fill(sc.ds_lm.begin(), sc.ds_lm.begin() + rows * nb_here, Scalar(0));
    for (int64_t rr = 0; rr < rows; ++rr) {
      const int i = static_cast<int>(r0 + rr);
      const int32_t* ch = chosen + static_cast<int64_t>(i) * top_k;
      const int n = static_cast<int>(std::find(ch, ch + top_k, -1) - ch);
      const sparse::SparseRow r = sparse::sparse_row(L, i, ch, n);
      backward_row(L, r, all_gates, q + i * HS, k, v, dout + i * HS, scale, sc.s_lm.data() + rr * nb_here,
                   sc.ds_lm.data() + rr * nb_here, dq + i * HS, dk, dv, HS, sc);
    }
    if (nb_here > 0) {
      gemm_single<Scalar>(false, false, rows, HS, nb_here, scale, sc.ds_lm.data(), nb_here, sc.klm.data(), HS, 1.0,
                          dq + r0 * HS, HS);  // dq += scale dS_lm Klm
      gemm_single<Scalar>(true, false, nb_here, HS, rows, scale, sc.ds_lm.data(), nb_here, q + r0 * HS, HS, 1.0,
                          sc.dklm.data(), HS);  // dKlm += scale dS_lm^T q
    }
  }
  for (int64_t g = 0; g < nb; ++g) {  // the landmark keys' gradients back to their positions
    Scalar* row = dk + static_cast<int64_t>(sparse::block_landmark(L, static_cast<int>(g))) * HS;
    for (int64_t d = 0; d < HS; ++d) row[d] += sc.dklm[g * HS + d];
  }
}
}  // namespace

void sparse_landmark_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                             const Tensor& block_of, const Tensor& block_start, int64_t top_k, bool all_gates,
                             double scale, const Tensor& chosen, const Tensor& left_out, const Tensor& out) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), NH = BH / kind.size(0);
  LM_DISPATCH_FLOAT(q.dtype(), "sparse_landmark_attention", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    scalar_t* pm = left_out.defined() ? left_out.data<scalar_t>() : nullptr;
    int32_t* pc = chosen.data<int32_t>();
    parallel_for(BH, T * (T / 8 + 8 * (top_k + 1)) * HS, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const RowLayout L = row_layout(kind, block_of, block_start, h / NH);
        Scratch<scalar_t> sc(T, HS, earlier_blocks(L, T), top_k);
        const int64_t o = h * T * HS;
        forward_head<scalar_t>(L, pq + o, pk + o, pv + o, top_k, all_gates, static_cast<scalar_t>(scale),
                               pc + h * T * top_k, pm ? pm + h * T : nullptr, po + o, T, HS, sc);
      }
    });
  });
}

void sparse_landmark_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kind,
                              const Tensor& block_of, const Tensor& block_start, int64_t top_k, bool all_gates,
                              const Tensor& chosen, const Tensor& dout, double scale, const Tensor& dq,
                              const Tensor& dk, const Tensor& dv) {
  const int64_t BH = q.size(0), T = q.size(1), HS = q.size(2), NH = BH / kind.size(0);
  LM_DISPATCH_FLOAT(q.dtype(), "sparse_landmark_attention_backward", {
    const scalar_t *pq = q.data<scalar_t>(), *pk = k.data<scalar_t>(), *pv = v.data<scalar_t>();
    const scalar_t* pdo = dout.data<scalar_t>();
    scalar_t *pdq = dq.data<scalar_t>(), *pdk = dk.data<scalar_t>(), *pdv = dv.data<scalar_t>();
    const int32_t* pc = chosen.data<int32_t>();
    parallel_for(BH, 2 * T * (T / 8 + 8 * (top_k + 1)) * HS, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const RowLayout L = row_layout(kind, block_of, block_start, h / NH);
        Scratch<scalar_t> sc(T, HS, earlier_blocks(L, T), top_k);
        const int64_t o = h * T * HS;
        backward_head<scalar_t>(L, pq + o, pk + o, pv + o, pc + h * T * top_k, pdo + o, top_k, all_gates,
                                static_cast<scalar_t>(scale), pdq + o, pdk + o, pdv + o, T, HS, sc);
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
