// eval.cpp: evaluate_perplexity and its Transformer-XL reading, evaluate_perplexity_xl (eval.h).
#include "evals/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <utility>

#include "autograd/functions.h"
#include "beyond/session.h"
#include "tensor/create.h"
#include "tensor/files.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "train/file_io.h"

namespace lm {

double PerplexityResult::perplexity() const { return std::exp(nll); }
double PerplexityResult::fetched_per_step() const {
  return retrieval_steps == 0 ? 0.0 : static_cast<double>(fetched) / static_cast<double>(retrieval_steps);
}
double PerplexityResult::unique_per_token() const {
  return queries == 0 ? 0.0 : static_cast<double>(unique) / static_cast<double>(queries);
}
std::vector<double> PerplexityResult::unique_by_layer() const {
  LM_CHECK(unique_blocks_layer.size() == unique_blocks.size(),
           "unique_by_layer: " << unique_blocks.size() << " counts but " << unique_blocks_layer.size() << " layers");
  int64_t layers = 0;
  for (int64_t l : unique_blocks_layer) {
    LM_CHECK(l >= 0, "unique_by_layer: layer " << l);
    layers = std::max(layers, l + 1);
  }
  std::vector<double> sum(static_cast<size_t>(layers), 0.0), count(static_cast<size_t>(layers), 0.0);
  for (size_t e = 0; e < unique_blocks.size(); ++e) {
    sum[static_cast<size_t>(unique_blocks_layer[e])] += static_cast<double>(unique_blocks[e]);
    count[static_cast<size_t>(unique_blocks_layer[e])] += 1;
  }
  for (size_t l = 0; l < sum.size(); ++l) sum[l] = count[l] > 0 ? sum[l] / count[l] : 0.0;
  return sum;
}
double PerplexityResult::drop_rate() const {
  return cmt_rows == 0 ? 0.0 : static_cast<double>(cmt_dropped) / static_cast<double>(cmt_rows);
}

namespace {
// Window w reads tokens [w L, (w + 1) L) and is scored on [w L + 1, (w + 1) L]: one token more.
int64_t count_windows(int64_t N, int64_t eval_length, int64_t max_windows) {
  LM_CHECK(eval_length >= 1, "eval: the evaluation length must be at least 1, got " << eval_length);
  int64_t windows = N > 0 ? (N - 1) / eval_length : 0;
  LM_CHECK(windows > 0, "eval: the text has " << N << " tokens, fewer than one window of " << eval_length
                                              << " plus the token after it");
  return max_windows > 0 ? std::min(windows, max_windows) : windows;
}
}  // namespace

PerplexityResult evaluate_perplexity(const GPT& model, const std::vector<int32_t>& tokens, const BeyondConfig& cfg,
                                     int32_t landmark_id, int32_t cmt_id, int64_t eval_length, int64_t max_windows,
                                     const std::function<void(int64_t, int64_t)>& progress) {
  if (model.config().xl_cache > 0) return evaluate_perplexity_xl(model, tokens, eval_length, max_windows, progress);
  LM_CHECK(eval_length >= 1, "eval: the evaluation length must be at least 1, got " << eval_length);
  // Read in blocks with retrieval: a landmark model, or a standard one with a training-free scorer.
  const bool landmark = model.config().landmark() || cfg.scorer != BlockScorer::Landmark;
  const int64_t standard_read = cfg.standard_local > 0 ? std::min(cfg.standard_local, eval_length) : eval_length;
  LM_CHECK(landmark || standard_read <= model.config().block_size,
           "eval: a standard model reads at most its block size " << model.config().block_size << " tokens at once; "
                                                                  << "got eval length " << eval_length
                                                                  << " (--local splits a window into pieces)");
  LM_CHECK(!landmark || cfg.standard_local == 0,
           "eval: --local reads a standard model's windows in pieces; a landmark "
           "model's local length is --chunk");
  LM_CHECK(cfg.standard_local >= 0, "eval: --local must be at least 0, got " << cfg.standard_local);
  const int64_t windows = count_windows(static_cast<int64_t>(tokens.size()), eval_length, max_windows);
  PerplexityResult r;
  const auto t0 = std::chrono::steady_clock::now();
  double total = 0;
  NoGradGuard ng;
  for (int64_t w = 0; w < windows; ++w) {
    const auto begin = tokens.begin() + w * eval_length;
    std::vector<int32_t> win(begin, begin + eval_length), next(begin + 1, begin + eval_length + 1);
    Tensor logits;
    if (landmark) {
      BeyondSession s(model, cfg, landmark_id, cmt_id);
      logits = s.feed(win);
      r.summary_bytes = s.summary_bytes_per_block();
      const int64_t chunks = (eval_length + cfg.chunk_len - 1) / cfg.chunk_len;
      for (const RetrievalRecord& rec : s.retrieval_log()) {
        if (chunks >= 2 && rec.chunk == chunks - 2) {
          r.unique_blocks.push_back(rec.unique);
          r.unique_blocks_layer.push_back(rec.layer);
          r.cached_at_penultimate = rec.cached;
        }
        if (rec.cached > 0) {
          ++r.retrieval_steps;
          r.fetched += rec.fetched;
          r.unique += rec.unique;
          r.queries += rec.queries;
          r.keys_scored += rec.keys_scored;
          r.scored_rows += rec.queries * model.config().n_head;
        }
        r.cmt_rows += rec.cmt_rows;
        r.cmt_dropped += rec.cmt_dropped;
        if (rec.cached > 0 && cfg.k > 0) r.search_rows += rec.queries * model.config().n_head;
        r.budget_cut += rec.budget_cut;
      }
      add_extension_records(s, &r.attended, &r.adaptive_rows, &r.adaptive_blocks, &r.adaptive_capped, &r.certificate,
                            &r.oracle);
    } else {
      // The whole window at once, or (standard_local > 0) in independent pieces without memory.
      const int64_t piece = cfg.standard_local > 0 ? std::min(cfg.standard_local, eval_length) : eval_length;
      std::vector<Tensor> parts;
      for (int64_t p0 = 0; p0 < eval_length; p0 += piece) {
        const int64_t n = std::min(piece, eval_length - p0);
        std::vector<int32_t> sub(win.begin() + p0, win.begin() + p0 + n);
        parts.push_back(model.forward(from_vector(sub, {1, n})).value().squeeze(0));
      }
      logits = parts.size() == 1 ? parts[0] : concat(parts, 0);
    }
    Tensor loss = cross_entropy(logits, from_vector(next, {eval_length}).to(logits.device()));
    const double window_nats = loss.to(DType::F64).item() * static_cast<double>(eval_length);
    total += window_nats;
    r.window_nll.push_back(window_nats);
    r.window_tokens.push_back(eval_length);
    r.tokens += eval_length;
    ++r.windows;
    if (progress) progress(w + 1, windows);
  }
  r.nll = total / static_cast<double>(r.tokens);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

PerplexityResult evaluate_perplexity_xl(const GPT& model, const std::vector<int32_t>& tokens, int64_t eval_length,
                                        int64_t max_windows, const std::function<void(int64_t, int64_t)>& progress) {
  const GPTConfig& mc = model.config();
  LM_CHECK(!mc.landmark(), "eval: the Transformer-XL reading needs a standard model, not a landmark one");
  LM_CHECK(model.device() == Device::CPU, "eval: a Transformer-XL model (xl_cache " << mc.xl_cache
                                                                                    << ") runs on the CPU "
                                                                                    << "only; use --device cpu");
  const int64_t windows = count_windows(static_cast<int64_t>(tokens.size()), eval_length, max_windows),
                T = mc.block_size;
  PerplexityResult r;
  const auto t0 = std::chrono::steady_clock::now();
  double total = 0;
  NoGradGuard ng;
  for (int64_t w = 0; w < windows; ++w) {
    XLCache cache;  // empty at every window's start
    double window_nats = 0;
    for (int64_t p0 = 0; p0 < eval_length; p0 += T) {
      const int64_t n = std::min(T, eval_length - p0);
      const auto begin = tokens.begin() + w * eval_length + p0;
      std::vector<int32_t> piece(begin, begin + n), next(begin + 1, begin + n + 1);
      Tensor logits = model.forward_xl(from_vector(piece, {1, n}), cache, &cache).value().squeeze(0);
      // Added to the total piece by piece, in the order the standard reading adds its windows (the
      // M = 0 test compares the two bit for bit); the window's own sum feeds the bootstrap.
      const double piece_nats =
          cross_entropy(logits, from_vector(next, {n})).to(DType::F64).item() * static_cast<double>(n);
      total += piece_nats;
      window_nats += piece_nats;
      r.tokens += n;
    }
    r.window_nll.push_back(window_nats);
    r.window_tokens.push_back(eval_length);
    ++r.windows;
    if (progress) progress(w + 1, windows);
  }
  r.nll = total / static_cast<double>(r.tokens);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

namespace {
// The bootstrap's draw number `counter`: an index in [0, n), from Philox stream RngStream::User + 1.
size_t bootstrap_pick(uint64_t counter, size_t n, uint64_t seed) {
  const Philox4 u = philox::block(counter, static_cast<uint32_t>(RngStream::User) + 1, seed);
  return std::min(n - 1, static_cast<size_t>(uniform_from<double>(u) * static_cast<double>(n)));
}

// The q quantile of sorted draws: linear between the draws at positions q (B - 1).
double sorted_quantile(const std::vector<double>& sorted, double q) {
  const double x = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(x));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (x - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

void check_bootstrap_args(double level, int64_t resamples, const char* what) {
  LM_CHECK(level > 0 && level < 1, what << ": the level must be in (0, 1), got " << level);
  LM_CHECK(resamples >= 2, what << ": at least 2 resamples, got " << resamples);
}
}  // namespace

PerplexityInterval bootstrap_perplexity_interval(const PerplexityResult& r, double level, int64_t resamples,
                                                 uint64_t seed) {
  const size_t n = r.window_nll.size();
  LM_CHECK(n > 0 && r.window_tokens.size() == n, "bootstrap: no windows to resample (" << n << " window sums, "
                                                                                       << r.window_tokens.size()
                                                                                       << " window token counts)");
  check_bootstrap_args(level, resamples, "bootstrap");
  std::vector<double> draws(static_cast<size_t>(resamples));
  uint64_t counter = 0;
  for (int64_t b = 0; b < resamples; ++b) {
    double nats = 0, tokens = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t pick = bootstrap_pick(counter++, n, seed);
      nats += r.window_nll[pick];
      tokens += static_cast<double>(r.window_tokens[pick]);
    }
    draws[static_cast<size_t>(b)] = std::exp(nats / tokens);
  }
  std::sort(draws.begin(), draws.end());
  return PerplexityInterval{sorted_quantile(draws, (1 - level) / 2), sorted_quantile(draws, (1 + level) / 2)};
}

PairedRatio paired_bootstrap_ratio(const PerplexityResult& a, int64_t length_a, const PerplexityResult& b,
                                   int64_t length_b, double level, int64_t resamples, uint64_t seed) {
  check_bootstrap_args(level, resamples, "paired bootstrap");
  LM_CHECK(length_a >= 1 && length_b >= 1,
           "paired bootstrap: evaluation lengths must be positive, got " << length_a << " and " << length_b);
  const int64_t span = std::max(length_a, length_b), shorter = std::min(length_a, length_b);
  LM_CHECK(span % shorter == 0, "paired bootstrap: the longer evaluation length ("
                                    << span << ") must be a multiple of the shorter (" << shorter
                                    << "), so that its windows cover whole windows of the other");
  const std::pair<const PerplexityResult*, int64_t> sides[2] = {{&a, length_a}, {&b, length_b}};
  for (const auto& [r, L] : sides) {
    LM_CHECK(r->window_nll.size() == r->window_tokens.size(),
             "paired bootstrap: " << r->window_nll.size() << " window sums but " << r->window_tokens.size()
                                  << " window token counts");
    for (size_t w = 0; w < r->window_tokens.size(); ++w)
      LM_CHECK(r->window_tokens[w] == L, "paired bootstrap: window " << w << " of the length-" << L
                                                                     << " evaluation scored " << r->window_tokens[w]
                                                                     << " tokens, not " << L);
  }
  // Per span: the summed nats of each side over the same span targets.
  auto span_sums = [&](const PerplexityResult& r, int64_t L, int64_t spans) {
    const int64_t per = span / L;
    std::vector<double> s(static_cast<size_t>(spans), 0.0);
    for (int64_t j = 0; j < spans; ++j)
      for (int64_t i = 0; i < per; ++i) s[static_cast<size_t>(j)] += r.window_nll[static_cast<size_t>(j * per + i)];
    return s;
  };
  const int64_t spans = std::min(static_cast<int64_t>(a.window_nll.size()) / (span / length_a),
                                 static_cast<int64_t>(b.window_nll.size()) / (span / length_b));
  LM_CHECK(spans >= 1, "paired bootstrap: no window of length "
                           << span << " is covered by both evaluations (" << a.window_nll.size() << " windows of "
                           << length_a << ", " << b.window_nll.size() << " of " << length_b << ")");
  const std::vector<double> sa = span_sums(a, length_a, spans), sb = span_sums(b, length_b, spans);
  PairedRatio out;
  out.spans = spans;
  out.span_length = span;
  out.tokens = spans * span;
  double na = 0, nb = 0;
  for (int64_t j = 0; j < spans; ++j) na += sa[static_cast<size_t>(j)], nb += sb[static_cast<size_t>(j)];
  const double T = static_cast<double>(out.tokens);
  out.ppl_a = std::exp(na / T);
  out.ppl_b = std::exp(nb / T);
  out.ratio = std::exp((na - nb) / T);
  std::vector<double> draws(static_cast<size_t>(resamples));
  uint64_t counter = 0;
  for (int64_t d = 0; d < resamples; ++d) {
    double diff = 0;  // every span has `span` tokens, so a draw's token count is spans * span
    for (int64_t j = 0; j < spans; ++j) {
      const size_t pick = bootstrap_pick(counter++, static_cast<size_t>(spans), seed);
      diff += sa[pick] - sb[pick];
    }
    draws[static_cast<size_t>(d)] = std::exp(diff / T);
  }
  std::sort(draws.begin(), draws.end());
  out.low = sorted_quantile(draws, (1 - level) / 2);
  out.high = sorted_quantile(draws, (1 + level) / 2);
  return out;
}

std::string TokensIdentity::str() const { return std::to_string(tokens) + " tokens, crc32 " + crc32; }

TokensIdentity tokens_identity(const std::vector<int32_t>& tokens) {
  uint32_t crc = 0;
  for (int32_t t : tokens) {
    const uint32_t u = static_cast<uint32_t>(t);
    const unsigned char b[4] = {static_cast<unsigned char>(u), static_cast<unsigned char>(u >> 8),
                                static_cast<unsigned char>(u >> 16), static_cast<unsigned char>(u >> 24)};
    crc = crc32_update(crc, b, 4);
  }
  return {static_cast<int64_t>(tokens.size()), crc32_hex(crc)};
}

void write_window_sums(const std::string& path, const PerplexityResult& r, int64_t eval_length,
                       const TokensIdentity& identity) {
  LM_CHECK(r.window_nll.size() == r.window_tokens.size(),
           "window sums: " << r.window_nll.size() << " sums but " << r.window_tokens.size() << " token counts");
  std::string out = "# tokens\t" + std::to_string(identity.tokens) + "\tcrc32\t" + identity.crc32 + "\n";
  out += "window\tfirst_token\ttokens\tnats\n";
  char line[128];
  for (size_t w = 0; w < r.window_nll.size(); ++w) {
    std::snprintf(line, sizeof line, "%zu\t%lld\t%lld\t%.17g\n", w, (long long)(static_cast<int64_t>(w) * eval_length),
                  (long long)r.window_tokens[w], r.window_nll[w]);
    out += line;
  }
  write_file_atomic(path, out, "eval --windows-tsv");
}

PerplexityResult read_window_sums(const std::string& path, int64_t* eval_length, TokensIdentity* identity) {
  require_regular_file(path, "window sums:");
  std::ifstream in(path);
  LM_CHECK(in.good(), "window sums: cannot open " << path);
  std::string line;
  TokensIdentity id;
  {
    long long n = -1;
    char hex[9] = {0};
    int used = 0;
    const bool ok = std::getline(in, line) &&
                    std::sscanf(line.c_str(), "# tokens\t%lld\tcrc32\t%8[0-9a-f]%n", &n, hex, &used) == 2 &&
                    static_cast<size_t>(used) == line.size() && n >= 0 && std::string(hex).size() == 8;
    LM_CHECK(ok, "window sums: " << path << " does not start with the line naming its token file ('# tokens N crc32 "
                                 << "HEX', tab-separated), which eval --windows-tsv writes: it cannot say which "
                                 << "tokens it measured; run that evaluation again with --windows-tsv");
    id.tokens = n;
    id.crc32 = hex;
  }
  LM_CHECK(std::getline(in, line) && line == "window\tfirst_token\ttokens\tnats",
           "window sums: " << path << " line 2 is not the header written by eval --windows-tsv "
                           << "(window, first_token, tokens, nats, tab-separated)");
  PerplexityResult r;
  int64_t L = 0, lineno = 2;
  double total = 0;
  while (std::getline(in, line)) {
    ++lineno;
    long long w = -1, first = -1, tokens = -1;
    double nats = 0;
    int used = 0;
    const bool ok = std::sscanf(line.c_str(), "%lld\t%lld\t%lld\t%lf%n", &w, &first, &tokens, &nats, &used) == 4 &&
                    static_cast<size_t>(used) == line.size();
    LM_CHECK(ok, "window sums: " << path << " line " << lineno << ": expected four tab-separated numbers, got '"
                                 << line.substr(0, 80) << "'");
    if (L == 0) L = tokens;
    LM_CHECK(tokens >= 1 && tokens <= (int64_t(1) << 30) && tokens == L,
             "window sums: " << path << " line " << lineno << ": window of " << tokens << " tokens; every window must "
                             << "score the same length (" << L << "), between 1 and 2^30");
    LM_CHECK(w == r.windows && first == w * L, "window sums: " << path << " line " << lineno << ": window " << w
                                                               << " starting at token " << first << ", expected window "
                                                               << r.windows << " at token " << r.windows * L);
    LM_CHECK(std::isfinite(nats) && nats >= 0, "window sums: " << path << " line " << lineno
                                                               << ": the nats must be finite and not negative, got "
                                                               << nats);
    LM_CHECK(nats <= kMaxWindowNatsPerToken * static_cast<double>(tokens),
             "window sums: " << path << " line " << lineno << ": " << nats << " nats over " << tokens
                             << " tokens is more than " << kMaxWindowNatsPerToken
                             << " per token, beyond what a model's log-softmax gives over any vocabulary");
    r.window_nll.push_back(nats);
    r.window_tokens.push_back(tokens);
    ++r.windows;
    r.tokens += tokens;
    total += nats;
  }
  LM_CHECK(r.windows > 0, "window sums: " << path << " has no windows");
  r.nll = total / static_cast<double>(r.tokens);
  *eval_length = L;
  if (identity) *identity = id;
  return r;
}

}  // namespace lm
