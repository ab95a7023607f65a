// test_explorer.cpp: the explorer's data and page (beyond/explorer.h). What it collects must be what
// inference did: the blocks equal those the attention capture (attn-map's machinery) and a plain
// retrieval trace (passkey --recall's) report; with exact positions the scores and attention
// masses equal those of the one-shot forward, and with fewer blocks than cached, layer 0 takes
// the top k of the one-shot scores. The page holds one data-pos element per token and its packed
// arrays decode to the data. Pass-key detection and the TSV on hand-worked inputs.
#include "tests/helpers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "beyond/explorer.h"
#include "infer/session.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "tests/infer_fixtures.h"
#include "train/tokenizer.h"

using namespace lm;
using namespace lm::test;
using namespace lm::infer_test;

namespace {

// The one-shot forward of `raw` with landmarks inserted at true positions 0..N-1, keeping each
// layer's rotated queries and keys (1, NH, N, HS) and its final attention weights (1, NH, N, N):
// what chunked inference with exact positions and every block retrieved must reproduce.
struct OneShot {
  std::vector<Tensor> q, k, w;
};
OneShot one_shot(const GPT& model, const std::vector<int32_t>& raw) {
  NoGradGuard ng;
  std::vector<int32_t> toks, kinds;
  LandmarkInserter(model.config().landmark_every, kLandmarkId).push(raw, toks, &kinds);
  const int64_t N = static_cast<int64_t>(toks.size());
  const LandmarkLayout layout = make_layout(from_vector(kinds, {1, N}));
  const AttentionFn core = landmark_attention_core(layout);
  OneShot o;
  auto watching = [&](const Var& q, const Var& k, const Var& v) {
    o.q.push_back(q.value());
    o.k.push_back(k.value());
    o.w.push_back(landmark_attention_weights(q.value(), k.value(), layout));
    return core(q, k, v);
  };
  model.forward(from_vector(toks, {1, N}), arange(N, DType::I32).reshape({1, N}), watching);
  return o;
}

// Minimal base64 decoder, written apart from the page writer's encoder.
std::string unbase64(const std::string& s) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
          : c == '+' ? 62 : c == '/' ? 63 : -1;
    if (v < 0) continue;  // '=' padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

int64_t count_of(const std::string& s, const std::string& what) {
  int64_t c = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++c;
  return c;
}

}  // namespace

