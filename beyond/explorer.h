// Beyond the paper: a page showing what retrieval did; inference itself does not need it.
// explorer.h: retrieval made visible. explore_tokens reads a text with cached chunked inference,
// exactly as generation reads a prompt, and keeps what the session's RetrievalTrace (with detail)
// reported for every token, layer and head: the blocks it retrieved, their landmark scores, and
// where its attention went over [retrieved blocks | tail | chunk]; plus the next-token
// probabilities. Nothing is recomputed beside the real path, so the page shows what inference did.
// explorer_html (explorer_page.cpp) turns that into one self-contained HTML page; not here: the
// command (apps/cmd_explore.cpp). docs/infer.md, "Watching it: the explorer" and "The explorer's
// data".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "beyond/config.h"
#include "nn/gpt.h"

namespace lm {

class Tokenizer;

struct ExploreData {
  int64_t n_layer = 0, n_head = 0, F = 0;
  int64_t max_blocks = 0;  // the most blocks any row retrieved: min(k, blocks cached at the last chunk)
  InferConfig cfg;
  std::vector<int32_t> ids;  // the raw tokens read (n)
  // Row (r, l, h) for raw token r, layer l, head h: row(r, l, h) = (r * n_layer + l) * n_head + h.
  // The queries at landmark positions are not kept (they predict nothing and are not shown).
  std::vector<int32_t> blocks;      // (rows, max_blocks) global block indices, chronological; -1 past the row's count
  std::vector<double> scores;       // (rows, max_blocks) each block's landmark score (RetrievalTrace::Step::score)
  std::vector<double> mass;         // (rows, max_blocks + 2) weight on each retrieved block, then the tail, the chunk
  int64_t top = 0;                  // next-token candidates kept per token
  std::vector<int32_t> top_ids;     // (n, top) the most probable next tokens, best first
  std::vector<double> top_probs;    // (n, top) their probabilities
  std::vector<double> next_prob;    // (n) the probability given to the text's next token (the last: -1)
  std::vector<int64_t> key_blocks;  // blocks that hold a pass key, ascending (marked on the page)
  int64_t rows() const { return static_cast<int64_t>(ids.size()) * n_layer * n_head; }
  int64_t row(int64_t r, int64_t l, int64_t h) const { return (r * n_layer + l) * n_head + h; }
};

// Reads `ids` (at least one token) through an InferenceSession (model on the CPU: the attention
// mass comes from the CPU rows; the scan search: scores of the chosen blocks) and collects the
// data above, keeping the `top` most probable next tokens of every position.
ExploreData explore_tokens(const GPT& model, const BeyondConfig& cfg, const std::vector<int32_t>& ids,
                           int32_t landmark_id, int32_t cmt_id = -1, int64_t top = 5);

// The pass key of a pass-key prompt: `key` when >= 0, else the number after "The pass key is "
// (the key sentence; the closing question has none), -1 when there is none; and the byte spans
// [begin, end) where that number stands in the text (not inside a longer number).
struct PasskeyInText {
  int64_t key = -1;
  std::vector<std::pair<size_t, size_t>> spans;
};
PasskeyInText find_passkey(const std::string& text, int64_t key = -1);

// One line per (token, layer, head): "pos layer head blocks scores", tab-separated; blocks and
// scores comma-separated ("-" when none). What the page lists, for tests and scripts.
std::string retrieval_tsv(const ExploreData& d);

// What the page says about where the data came from.
struct ExplorePage {
  std::string title;     // e.g. the text file's name
  std::string model;     // e.g. "2 layers, 4 heads, d 64, F 50" and the checkpoint
  int64_t select = 0;    // the token selected when the URL has no #pos=N
  int64_t passkey = -1;  // the pass key, when the text has one (named beside its blocks)
};

// The page: one HTML file with its CSS, script and data inline (no network, no server). Every
// raw token is an element with data-pos = its index; the arrays are packed (scores to 0.01,
// masses and probabilities to 1/255 and 1/65535) so a 4k-token prompt stays near 2 MB.
std::string explorer_html(const ExploreData& d, const Tokenizer& tok, const ExplorePage& page);

// The page's HTML, CSS and script, hand-written, with placeholders @@TITLE@@, @@MODEL@@, @@SETTINGS@@,
// @@TEXT@@ and @@DATA@@ that explorer_html fills (explorer_template.cpp).
extern const char* const kExplorerTemplate;

}  // namespace lm
