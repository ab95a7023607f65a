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
double PerplexityResult::fetched_per_step() const {
  return retrieval_steps == 0 ? 0.0 : static_cast<double>(fetched) / static_cast<double>(retrieval_steps);
}
double PerplexityResult::unique_per_token() const {
  return queries == 0 ? 0.0 : static_cast<double>(unique) / static_cast<double>(queries);
}
double PerplexityResult::drop_rate() const {
  return cmt_rows == 0 ? 0.0 : static_cast<double>(cmt_dropped) / static_cast<double>(cmt_rows);
}

PerplexityResult evaluate_perplexity(const GPT& model, const std::vector<int32_t>& tokens, const InferConfig& cfg,
                                     int32_t landmark_id, int32_t cmt_id, int64_t eval_length, int64_t max_windows,
                                     const std::function<void(int64_t, int64_t)>& progress) {
  LM_CHECK(eval_length >= 1, "eval: the evaluation length must be at least 1, got " << eval_length);
  const bool landmark = model.config().landmark();
  LM_CHECK(landmark || eval_length <= model.config().block_size,
           "eval: a standard model reads at most its block size " << model.config().block_size << " tokens at once; "
                                                                   << "got eval length " << eval_length);
  // Window w reads tokens [w L, (w + 1) L) and is scored on [w L + 1, (w + 1) L]: one token more.
  const int64_t N = static_cast<int64_t>(tokens.size());
  int64_t windows = N > 0 ? (N - 1) / eval_length : 0;
  LM_CHECK(windows > 0, "eval: the text has " << N << " tokens, fewer than one window of " << eval_length
                                              << " plus the token after it");
  if (max_windows > 0) windows = std::min(windows, max_windows);
  PerplexityResult r;
  const auto t0 = std::chrono::steady_clock::now();
  double total = 0;
  NoGradGuard ng;
  for (int64_t w = 0; w < windows; ++w) {
    const auto begin = tokens.begin() + w * eval_length;
    std::vector<int32_t> win(begin, begin + eval_length), next(begin + 1, begin + eval_length + 1);
    Tensor logits;
    if (landmark) {
      InferenceSession s(model, cfg, landmark_id, cmt_id);
      logits = s.feed(win);
      const int64_t chunks = (eval_length + cfg.chunk_len - 1) / cfg.chunk_len;
      for (const RetrievalRecord& rec : s.retrieval_log()) {
        if (chunks >= 2 && rec.chunk == chunks - 2) {
          r.unique_blocks.push_back(rec.unique);
          r.cached_at_penultimate = rec.cached;
        }
        if (rec.cached > 0) {
          ++r.retrieval_steps;
          r.fetched += rec.fetched;
          r.unique += rec.unique;
          r.queries += rec.queries;
        }
        r.cmt_rows += rec.cmt_rows;
        r.cmt_dropped += rec.cmt_dropped;
      }
    } else {
      logits = model.forward(from_vector(win, {1, eval_length})).value().squeeze(0);
    }
    Tensor loss = cross_entropy(logits, from_vector(next, {eval_length}));
    total += loss.to(DType::F64).item() * static_cast<double>(eval_length);
    r.tokens += eval_length;
    ++r.windows;
    if (progress) progress(w + 1, windows);
  }
  r.nll = total / static_cast<double>(r.tokens);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace lm