TEST_CASE("explorer: the blocks and masses are what the session reported, row by row", "[infer]") {
  // The default path (f32, stingy positions, token-head): the explorer's rows against two other
  // reports of the same reading. Blocks: the attention capture of each (layer, head) and a plain
  // retrieval trace without detail (so detail changes nothing). Masses: the captured weights of
  // each row summed over the retrieved blocks' keys, the tail and the chunk, in the same order,
  // from the same floats: equal to 1e-12 (rounding of the double sums only).
  const auto model = make_model(DType::F32);
  const std::vector<int32_t> raw = random_raw(57, 7);
  InferConfig cfg;
  cfg.chunk_len = 12;
  cfg.k = 2;
  const ExploreData d = explore_tokens(*model, cfg, raw, kLandmarkId, -1, 3);
  const int64_t F = 5, L = 2, NH = 2, n = 57, S = d.max_blocks;
  REQUIRE(d.rows() == n * L * NH);
  CHECK(S == 2);  // k 2, and from the second chunk on at least 2 blocks are cached
  const AugmentedIndex aug{F};

  RetrievalTrace plain;
  InferenceSession traced(*model, cfg, kLandmarkId);
  traced.set_trace(&plain);
  traced.feed(raw);
  for (const RetrievalTrace::Step& st : plain.steps) {
    CHECK(st.score.empty());  // no detail asked, none kept
    for (int64_t i = 0; i < st.n; ++i) {
      if (aug.is_landmark(st.aug_start + i)) continue;
      const int64_t r = aug.raw_index(st.aug_start + i);
      for (int64_t h = 0; h < NH; ++h) {
        std::vector<int32_t> want;
        for (int32_t c : st.sel[h * st.n + i]) want.push_back(static_cast<int32_t>(st.first_gid + c));
        std::vector<int32_t> got;
        for (int64_t c = 0; c < S && d.blocks[d.row(r, st.layer, h) * S + c] >= 0; ++c)
          got.push_back(d.blocks[d.row(r, st.layer, h) * S + c]);
        INFO("token " << r << " layer " << st.layer << " head " << h);
        CHECK(got == want);
      }
    }
  }

  int64_t rows_checked = 0, with_blocks = 0;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < NH; ++h) {
      AttentionCapture cap;
      cap.layer = l;
      cap.head = h;
      InferenceSession s(*model, cfg, kLandmarkId);
      s.set_capture(&cap);
      s.feed(raw);
      for (const AttentionCapture::Row& row : cap.rows) {
        if (aug.is_landmark(row.query)) continue;
        const int64_t r = aug.raw_index(row.query), at = d.row(r, l, h);
        const int64_t chunk_start = aug.augmented_index(r / cfg.chunk_len * cfg.chunk_len);
        const int64_t kb = static_cast<int64_t>(row.retrieved.size());
        INFO("token " << r << " layer " << l << " head " << h);
        for (int64_t c = 0; c < S; ++c) CHECK(d.blocks[at * S + c] == (c < kb ? row.retrieved[c] : -1));
        // The captured row: kb (F + 1) keys of the retrieved blocks first, then the local keys.
        std::vector<double> want(static_cast<size_t>(S + 2), 0.0);
        for (size_t j = 0; j < row.keys.size(); ++j) {
          const int64_t part = static_cast<int64_t>(j) < kb * (F + 1) ? static_cast<int64_t>(j) / (F + 1)
                               : row.keys[j] < chunk_start                 ? S
                                                                           : S + 1;
          want[part] += row.weights[j];
        }
        for (int64_t c = 0; c < S + 2; ++c) CHECK(std::fabs(d.mass[at * (S + 2) + c] - want[c]) < 1e-12);
        ++rows_checked;
        with_blocks += kb > 0;
      }
    }
  CHECK(rows_checked == n * L * NH);
  CHECK(with_blocks > n * L * NH / 2);  // most rows retrieved something: the test saw retrieval
}

TEST_CASE("explorer: with exact positions and every block retrieved, scores and masses are the one-shot's", "[infer]") {
  // The main oracle of cached inference (docs/design.md section 4, oracle 3), per row: in f64 a query's landmark
  // score of block g must equal q . k_landmark(g) / sqrt(HS) from the one-shot forward's rotated
  // queries and keys, and its attention on block g, the tail and the chunk the one-shot weights
  // summed over those positions. The same arithmetic in another order: 1e-9 on scores of size
  // ~10-100 and on masses (in fact ~1e-13).
  const auto model = make_model(DType::F64);
  const std::vector<int32_t> raw = random_raw(43, 11);
  const InferConfig cfg = exact_all(10);
  const ExploreData d = explore_tokens(*model, cfg, raw, kLandmarkId);
  const OneShot o = one_shot(*model, raw);
  const int64_t F = 5, B1 = F + 1, L = 2, NH = 2, HS = 8, n = 43, S = d.max_blocks;
  CHECK(S == 40 / F);  // the last chunk (raw 40..42) has blocks 0..7 cached
  const AugmentedIndex aug{F};
  double worst_score = 0, worst_mass = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t a = aug.augmented_index(r), cs = r / cfg.chunk_len * cfg.chunk_len;
    const int64_t cached = cs / F, chunk_start = aug.augmented_index(cs), tail_start = cached * B1;
    for (int64_t l = 0; l < L; ++l) {
      const std::vector<double> q = values(o.q[l]), k = values(o.k[l]), w = values(o.w[l]);
      const int64_t N = o.q[l].size(2);
      for (int64_t h = 0; h < NH; ++h) {
        const int64_t at = d.row(r, l, h);
        INFO("token " << r << " layer " << l << " head " << h);
        for (int64_t g = 0; g < S; ++g) {
          REQUIRE(d.blocks[at * S + g] == (g < cached ? g : -1));  // every cached block, in order
          if (g >= cached) continue;
          double s = 0, m = 0;
          for (int64_t e = 0; e < HS; ++e) s += q[(h * N + a) * HS + e] * k[(h * N + g * B1 + F) * HS + e];
          for (int64_t j = g * B1; j < (g + 1) * B1; ++j) m += w[(h * N + a) * N + j];
          worst_score = std::max(worst_score, std::fabs(d.scores[at * S + g] - s / std::sqrt(double(HS))));
          worst_mass = std::max(worst_mass, std::fabs(d.mass[at * (S + 2) + g] - m));
        }
        double tail = 0, chunk = 0;
        for (int64_t j = tail_start; j < chunk_start; ++j) tail += w[(h * N + a) * N + j];
        for (int64_t j = chunk_start; j <= a; ++j) chunk += w[(h * N + a) * N + j];
        worst_mass = std::max(worst_mass, std::fabs(d.mass[at * (S + 2) + S] - tail));
        worst_mass = std::max(worst_mass, std::fabs(d.mass[at * (S + 2) + S + 1] - chunk));
      }
    }
  }
  CHECK(worst_score < 1e-9);
  CHECK(worst_mass < 1e-9);
}

