// generate.cpp: sampling and generation (generate.h).
#include "infer/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/functions.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"

namespace lm {

int32_t sample_token(const Tensor& logits, const SampleOptions& o, uint64_t counter) {
  LM_CHECK(logits.dim() == 1 && logits.numel() > 0,
           "sample_token: logits must be a non-empty vector, got " << describe(logits));
  LM_CHECK(o.temperature >= 0 && o.top_k >= 0, "sample_token: temperature and top-k must be >= 0");
  std::vector<double> l = logits.to_double_vector();
  const int64_t V = static_cast<int64_t>(l.size());
  if (o.temperature == 0) return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t keep = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(),
                    [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  double m = l[idx[0]], z = 0;
  std::vector<double> p(static_cast<size_t>(keep));
  for (int64_t r = 0; r < keep; ++r) z += p[r] = std::exp((l[idx[r]] - m) / o.temperature);
  double u = uniform_from<double>(philox::block(counter, static_cast<uint32_t>(RngStream::User) + 3, o.seed)) * z;
  for (int64_t r = 0; r < keep; ++r) {
    if (u < p[r]) return idx[r];
    u -= p[r];
  }
  return idx[keep - 1];
}

std::vector<int32_t> generate(InferenceSession& session, const std::vector<int32_t>& prompt, int64_t max_new,
                              const SampleOptions& o, const std::function<bool(int32_t)>& stop) {
  LM_CHECK(!prompt.empty(), "generate: the prompt is empty");
  return generate_from(session, session.read(prompt), max_new, o, stop);
}

std::vector<int32_t> generate_from(InferenceSession& session, Tensor logits, int64_t max_new, const SampleOptions& o,
                                   const std::function<bool(int32_t)>& stop) {
  LM_CHECK(logits.dim() == 2 && logits.size(0) > 0, "generate: need the prompt's logits, got " << describe(logits));
  std::vector<int32_t> out;
  for (int64_t t = 0; t < max_new; ++t) {
    const int32_t tok = sample_token(logits.select(0, logits.size(0) - 1), o, static_cast<uint64_t>(t));
    out.push_back(tok);
    if ((stop && stop(tok)) || t + 1 == max_new) break;
    logits = session.feed_chunk({tok});
  }
  return out;
}

std::vector<int32_t> generate_windowed(const GPT& model, const std::vector<int32_t>& prompt, int64_t window,
                                       int64_t max_new, const SampleOptions& o,
                                       const std::function<bool(int32_t)>& stop, int32_t landmark_id, int32_t cmt_id) {
  LM_CHECK(window > 0 && !prompt.empty(), "generate_windowed: need a window and a prompt");
  NoGradGuard ng;
  std::vector<int32_t> text = prompt, out;
  const bool landmarks = model.config().landmark();
  for (int64_t t = 0; t < max_new; ++t) {
    // The last `window` raw tokens (fewer if landmarks, and a CMT, must fit too), with landmarks
    // inserted for a landmark model at the same global grid as training.
    const int64_t F = model.config().landmark_every, room = window - (model.config().context_miss ? 1 : 0);
    int64_t raw_len = std::min<int64_t>(static_cast<int64_t>(text.size()), landmarks ? room * F / (F + 1) : window);
    std::vector<int32_t> raw(text.end() - raw_len, text.end());
    const Tensor logits =
        landmarks ? one_shot_logits(model, raw, landmark_id, (static_cast<int64_t>(text.size()) - raw_len) % F,
                                    OneShotCmt{cmt_id, 0, 0.0})
                  : model.forward(from_vector(raw, {1, raw_len})).value().squeeze(0);
    const int32_t tok = sample_token(logits.select(0, logits.size(0) - 1), o, static_cast<uint64_t>(t));
    out.push_back(tok);
    text.push_back(tok);
    if (stop && stop(tok)) break;
  }
  return out;
}

}  // namespace lm
