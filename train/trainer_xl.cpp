// trainer_xl.cpp: Transformer-XL training (trainer.h, TrainOptions::segment): each batch row a
// segment of S tokens read as S / T windows, the cache carried from one to the next, and the
// checks of --xl-cache and --segment. Not the XL attention itself (nn/xl_attention.h, GPT::loss_xl),
// nor a standard or landmark batch (trainer_batch.cpp); the XL evaluation is evals/eval.h's.
#include <functional>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "tensor/check.h"
#include "train/batch.h"
#include "train/trainer.h"
#include "train/trainer_internal.h"

namespace lm {

int64_t row_tokens(const TrainOptions& o, const GPTConfig& mc) { return mc.xl_cache > 0 ? o.segment : mc.block_size; }

namespace trainer_internal {

void check_xl_options(const TrainOptions& o) {
  // Transformer-XL: the cache length is the model's, the segment the run's; they come together.
  const int64_t T = o.model.block_size, M = o.model.xl_cache, S = o.segment;
  LM_CHECK(M >= 0 && S >= 0, "train: --xl-cache and --segment must be >= 0, got " << M << " and " << S);
  if (M > 0 || S > 0) {
    LM_CHECK(!o.model.landmark(),
             "train: --xl-cache (Transformer-XL) needs --attention standard; landmark attention "
             "reaches past its window by retrieval instead");
    LM_CHECK(M > 0,
             "train: --segment " << S << " reads each row window by window through an XL cache: give --xl-cache M too");
    LM_CHECK(
        S > 0,
        "train: --xl-cache " << M << " needs --segment S, the tokens of each batch row, read as S / --block-size "
                             << "windows (the paper's XL setting: --block-size 256 --xl-cache 256 --segment 2048)");
    LM_CHECK(T > 0 && S % T == 0 && S >= 2 * T, "train: --segment " << S << " must be a multiple of --block-size " << T
                                                                    << " and at least two windows (" << 2 * T
                                                                    << "), so that training reads the cache");
    LM_CHECK(o.device == Device::CPU,
             "train: --xl-cache runs on the CPU only (the attention after a cached prefix has no "
             "CUDA kernel); use --device cpu");
  }
}

int64_t BatchLoss::xl_windows(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                              uint64_t cursor, const std::function<void(int64_t, Var)>& on_window) const {
  const int64_t T = mc.block_size, windows = o.segment / T;
  Batch b = sample_batch(data, o.batch_size, o.segment, seed, cursor, starts);  // x, y (B, S)
  b.x = shard(b.x);
  b.y = shard(b.y);
  XLCache cache;
  for (int64_t w = 0; w < windows; ++w)
    on_window(w,
              model.loss_xl(b.x.narrow(1, w * T, T).contiguous(), b.y.narrow(1, w * T, T).contiguous(), cache, &cache));
  return windows;
}

Var BatchLoss::xl_mean_loss(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts, uint64_t seed,
                            uint64_t cursor) const {
  Var total;
  const int64_t windows = xl_windows(model, data, starts, seed, cursor,
                                     [&](int64_t, Var loss) { total = total.defined() ? add(total, loss) : loss; });
  return mul(total, 1.0 / static_cast<double>(windows));
}

// An XL model runs each window's backward right after its forward: the cache is a constant, so no
// graph spans two windows, and memory holds one window's activations however long the segment
// (the gradient is the same as one backward of the mean over the windows, summed in another order).
double BatchLoss::xl_forward_backward(GPT& model, const TokenFile& data, const std::vector<int64_t>* starts,
                                      uint64_t seed, uint64_t cursor, int64_t step) const {
  const double accum = static_cast<double>(o.grad_accum);
  double total = 0;
  const int64_t windows = o.segment / mc.block_size;
  xl_windows(model, data, starts, seed, cursor, [&](int64_t, Var loss) {
    const double lv = loss.item();
    check_loss(lv, step);
    mul(loss, 1.0 / (static_cast<double>(windows) * accum)).backward();
    total += lv;
  });
  return total / static_cast<double>(windows);
}

}  // namespace trainer_internal
}  // namespace lm
