// eval.cpp: evaluate_perplexity (eval.h).
#include "infer/eval.h"

#include <chrono>
#include <cmath>

#include "autograd/functions.h"
#include "infer/session.h"
#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

double PerplexityResult::perplexity() const { return std::exp(nll); }

PerplexityResult evaluate_perplexity(const GPT& model, const std::vector<int32_t>& tokens, const InferConfig& cfg,
                                     int32_t landmark_id, int64_t eval_length, int64_t max_windows,
                                     const std::function<void(int64_t, int64_t)>& progress) {
  LM_CHECK(eval_length >= 2, "eval: the evaluation length must be at least 2, got " << eval_length);
  const bool landmark = model.config().attention == "landmark";
  LM_CHECK(landmark || eval_length <= model.config().block_size,
           "eval: a standard model reads at most its block size " << model.config().block_size << " tokens at once; "
                                                                   << "got eval length " << eval_length);
  int64_t windows = static_cast<int64_t>(tokens.size()) / eval_length;
  LM_CHECK(windows > 0, "eval: the text has " << tokens.size() << " tokens, fewer than one window of " << eval_length);
  if (max_windows > 0) windows = std::min(windows, max_windows);
  PerplexityResult r;
  const auto t0 = std::chrono::steady_clock::now();
  double total = 0;
  NoGradGuard ng;
  for (int64_t w = 0; w < windows; ++w) {
    std::vector<int32_t> win(tokens.begin() + w * eval_length, tokens.begin() + (w + 1) * eval_length);
    Tensor logits;
    if (landmark) {
      InferenceSession s(model, cfg, landmark_id);
      logits = s.feed(win);
      const int64_t chunks = (eval_length + cfg.chunk_len - 1) / cfg.chunk_len;
      for (const RetrievalRecord& rec : s.retrieval_log())
        if (chunks >= 2 && rec.chunk == chunks - 2) {
          r.unique_blocks.push_back(rec.unique);
          r.cached_at_penultimate = rec.cached;
        }
    } else {
      logits = model.forward(from_vector(win, {1, eval_length})).value().squeeze(0);
    }
    std::vector<int32_t> next(win.begin() + 1, win.end());
    Tensor loss = cross_entropy(logits.narrow(0, 0, eval_length - 1), from_vector(next, {eval_length - 1}));
    total += loss.to(DType::F64).item() * static_cast<double>(eval_length - 1);
    r.tokens += eval_length - 1;
    ++r.windows;
    if (progress) progress(w + 1, windows);
  }
  r.nll = total / static_cast<double>(r.tokens);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace lm
