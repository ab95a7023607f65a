// passkey_eval.cpp: passkey_accuracy and retrieval recall (passkey_eval.h).
#include "evals/passkey_eval.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "beyond/session.h"
#include "infer/generate.h"
#include "landmark/tokens.h"
#include "train/passkey.h"
#include "train/tokenizer.h"

namespace lm {

PasskeyScoring parse_passkey_scoring(const std::string& s) {
  if (s == "strict") return PasskeyScoring::Strict;
  if (s == "paper") return PasskeyScoring::Paper;
  LM_FAIL("unknown pass-key scoring '" << s << "' (expected strict or paper)");
}
const char* passkey_scoring_name(PasskeyScoring s) { return s == PasskeyScoring::Strict ? "strict" : "paper"; }
int64_t passkey_max_new(PasskeyScoring s) { return s == PasskeyScoring::Paper ? 100 : 10; }

double PasskeyResult::recall(int64_t layer, int64_t head, int64_t n_head) const {
  const size_t at = static_cast<size_t>(layer * n_head + head);
  if (at >= recall_queries.size() || recall_queries[at] == 0) return -1;
  return static_cast<double>(recall_hits[at]) / static_cast<double>(recall_queries[at]);
}

std::vector<int64_t> passkey_key_blocks(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                        const std::vector<std::pair<size_t, size_t>>& spans, int64_t F) {
  std::vector<int64_t> blocks;
  size_t pos = 0;  // byte offset of token r in the decoded text
  for (size_t r = 0; r < ids.size(); ++r) {
    const size_t len = tok.decode({ids[r]}).size();
    for (const auto& [b, e] : spans)
      if (pos < e && pos + len > b) blocks.push_back(static_cast<int64_t>(r) / F);
    pos += len;
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  return blocks;
}

namespace {
// Adds one trial's recall counts: every traced regular query (landmark positions do not produce
// answer tokens) of each layer and head, counted when a key block was cached at that step.
void count_recall(const RetrievalTrace& trace, const std::vector<int64_t>& key_blocks, int64_t F, int64_t NH,
                  bool landmarks, PasskeyResult& r) {
  const AugmentedIndex aug{F};
  for (const RetrievalTrace::Step& st : trace.steps) {
    bool cached = false;
    for (int64_t g : key_blocks) cached = cached || (g >= st.first_gid && g < st.first_gid + st.cached);
    if (!cached) continue;
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < st.n; ++i) {
        const int64_t query = st.aug_start + i;
        if (query < trace.from_query || (landmarks && aug.is_landmark(query))) continue;
        bool hit = false;
        for (int32_t c : st.sel[h * st.n + i])
          hit = hit || std::binary_search(key_blocks.begin(), key_blocks.end(), st.first_gid + c);
        const size_t at = static_cast<size_t>(st.layer * NH + h);
        ++r.recall_queries[at];
        r.recall_hits[at] += hit;
      }
  }
}
}  // namespace

PasskeyResult passkey_accuracy(const GPT& model, const Tokenizer& tok, const BeyondConfig& cfg, int64_t length,
                               const PasskeyOptions& o, const std::function<void(const PasskeyProgress&)>& progress) {
  LM_CHECK(o.trials > 0, "passkey: need at least one trial, got " << o.trials);
  LM_CHECK(!o.recall || o.window <= 0, "passkey: retrieval recall needs the landmark path (no window)");
  const int32_t landmark = tok.special_id("<|landmark|>"), cmt = tok.special_id("<|cmt|>");
  const int64_t F = model.config().landmark_every, NH = model.config().n_head;
  PasskeyResult r;
  r.length = length;
  if (o.recall) {
    r.recall_hits.assign(static_cast<size_t>(model.config().n_layer * NH), 0);
    r.recall_queries = r.recall_hits;
  }
  const bool paper = o.scoring == PasskeyScoring::Paper;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t t = 0; t < o.trials; ++t) {
    PasskeyPrompt p = passkey_prompt_for_length(tok, length, o.seed, static_cast<uint64_t>(t), o.depth);
    std::vector<int32_t> ids = tok.encode(p.text);
    // Strict: the answer is complete at the first non-digit after the leading spaces. Paper: the
    // first integer is complete at the first non-digit after a digit; nothing later can matter.
    std::string so_far;
    auto stop = [&](int32_t id) {
      so_far += tok.decode({id});
      if (so_far.empty() || std::isdigit(static_cast<unsigned char>(so_far.back()))) return false;
      return paper ? so_far.find_first_of("0123456789") != std::string::npos
                   : so_far.find_first_not_of(' ') != std::string::npos;
    };
    const int64_t max_new = passkey_max_new(o.scoring);
    SampleOptions greedy;
    std::vector<int32_t> out;
    if (o.window > 0) {
      out = generate_windowed(model, ids, o.window, max_new, greedy, stop, landmark, cmt);
    } else {
      BeyondSession s(model, cfg, landmark, cmt);
      RetrievalTrace trace;
      if (o.recall) {  // from the prompt's last token (the first answer token's query) on
        const int64_t last = static_cast<int64_t>(ids.size()) - 1;  // a standard model's stream is the raw one
        trace.from_query = model.config().landmark() ? AugmentedIndex{F}.augmented_index(last) : last;
        s.set_trace(&trace);
      }
      const auto reading = [&](int64_t done, int64_t total) {
        if (progress) progress(PasskeyProgress{t, o.trials, r.correct, done, total});
      };
      Tensor first = s.read(ids, reading);
      const auto t_answer = std::chrono::steady_clock::now();
      out = generate_from(s, first, max_new, greedy, stop);
      r.answer_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_answer).count();
      r.answer_tokens += static_cast<int64_t>(out.size());
      r.summary_bytes = s.summary_bytes_per_block();
      if (o.recall)
        count_recall(trace, passkey_key_blocks(tok, ids, passkey_key_spans(p), F), F, NH, model.config().landmark(), r);
      for (const RetrievalRecord& rec : s.retrieval_log()) {  // as evaluate_perplexity counts them
        if (rec.cached > 0 && cfg.k > 0) r.search_rows += rec.queries * NH;
        r.budget_cut += rec.budget_cut;
        if (rec.cached > 0) {
          r.unique += rec.unique;
          r.keys_scored += rec.keys_scored;
          r.scored_rows += rec.queries * NH;
        }
      }
      add_extension_records(s, &r.attended, &r.adaptive_rows, &r.adaptive_blocks, &r.adaptive_capped, &r.certificate,
                            &r.oracle);
    }
    const std::string answer = tok.decode(out);
    const bool hit = (paper ? passkey_first_integer(answer) : passkey_answer_digits(answer)) == std::to_string(p.key);
    r.correct += hit;
    r.keys.push_back(static_cast<int64_t>(p.key));
    r.answers.push_back(answer);
    r.hits.push_back(hit);
    ++r.trials;
    if (progress) progress(PasskeyProgress{t + 1, o.trials, r.correct, 0, 0});
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace lm
