// eval.h: perplexity over long texts with cached chunked inference (the paper's Tables 1-3): the
// text is cut into non-overlapping windows of eval_length raw tokens, each window is read by a
// fresh BeyondSession (the paper's InferenceSession with the extensions asked for) in chunks, and all eval_length
// positions are scored, the last one against the first token after the window (so N tokens give (N - 1) / eval_length
// windows). (A Transformer-XL model reads each window in pieces with its cache instead: evaluate_perplexity_xl.) Also
// collects what retrieval did: the blocks retrieved (Table 2's count), the unique blocks per token, Appendix C's
// statistic (unique blocks in the penultimate chunk of each window, per layer) and, for a model with a context-miss
// token, the drop rate at the CMT cutoff (Table 3).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "beyond/certificate.h"
#include "beyond/config.h"
#include "nn/gpt.h"

namespace lm {

struct PerplexityResult {
  int64_t windows = 0, tokens = 0;     // tokens scored
  double nll = 0;                      // mean negative log-likelihood (nats per token)
  std::vector<double> window_nll;      // per window: its summed nats (the bootstrap's unit)
  std::vector<int64_t> window_tokens;  // per window: the tokens it scored
  double perplexity() const;
  std::vector<int64_t> unique_blocks;        // per window and layer: penultimate chunk's unique blocks
  std::vector<int64_t> unique_blocks_layer;  // the layer of each entry of unique_blocks
  // The mean of unique_blocks per layer (entry l: layer l; 0 for a layer with no entry): which
  // layers retrieve few distinct blocks (Appendix C's low mode).
  std::vector<double> unique_by_layer() const;
  int64_t cached_at_penultimate = 0;  // blocks in the cache then (the histogram's upper end)
  // Over every (chunk, layer) that had at least one cached block:
  int64_t retrieval_steps = 0;      // such (chunk, layer) pairs
  int64_t fetched = 0;              // blocks retrieved, one per member of each distinct set
  int64_t unique = 0, queries = 0;  // distinct blocks per (chunk, layer), and the queries there
  double fetched_per_step() const;  // Table 2's "Blocks": per chunk and layer
  double unique_per_token() const;  // distinct blocks of a chunk and layer over its queries
  // Context-miss token (models trained with --cmt): rows = (query, layer, head) triples.
  int64_t cmt_rows = 0, cmt_dropped = 0;
  double drop_rate() const;  // share of CMT scores below the cutoff (0 without a CMT)
  // --search approx: (query, layer, head) rows that searched, and those whose search ran out of
  // tiles before it could prove its top k (RetrievalRecord::budget_cut).
  int64_t search_rows = 0, budget_cut = 0;
  // Beyond the paper, with BeyondConfig::certify: per layer, the left-out weights and bounds.
  CertificateStats certificate;
  // Beyond the paper (cmt_skip.h, adaptive_k.h), over the same (chunk, layer) pairs as `unique`: distinct
  // blocks the rows attended (fewer when gated-off CMT rows read none); adaptive k's rows, the
  // blocks they kept and the rows capped at k.
  int64_t attended = 0, adaptive_rows = 0, adaptive_blocks = 0, adaptive_capped = 0;
  // Beyond the paper (block_scorers.h), over the same pairs: keys (or summary rows) scored and the
  // (query, head) rows that scored them; the bytes one block's scoring summary takes in fast memory
  // (all layers); with BeyondConfig::mass_recall, the rows' agreement with the oracle.
  int64_t keys_scored = 0, scored_rows = 0, summary_bytes = 0;
  OracleAgreement oracle;
  double seconds = 0;
};

// `tokens`: the raw text; windows of `eval_length` scored tokens (the remainder is dropped).
// max_windows > 0 stops early. A standard model (no landmarks) is evaluated in one shot per window
// and needs eval_length <= block_size; a Transformer-XL model (xl_cache > 0) goes to
// evaluate_perplexity_xl, any length, `cfg` unused. cmt_id: the "<|cmt|>" id, needed by a model trained with a
// context-miss token. progress(window_done, windows_total).
PerplexityResult evaluate_perplexity(const GPT& model, const std::vector<int32_t>& tokens, const BeyondConfig& cfg,
                                     int32_t landmark_id, int32_t cmt_id, int64_t eval_length, int64_t max_windows = 0,
                                     const std::function<void(int64_t, int64_t)>& progress = nullptr);

// The Transformer-XL reading of the same windows (GPTConfig::xl_cache = M; any standard model):
// each window of eval_length tokens is read in consecutive pieces of the model's block_size T
// tokens (the last one shorter when T does not divide eval_length), the cache carried from piece
// to piece (GPT::forward_xl) and empty at the window's start, so the first piece is read exactly as
// a standard model reads its window (its first token with no context at all) and a later piece
// sees the M positions before it. Every position scored, the last against the token after the
// window, as evaluate_perplexity. With M = 0 every piece is read alone: windowed perplexity with
// windows of T. CPU only.
PerplexityResult evaluate_perplexity_xl(const GPT& model, const std::vector<int32_t>& tokens, int64_t eval_length,
                                        int64_t max_windows = 0,
                                        const std::function<void(int64_t, int64_t)>& progress = nullptr);

// A percentile bootstrap interval for the perplexity, resampling whole windows (the paper's
// windows are its independent units: tokens inside one share context). Each of `resamples`
// draws picks r.windows windows with replacement (Philox, stream RngStream::User + 1, `seed`),
// its perplexity is exp(sum nats / sum tokens), and the interval is cut from the sorted draws at
// (1 - level) / 2 and (1 + level) / 2 (linear between neighbours). Deterministic for a seed.
struct PerplexityInterval {
  double low = 0, high = 0;
};
PerplexityInterval bootstrap_perplexity_interval(const PerplexityResult& r, double level = 0.95,
                                                 int64_t resamples = 2000, uint64_t seed = 2023);

// Two evaluations of the same text, compared on the tokens both scored, window against window.
// The intervals above are wide mostly because passages differ in difficulty, and that variation
// is shared by two models reading the same passages; pairing removes it. Windows start at token
// 0 in both (window w of length L scored the L targets after token w L), so when the longer
// length is a multiple of the shorter, each longer window (a "span") covers a whole number of
// shorter ones, and the two score the same targets in it. Spans are resampled with replacement
// (the same Philox stream as bootstrap_perplexity_interval), both sides of a span together; each
// draw's ratio is exp((nats_a - nats_b) / tokens) = ppl_a / ppl_b over the drawn spans.
// A ratio interval below 1 says `a` is better on this text beyond what the choice of passages
// explains; it says nothing about other texts. Every window must have scored its full length.
struct PairedRatio {
  int64_t spans = 0, span_length = 0, tokens = 0;  // spans compared, tokens per span, in all
  double ppl_a = 0, ppl_b = 0;                     // each side's perplexity on those tokens
  double ratio = 0, low = 0, high = 0;             // ppl_a / ppl_b and its percentile interval
};
PairedRatio paired_bootstrap_ratio(const PerplexityResult& a, int64_t length_a, const PerplexityResult& b,
                                   int64_t length_b, double level = 0.95, int64_t resamples = 2000,
                                   uint64_t seed = 2023);

// The identity of the token sequence an evaluation read: its length and the CRC-32 (zlib's) of
// its token ids as little-endian 32-bit integers (the ids, not the file's bytes: the same tokens
// in a version-1 and a version-2 file are the same text).
struct TokensIdentity {
  int64_t tokens = 0;
  std::string crc32;  // 8 lowercase hex digits
  bool operator==(const TokensIdentity& o) const { return tokens == o.tokens && crc32 == o.crc32; }
  bool operator!=(const TokensIdentity& o) const { return !(*this == o); }
  std::string str() const;  // "<tokens> tokens, crc32 <hex>"
};
TokensIdentity tokens_identity(const std::vector<int32_t>& tokens);

// The most a window may average per token in a file of window sums: 1,000 nats is a probability
// of e^-1000 for every target, below the smallest positive double; a model's log-softmax over any
// vocabulary gives that only with logits a thousand apart, which no model that trained does.
// Anything larger (1e30, 1e308) is a damaged or forged file, not a measurement.
constexpr double kMaxWindowNatsPerToken = 1000;

// The per-window sums as a small table (`eval --windows-tsv`): a first line
// "# tokens<TAB>N<TAB>crc32<TAB>HEX" naming the token sequence (tokens_identity), a header line
// "window<TAB>first_token<TAB>tokens<TAB>nats", then one line per window, nats to 17 digits so that
// reading them back loses nothing. Written atomically. read_window_sums checks what
// paired_bootstrap_ratio relies on (windows 0, 1, ... in order, window w starting at w L, every
// window scoring L tokens, at most kMaxWindowNatsPerToken per token) and names the file and line
// of anything else; it returns the result (windows, tokens, nll, window_nll, window_tokens), sets
// *eval_length to L and, when `identity` is given, *identity to the file's first line. A file
// without that line (written before it was recorded) is refused: it cannot say what it measured.
void write_window_sums(const std::string& path, const PerplexityResult& r, int64_t eval_length,
                       const TokensIdentity& identity);
PerplexityResult read_window_sums(const std::string& path, int64_t* eval_length, TokensIdentity* identity = nullptr);

}  // namespace lm