TEST_CASE("explorer: with fewer blocks than cached, layer 0 takes the top k of the one-shot scores", "[infer]") {
  // Layer 0 sees the embeddings only, so its queries and keys do not depend on what retrieval
  // did: the one-shot forward gives them exactly (f64, exact positions). Each row must hold
  // min(k, cached) blocks whose scores equal the one-shot ones (1e-9, as above) and are at least
  // every unchosen block's score (1e-9: a tie may go either way by rounding; the tie rule itself
  // is tested in test_retrieval.cpp).
  const auto model = make_model(DType::F64);
  const std::vector<int32_t> raw = random_raw(61, 13);
  InferConfig cfg = exact_all(9);
  cfg.k = 3;
  const ExploreData d = explore_tokens(*model, cfg, raw, kLandmarkId);
  const OneShot o = one_shot(*model, raw);
  const int64_t F = 5, B1 = F + 1, NH = 2, HS = 8, S = d.max_blocks, N = o.q[0].size(2);
  REQUIRE(S == 3);
  const std::vector<double> q = values(o.q[0]), k = values(o.k[0]);
  const AugmentedIndex aug{F};
  int64_t rows = 0;
  for (int64_t r = 0; r < 61; ++r) {
    const int64_t a = aug.augmented_index(r), cached = r / cfg.chunk_len * cfg.chunk_len / F;
    for (int64_t h = 0; h < NH; ++h) {
      std::vector<double> score(static_cast<size_t>(cached));
      for (int64_t g = 0; g < cached; ++g) {
        for (int64_t e = 0; e < HS; ++e) score[g] += q[(h * N + a) * HS + e] * k[(h * N + g * B1 + F) * HS + e];
        score[g] /= std::sqrt(double(HS));
      }
      const int64_t at = d.row(r, 0, h);
      std::vector<bool> chosen(static_cast<size_t>(cached), false);
      int64_t count = 0;
      double lowest_chosen = INFINITY;
      INFO("token " << r << " head " << h);
      for (int64_t c = 0; c < S && d.blocks[at * S + c] >= 0; ++c) {
        const int64_t g = d.blocks[at * S + c];
        REQUIRE(g < cached);
        chosen[g] = true;
        ++count;
        CHECK(std::fabs(d.scores[at * S + c] - score[g]) < 1e-9);
        lowest_chosen = std::min(lowest_chosen, score[g]);
      }
      CHECK(count == std::min<int64_t>(3, cached));
      for (int64_t g = 0; g < cached; ++g)
        if (!chosen[g]) CHECK(score[g] <= lowest_chosen + 1e-9);
      ++rows;
    }
  }
  CHECK(rows == 61 * NH);
}

