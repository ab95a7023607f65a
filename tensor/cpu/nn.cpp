// cpu/nn.cpp: fused layer norm (forward + backward) and cross-entropy (forward + backward).
// Each is the closed form of its composed version; tests/test_nn_ops.cpp checks both against
// compositions of basic ops and finite differences. Twin: cuda/nn.cu.
#include <cmath>
#include <vector>

#include "tensor/cpu/layernorm_row.h"
#include "tensor/cpu/parallel.h"
#include "tensor/kernels.h"

namespace lm {
namespace cpu {

void layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& out, const Tensor& mean,
               const Tensor& rstd) {
  const int64_t C = x.size(-1), rows = x.numel() / C;
  LM_DISPATCH_FLOAT(x.dtype(), "layernorm", {
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pw = w.data<scalar_t>();
    const scalar_t* pb = b.data<scalar_t>();
    scalar_t* po = out.data<scalar_t>();
    scalar_t* pm = mean.data<scalar_t>();
    scalar_t* pr = rstd.data<scalar_t>();
    parallel_for(rows, 4 * C, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) layernorm_row(px + r * C, pw, pb, C, eps, po + r * C, pm + r, pr + r);
    });
  });
}

// With xhat = (x - mean) * rstd and gx = gout * w (per row):
//   dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)),  dw = sum_rows gout * xhat,  db = sum_rows gout.
void layernorm_backward(const Tensor& gout, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const int64_t C = x.size(-1), rows = x.numel() / C;
  LM_DISPATCH_FLOAT(x.dtype(), "layernorm_backward", {
    const scalar_t* pg = gout.data<scalar_t>();
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pw = w.data<scalar_t>();
    const scalar_t* pm = mean.data<scalar_t>();
    const scalar_t* pr = rstd.data<scalar_t>();
    scalar_t* pdx = dx.data<scalar_t>();
    parallel_for(rows, 6 * C, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* xr = px + r * C;
        const scalar_t* gr = pg + r * C;
        scalar_t mu = pm[r], rs = pr[r];
        scalar_t sum_g = 0, sum_gx = 0;
        for (int64_t c = 0; c < C; ++c) {
          scalar_t gx = gr[c] * pw[c];
          sum_g += gx;
          sum_gx += gx * (xr[c] - mu) * rs;
        }
        scalar_t mg = sum_g / static_cast<scalar_t>(C), mgx = sum_gx / static_cast<scalar_t>(C);
        scalar_t* dr = pdx + r * C;
        for (int64_t c = 0; c < C; ++c) dr[c] = rs * (gr[c] * pw[c] - mg - (xr[c] - mu) * rs * mgx);
      }
    });
    // Parameter grads: split by channel so each column is summed by one thread in row order.
    scalar_t* pdw = dw.data<scalar_t>();
    scalar_t* pdb = db.data<scalar_t>();
    parallel_for(C, 2 * rows, [&](int64_t c0, int64_t c1) {
      std::vector<scalar_t> sw(c1 - c0, scalar_t(0)), sb(c1 - c0, scalar_t(0));
      for (int64_t r = 0; r < rows; ++r) {
        const scalar_t* xr = px + r * C;
        const scalar_t* gr = pg + r * C;
        scalar_t mu = pm[r], rs = pr[r];
        for (int64_t c = c0; c < c1; ++c) {
          sw[c - c0] += gr[c] * (xr[c] - mu) * rs;
          sb[c - c0] += gr[c];
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        pdw[c] = sw[c - c0];
        pdb[c] = sb[c - c0];
      }
    });
  });
}

int64_t cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& losses,
                      const Tensor& stats) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const int32_t* t = targets.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    if (t[n] != ignore_index && (t[n] < 0 || t[n] >= V)) return n;
  LM_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", {
    const scalar_t* pl = logits.data<scalar_t>();
    scalar_t* po = losses.data<scalar_t>();
    scalar_t* pst = stats.defined() ? stats.data<scalar_t>() : nullptr;
    parallel_for(N, 2 * V, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        if (t[n] == ignore_index) {
          po[n] = 0;
          if (pst) pst[2 * n] = 0, pst[2 * n + 1] = 1;
          continue;
        }
        const scalar_t* lr = pl + n * V;
        scalar_t m = lr[0];
        for (int64_t v = 1; v < V; ++v) m = lr[v] > m ? lr[v] : m;
        scalar_t s = 0;
        for (int64_t v = 0; v < V; ++v) s += std::exp(lr[v] - m);
        po[n] = m + std::log(s) - lr[t[n]];
        if (pst) pst[2 * n] = m, pst[2 * n + 1] = s;
      }
    });
  });
  return -1;
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double scale,
                            const Tensor& stats, const Tensor& dlogits) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const int32_t* t = targets.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)  // a bad target would write outside its row
    LM_CHECK(t[n] == ignore_index || (t[n] >= 0 && t[n] < V),
             "cross_entropy_backward: target " << t[n] << " in row " << n << " is out of range [0, " << V
                                               << ") and is not the ignore index " << ignore_index);
  LM_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward", {
    const scalar_t* pl = logits.data<scalar_t>();
    scalar_t* pd = dlogits.data<scalar_t>();
    const scalar_t sc = static_cast<scalar_t>(scale);
    const scalar_t* pst = stats.defined() ? stats.data<scalar_t>() : nullptr;
    parallel_for(N, 3 * V, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        scalar_t* dr = pd + n * V;
        if (t[n] == ignore_index) {
          for (int64_t v = 0; v < V; ++v) dr[v] = 0;
          continue;
        }
        const scalar_t* lr = pl + n * V;
        if (pst) {  // the forward's max and sum: one pass, the same numbers as the three below
          const scalar_t m = pst[2 * n], inv = sc / pst[2 * n + 1];
          for (int64_t v = 0; v < V; ++v) {
            const scalar_t e_v = std::exp(lr[v] - m);
            dr[v] = e_v * inv;
          }
          dr[t[n]] -= sc;
          continue;
        }
        scalar_t m = lr[0];
        for (int64_t v = 1; v < V; ++v) m = lr[v] > m ? lr[v] : m;
        scalar_t s = 0;
        for (int64_t v = 0; v < V; ++v) {
          dr[v] = std::exp(lr[v] - m);
          s += dr[v];
        }
        scalar_t inv = sc / s;
        for (int64_t v = 0; v < V; ++v) dr[v] *= inv;
        dr[t[n]] -= sc;
      }
    });
  });
}

}  // namespace cpu
}  // namespace lm
