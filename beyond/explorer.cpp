// Beyond the paper: the explorer (explorer.h).
// explorer.cpp: explore_tokens, find_passkey and retrieval_tsv (explorer.h). The page itself is
// explorer_page.cpp.
#include "beyond/explorer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "beyond/session.h"
#include "landmark/tokens.h"
#include "tensor/ops.h"

namespace lm {

namespace {

// The `top` most probable next tokens of one row of logits (V values), best first (ties to the
// smaller id), and the probability of token `next` (-1: none), by a softmax in f64.
void next_tokens(const double* logits, int64_t V, int64_t top, int32_t next, int32_t* ids, double* probs,
                 double* p_next) {
  double mx = -INFINITY, z = 0;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits[v]);
  for (int64_t v = 0; v < V; ++v) z += std::exp(logits[v] - mx);
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) order[v] = static_cast<int32_t>(v);
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (int64_t j = 0; j < top; ++j) {
    ids[j] = order[j];
    probs[j] = std::exp(logits[order[j]] - mx) / z;
  }
  *p_next = next >= 0 ? std::exp(logits[next] - mx) / z : -1.0;
}

}  // namespace

ExploreData explore_tokens(const GPT& model, const BeyondConfig& cfg, const std::vector<int32_t>& ids,
                           int32_t landmark_id, int32_t cmt_id, int64_t top) {
  LM_CHECK(!ids.empty(), "explore: the text has no tokens");
  LM_CHECK(model.device() == Device::CPU,
           "explore: the model must be on the CPU (the attention per row is recorded "
           "by the CPU rows)");
  LM_CHECK(cfg.search == KeySearch::Scan,
           "explore: needs --search scan (the bounded and approximate searches do not "
           "score every block they could choose, so they have no scores to show)");
  const GPTConfig& mc = model.config();
  const int64_t V = mc.vocab_size, n = static_cast<int64_t>(ids.size());
  LM_CHECK(top >= 1 && top <= V, "explore: the next-token list must hold 1.." << V << " tokens, got " << top);
  ExploreData d;
  d.n_layer = mc.n_layer;
  d.n_head = mc.n_head;
  d.F = mc.landmark_every;
  d.cfg = cfg;
  d.ids = ids;
  d.top = top;
  d.top_ids.resize(static_cast<size_t>(n * top));
  d.top_probs.resize(static_cast<size_t>(n * top));
  d.next_prob.resize(static_cast<size_t>(n));

  // --- the reading: chunk by chunk, as InferenceSession::feed does, keeping each chunk's logits
  // only as long as its next-token lists take ---
  BeyondSession s(model, cfg, landmark_id, cmt_id);
  RetrievalTrace trace;
  trace.detail = true;
  s.set_trace(&trace);
  for (int64_t at = 0; at < n; at += cfg.chunk_len) {
    const int64_t end = std::min(n, at + cfg.chunk_len);
    const Tensor logits = s.feed_chunk(std::vector<int32_t>(ids.begin() + at, ids.begin() + end));  // (end - at, V)
    const std::vector<double> lg = logits.to_double_vector();
    for (int64_t r = at; r < end; ++r)
      next_tokens(lg.data() + (r - at) * V, V, top, r + 1 < n ? ids[r + 1] : -1, d.top_ids.data() + r * top,
                  d.top_probs.data() + r * top, &d.next_prob[r]);
  }

  // --- the trace, row by row: one entry per (raw token, layer, head) ---
  for (const RetrievalTrace::Step& st : trace.steps)
    for (const std::vector<int32_t>& sel : st.sel)
      d.max_blocks = std::max<int64_t>(d.max_blocks, static_cast<int64_t>(sel.size()));
  const int64_t S = d.max_blocks, NH = d.n_head;
  d.blocks.assign(static_cast<size_t>(d.rows() * S), -1);
  d.scores.assign(static_cast<size_t>(d.rows() * S), 0.0);
  d.mass.assign(static_cast<size_t>(d.rows() * (S + 2)), 0.0);
  const AugmentedIndex aug{d.F};
  const bool landmarks = mc.landmark();  // a standard model read with --scorer: its stream is the raw one
  std::vector<uint8_t> seen(static_cast<size_t>(d.rows()), 0);
  for (const RetrievalTrace::Step& st : trace.steps) {
    LM_CHECK(st.score.size() == st.sel.size() && st.mass.size() == st.sel.size(),
             "explore: the trace of layer " << st.layer << " has no detail for every row");
    for (int64_t i = 0; i < st.n; ++i) {
      const int64_t a = st.aug_start + i;
      if (landmarks && aug.is_landmark(a)) continue;
      const int64_t r = landmarks ? aug.raw_index(a) : a;
      for (int64_t h = 0; h < NH; ++h) {
        const size_t src = static_cast<size_t>(h * st.n + i);
        const int64_t row = d.row(r, st.layer, h), kb = static_cast<int64_t>(st.sel[src].size());
        for (int64_t c = 0; c < kb; ++c) {
          d.blocks[row * S + c] = static_cast<int32_t>(st.first_gid + st.sel[src][c]);
          d.scores[row * S + c] = st.score[src][c];
          d.mass[row * (S + 2) + c] = st.mass[src][c];
        }
        d.mass[row * (S + 2) + S] = st.mass[src][kb];          // tail
        d.mass[row * (S + 2) + S + 1] = st.mass[src][kb + 1];  // chunk
        seen[row] = 1;
      }
    }
  }
  LM_CHECK(std::all_of(seen.begin(), seen.end(), [](uint8_t v) { return v == 1; }),
           "explore: the trace missed some (token, layer, head) rows");
  return d;
}