TEST_CASE("explorer: the page has one data-pos element per token and its arrays decode to the data", "[infer]") {
  // The page is checked as text here (a browser reads it in tests/cli/test_explore_cli.sh): each
  // token index appears once as data-pos, in order; every slot is filled; the JSON in the page
  // parses and its base64 arrays, decoded by the test's own decoder, give back the blocks
  // (exactly), the scores (to the 0.01 they are rounded to) and the masses (to 1/255).
  const auto model = make_model(DType::F32);
  const std::vector<int32_t> raw = random_raw(33, 5);
  InferConfig cfg;
  cfg.chunk_len = 8;
  cfg.k = 2;
  ExploreData d = explore_tokens(*model, cfg, raw, kLandmarkId);
  d.key_blocks = {2};
  ByteTokenizer tok;  // ids 0..39 are bytes: '"' (34) and '&' (38) must come out escaped
  ExplorePage page;
  page.title = "a <title> & more";
  page.model = "test model";
  const std::string html = explorer_html(d, tok, page);
  CHECK(count_of(html, "data-pos=\"") == 33);
  size_t at = 0;
  for (int64_t r = 0; r < 33; ++r) {
    at = html.find("data-pos=\"" + std::to_string(r) + "\"", at);
    REQUIRE(at != std::string::npos);
  }
  CHECK(html.find("@@") == std::string::npos);
  CHECK(html.find("a &lt;title&gt; &amp; more") != std::string::npos);
  CHECK(count_of(html, "class=\"b key\" data-block=\"2\"") == 1);
  CHECK(count_of(html, "class=\"lm\"") == 33 / 5);  // a landmark closes each full block
  const size_t open = html.find("<script type=\"application/json\" id=\"data\">");
  REQUIRE(open != std::string::npos);
  const size_t from = html.find('>', open) + 1, to = html.find("</script>", from);
  const nlohmann::json j = nlohmann::json::parse(html.substr(from, to - from));
  CHECK(j["n"] == 33);
  CHECK(j["S"] == d.max_blocks);
  const std::string blocks = unbase64(j["blocks"]), scores = unbase64(j["scores"]), mass = unbase64(j["mass"]);
  REQUIRE(static_cast<int64_t>(blocks.size()) == d.rows() * d.max_blocks * 2);
  REQUIRE(static_cast<int64_t>(mass.size()) == d.rows() * (d.max_blocks + 2));
  auto u16 = [](const std::string& b, size_t i) {
    return static_cast<int>(static_cast<uint8_t>(b[2 * i]) | (static_cast<uint8_t>(b[2 * i + 1]) << 8));
  };
  for (size_t i = 0; i < d.blocks.size(); ++i) {
    CHECK(u16(blocks, i) == d.blocks[i] + 1);
    const int s16 = u16(scores, i) >= 32768 ? u16(scores, i) - 65536 : u16(scores, i);
    CHECK(std::fabs(s16 / 100.0 - d.scores[i]) <= 0.005 + 1e-9);
  }
  for (size_t i = 0; i < d.mass.size(); ++i)
    CHECK(std::fabs(static_cast<uint8_t>(mass[i]) / 255.0 - d.mass[i]) <= 0.5 / 255 + 1e-9);
}

