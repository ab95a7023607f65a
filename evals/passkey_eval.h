// passkey_eval.h: pass-key retrieval accuracy at a given prompt length (the paper's Section 4.2
// experiment). A landmark model reads the whole prompt through a BeyondSession (cached
// chunks + top-k block retrieval); a baseline sees only its training window (the last
// block_size tokens). Both answer greedily. Two ways to score a trial:
//   strict: the answer, after leading spaces, starts with exactly the key's digits (we stop at the
//           first non-digit, at most 10 tokens);
//   paper:  the first integer within the first 100 generated tokens equals the key.
// Optionally it also measures retrieval recall: how often the queries that produce the answer
// retrieve the block that holds the key, per layer and head.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "beyond/certificate.h"
#include "beyond/config.h"
#include "nn/gpt.h"

namespace lm {

class Tokenizer;

enum class PasskeyScoring { Strict, Paper };
PasskeyScoring parse_passkey_scoring(const std::string& s);  // "strict" | "paper"
const char* passkey_scoring_name(PasskeyScoring s);
// The most tokens an answer generates (strict: 10, the key's digits and a margin; paper: 100): a
// prompt of L tokens is read up to L + this - 1 tokens (the last one generated is not fed).
int64_t passkey_max_new(PasskeyScoring s);

struct PasskeyOptions {
  int64_t trials = 20;
  uint64_t seed = 2023;  // keys and key positions
  int64_t window = 0;    // > 0: the model sees only its last `window` tokens (the baseline)
  PasskeyScoring scoring = PasskeyScoring::Strict;
  bool recall = false;  // measure retrieval recall (landmark path only)
  double depth = -1;    // < 0: the key at a random filler boundary; [0, 1]: at this fraction
};

struct PasskeyResult {
  int64_t length = 0;  // requested prompt length (tokens)
  int64_t trials = 0, correct = 0;
  double seconds = 0;
  // Per trial, in trial order: the key asked for, the model's decoded answer (what was scored)
  // and whether it was scored correct, so two runs (two devices, two builds) can be compared
  // prompt by prompt.
  std::vector<int64_t> keys;
  std::vector<std::string> answers;
  std::vector<uint8_t> hits;
  double accuracy() const { return trials == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(trials); }
  // Retrieval recall, (n_layer * n_head) entries, index layer * n_head + head: of the answer-token
  // queries (the prompt's last token and each generated token fed back) for which a block holding
  // the key was in the cache, how many retrieved such a block among their top k.
  std::vector<int64_t> recall_hits, recall_queries;
  double recall(int64_t layer, int64_t head, int64_t n_head) const;  // -1 when no query counted
  // --search approx: of the (query, layer, head) rows that searched a cache, how many ran out of
  // tiles before their top k was proven (RetrievalRecord::budget_cut), over every prompt's
  // prefill and answer; the others chose exactly the scan's blocks.
  int64_t search_rows = 0, budget_cut = 0;
  // Beyond the paper, with BeyondConfig::certify: per layer, the left-out weights and bounds over
  // every prompt's prefill and answer.
  CertificateStats certificate;
  // Beyond the paper (cmt_skip.h, adaptive_k.h), as PerplexityResult counts them: distinct blocks chosen
  // and attended per (chunk, layer) with a cache, summed; adaptive k's rows, blocks kept, rows capped.
  int64_t unique = 0, attended = 0, adaptive_rows = 0, adaptive_blocks = 0, adaptive_capped = 0;
  // Beyond the paper (block_scorers.h), as PerplexityResult counts them; and the time spent
  // generating answers (after each prompt was read) and the tokens generated.
  int64_t keys_scored = 0, scored_rows = 0, summary_bytes = 0;
  OracleAgreement oracle;
  double answer_seconds = 0;
  int64_t answer_tokens = 0;
};

// Where a pass-key evaluation is: called after each chunk of a prompt's prefill and after each
// trial.
struct PasskeyProgress {
  int64_t trials_done = 0, trials = 0, correct = 0;  // finished trials, of how many, correct so far
  int64_t read = 0, prompt = 0;                      // tokens of the current prompt read so far, of how many
};

PasskeyResult passkey_accuracy(const GPT& model, const Tokenizer& tok, const BeyondConfig& cfg, int64_t length,
                               const PasskeyOptions& o,
                               const std::function<void(const PasskeyProgress&)>& progress = nullptr);

// The blocks (global indices, a block = F raw tokens) that hold the key's tokens, given the
// prompt's token ids: a token holds the key when its bytes overlap one of the key's two spans.
std::vector<int64_t> passkey_key_blocks(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                        const std::vector<std::pair<size_t, size_t>>& spans, int64_t F);

}  // namespace lm