PasskeyInText find_passkey(const std::string& text, int64_t key) {
  PasskeyInText p;
  p.key = key;
  if (p.key < 0) {
    const std::string lead = "The pass key is ";
    for (size_t at = text.find(lead); at != std::string::npos; at = text.find(lead, at + 1)) {
      size_t e = at + lead.size();
      while (e < text.size() && std::isdigit(static_cast<unsigned char>(text[e]))) ++e;
      if (e > at + lead.size() && e - (at + lead.size()) <= 18) {
        p.key = std::stoll(text.substr(at + lead.size(), e - at - lead.size()));
        break;
      }
    }
  }
  if (p.key < 0) return p;
  const std::string digits = std::to_string(p.key);
  auto digit = [&](size_t i) { return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); };
  for (size_t at = text.find(digits); at != std::string::npos; at = text.find(digits, at + 1))
    if ((at == 0 || !digit(at - 1)) && !digit(at + digits.size())) p.spans.push_back({at, at + digits.size()});
  return p;
}

std::string retrieval_tsv(const ExploreData& d) {
  std::ostringstream os;
  os << "pos\tlayer\thead\tblocks\tscores\n";
  char buf[32];
  const int64_t n = static_cast<int64_t>(d.ids.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t l = 0; l < d.n_layer; ++l)
      for (int64_t h = 0; h < d.n_head; ++h) {
        const int64_t row = d.row(r, l, h);
        std::string blocks, scores;
        for (int64_t c = 0; c < d.max_blocks && d.blocks[row * d.max_blocks + c] >= 0; ++c) {
          std::snprintf(buf, sizeof buf, "%.4f", d.scores[row * d.max_blocks + c]);
          blocks += (c ? "," : "") + std::to_string(d.blocks[row * d.max_blocks + c]);
          scores += (c ? "," : "") + std::string(buf);
        }
        os << r << '\t' << l << '\t' << h << '\t' << (blocks.empty() ? "-" : blocks) << '\t'
           << (scores.empty() ? "-" : scores) << '\n';
      }
  return os.str();
}

}  // namespace lm