TEST_CASE("explorer: names from a tokenizer stay inert: the embedded JSON holds no '<' at all", "[infer]") {
  // A tokenizer special renamed to "<!--<script>": inside the page's <script> element, "<!--"
  // followed by "<script" puts an HTML parser into a state where the element's own "</script>"
  // no longer closes it, so the page's code never ran (Chromium showed a blank page). Breaking up
  // "</" alone did not help; every '<' in the JSON is now written as \u003c. The special is
  // named both as a token of the text and as a next-token candidate, beside the byte '<' itself.
  const auto model = make_model(DType::F32);
  InferConfig cfg;
  cfg.chunk_len = 8;
  cfg.k = 2;
  ExploreData d = explore_tokens(*model, cfg, random_raw(20, 5), kLandmarkId);
  ByteTokenizer tok;
  const int32_t hostile = tok.add_special("<!--<script>");
  d.ids[3] = hostile;
  d.ids[4] = '<';
  d.top_ids[0] = hostile;
  d.top_ids[1] = '<';
  ExplorePage page;
  page.title = "</script><!--<script>";
  page.model = "<!--<script>";
  const std::string html = explorer_html(d, tok, page);
  const size_t open = html.find("<script type=\"application/json\" id=\"data\">");
  REQUIRE(open != std::string::npos);
  const size_t from = html.find('>', open) + 1, to = html.find("</script>", from);
  REQUIRE(to != std::string::npos);
  const std::string data = html.substr(from, to - from);
  CHECK(data.find('<') == std::string::npos);
  // The escapes are JSON's own: the names come back whole.
  const nlohmann::json j = nlohmann::json::parse(data);
  CHECK(j["pieces"][std::to_string(hostile)] == "<!--<script>");
  CHECK(j["pieces"]["60"] == "<");
  // Elsewhere on the page the names are HTML-escaped text: the page's only script elements and
  // comment openers are its template's (two <script>, no "<!--").
  CHECK(count_of(html, "<script") == 2);
  CHECK(count_of(html, "<!--") == 0);
  CHECK(count_of(html, "&lt;!--&lt;script&gt;") == 4);  // the title (in <title> and <h1>), the model, the token
}

TEST_CASE("explorer: the pass key is found in its sentence, alone, and asked for", "[infer]") {
  // Hand-worked: the key sentence gives 4213; both of its occurrences count, not the 4213 inside
  // 142130; the closing question ("The pass key is" and nothing) gives no key.
  const std::string text = "Filler 142130. The pass key is 4213. Remember it. 4213 is the pass key. "
                           "What is the pass key? The pass key is";
  const PasskeyInText p = find_passkey(text);
  CHECK(p.key == 4213);
  REQUIRE(p.spans.size() == 2);
  CHECK(text.substr(p.spans[0].first, p.spans[0].second - p.spans[0].first) == "4213");
  CHECK(p.spans[0].first == text.find("is 4213") + 3);
  CHECK(p.spans[1].first == text.find("4213 is"));
  CHECK(find_passkey("What is the pass key? The pass key is").key == -1);
  const PasskeyInText given = find_passkey(text, 142130);  // a given key is looked for as given
  CHECK(given.key == 142130);
  REQUIRE(given.spans.size() == 1);
  CHECK(given.spans[0].first == 7);
  CHECK(find_passkey(text, 99).spans.empty());
}

TEST_CASE("explorer: the retrieval TSV lists each token, layer and head", "[infer]") {
  // Hand-made data: 2 tokens, 1 layer, 2 heads, at most 2 blocks a row.
  ExploreData d;
  d.n_layer = 1;
  d.n_head = 2;
  d.max_blocks = 2;
  d.ids = {7, 8};
  d.blocks = {-1, -1, -1, -1, 0, 3, 3, -1};
  d.scores = {0, 0, 0, 0, 1.5, -0.25, 2, 0};
  CHECK(retrieval_tsv(d) ==
        "pos\tlayer\thead\tblocks\tscores\n"
        "0\t0\t0\t-\t-\n"
        "0\t0\t1\t-\t-\n"
        "1\t0\t0\t0,3\t1.5000,-0.2500\n"
        "1\t0\t1\t3\t2.0000\n");
}

TEST_CASE("explorer: refuses what it cannot show", "[infer]") {
  const auto model = make_model(DType::F32);
  InferConfig cfg;
  cfg.chunk_len = 8;
  CHECK_THROWS_WITH(explore_tokens(*model, cfg, {}, kLandmarkId), Catch::Contains("no tokens"));
  cfg.search = KeySearch::Bounded;
  CHECK_THROWS_WITH(explore_tokens(*model, cfg, {1, 2, 3}, kLandmarkId), Catch::Contains("--search scan"));
}
