// Beyond the paper: the explorer (explorer.h).
// explorer_page.cpp: explorer_html (explorer.h): the tokens as HTML elements, the retrieval data
// packed into base64 arrays, both poured into the page template (explorer_template.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "beyond/explorer.h"
#include "tensor/check.h"
#include "train/tokenizer.h"

namespace lm {

namespace {

// Little-endian bytes of integers, then base64 (the page decodes them with a DataView).
struct Packer {
  std::string bytes;
  void u8(int64_t v) { bytes.push_back(static_cast<char>(static_cast<uint8_t>(v))); }
  void u16(int64_t v) {
    u8(v & 0xff);
    u8((v >> 8) & 0xff);
  }
  void u32(int64_t v) {
    u16(v & 0xffff);
    u16((v >> 16) & 0xffff);
  }
};

std::string base64(const std::string& in) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t b0 = static_cast<uint8_t>(in[i]);
    const uint32_t b1 = i + 1 < in.size() ? static_cast<uint8_t>(in[i + 1]) : 0;
    const uint32_t b2 = i + 2 < in.size() ? static_cast<uint8_t>(in[i + 2]) : 0;
    const uint32_t w = (b0 << 16) | (b1 << 8) | b2;
    out.push_back(abc[(w >> 18) & 63]);
    out.push_back(abc[(w >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? abc[(w >> 6) & 63] : '=');
    out.push_back(i + 2 < in.size() ? abc[w & 63] : '=');
  }
  return out;
}

// A value in [lo, hi] scaled and rounded to the nearest integer step.
int64_t quantize(double v, double scale, int64_t lo, int64_t hi) {
  return std::min<int64_t>(hi, std::max<int64_t>(lo, std::llround(v * scale)));
}

// A token's bytes as valid UTF-8: a byte-level tokenizer may cut a character in two, and the
// page must stay valid UTF-8, so a byte that does not start a complete sequence becomes U+FFFD.
std::string valid_utf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) ok = (static_cast<unsigned char>(s[i + j]) >> 6) == 2;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// The template with every @@NAME@@ placeholder replaced by its value, in one pass over the template
// (so a value that happens to contain "@@NAME@@" is never filled in again).
std::string fill_placeholders(const std::string& tmpl, const std::map<std::string, std::string>& values) {
  std::string out;
  std::set<std::string> filled;
  size_t at = 0;
  for (size_t open = tmpl.find("@@"); open != std::string::npos; open = tmpl.find("@@", at)) {
    const size_t close = tmpl.find("@@", open + 2);
    LM_CHECK(close != std::string::npos, "explorer: an unclosed placeholder in the page template at " << open);
    const std::string name = tmpl.substr(open + 2, close - open - 2);
    const auto it = values.find(name);
    LM_CHECK(it != values.end(), "explorer: the page template's placeholder @@" << name << "@@ has no value");
    out.append(tmpl, at, open - at);
    out += it->second;
    filled.insert(name);
    at = close + 2;
  }
  out.append(tmpl, at, std::string::npos);
  LM_CHECK(filled.size() == values.size(), "explorer: the page template lacks some of its placeholders");
  return out;
}

}  // namespace

namespace {

// The text: blocks of F tokens, each closed by its landmark; every token has data-pos.
std::string explorer_text(const ExploreData& d, const Tokenizer& tok) {
  const int64_t n = static_cast<int64_t>(d.ids.size()), F = d.F;
  std::string text;
  const std::set<int64_t> keys(d.key_blocks.begin(), d.key_blocks.end());
  for (int64_t g = 0; g * F < n; ++g) {
    text +=
        "<span class=\"b" + std::string(keys.count(g) ? " key" : "") + "\" data-block=\"" + std::to_string(g) + "\">";
    for (int64_t r = g * F; r < std::min(n, (g + 1) * F); ++r)
      text +=
          "<span data-pos=\"" + std::to_string(r) + "\">" + html_escape(valid_utf8(tok.decode({d.ids[r]}))) + "</span>";
    if ((g + 1) * F <= n) text += "<span class=\"lm\" title=\"landmark of block " + std::to_string(g) + "\"></span>";
    text += "</span>";
  }
  return text;
}

// The data: packed arrays and the pieces of every token the page names, as one JSON object.
nlohmann::json explorer_json(const ExploreData& d, const Tokenizer& tok, const ExplorePage& page) {
  const int64_t n = static_cast<int64_t>(d.ids.size()), S = d.max_blocks;
  Packer blocks, scores, mass, top_ids, top_probs, next_prob, ids;
  for (int64_t i = 0; i < d.rows() * S; ++i) {
    blocks.u16(d.blocks[i] + 1);                                     // 0: no block in this slot
    scores.u16(quantize(d.scores[i], 100, -32767, 32767) & 0xffff);  // int16, 0.01 steps
  }
  for (double m : d.mass) mass.u8(quantize(m, 255, 0, 255));
  std::set<int32_t> named(d.ids.begin(), d.ids.end());
  for (int32_t id : d.top_ids) {
    top_ids.u32(id);
    named.insert(id);
  }
  for (double p : d.top_probs) top_probs.u16(quantize(p, 65535, 0, 65535));
  for (double p : d.next_prob) next_prob.u16(quantize(std::max(p, 0.0), 65535, 0, 65535));
  for (int32_t id : d.ids) ids.u32(id);
  nlohmann::json pieces = nlohmann::json::object();
  for (int32_t id : named) pieces[std::to_string(id)] = valid_utf8(tok.decode({id}));

  const InferConfig& c = d.cfg;
  nlohmann::json j;
  j["n"] = n;
  j["L"] = d.n_layer;
  j["H"] = d.n_head;
  j["S"] = S;
  j["F"] = d.F;
  j["chunk"] = c.chunk_len;
  j["k"] = c.k;
  j["capacity"] = c.capacity;
  j["top"] = d.top;
  j["select"] = std::min<int64_t>(std::max<int64_t>(page.select, 0), n - 1);
  j["keyBlocks"] = d.key_blocks;
  j["key"] = page.passkey;
  j["blocks"] = base64(blocks.bytes);
  j["scores"] = base64(scores.bytes);
  j["mass"] = base64(mass.bytes);
  j["topIds"] = base64(top_ids.bytes);
  j["topProbs"] = base64(top_probs.bytes);
  j["nextProb"] = base64(next_prob.bytes);
  j["ids"] = base64(ids.bytes);
  j["pieces"] = pieces;
  return j;
}

// ASCII only (every other character as \uXXXX), and every '<' written as \u003c, so that nothing
// in the data can end the <script> element that holds it ("</script>") or put the HTML parser in
// the state where that end tag no longer counts ("<!--" then "<script"). A '<' can only stand
// inside a JSON string, where \u003c means the same character.
std::string script_safe(const nlohmann::json& j) {
  const std::string dumped = j.dump(-1, ' ', true);
  std::string data;
  data.reserve(dumped.size());
  for (char ch : dumped) {
    if (ch == '<')
      data += "\\u003c";
    else
      data += ch;
  }
  return data;
}

}  // namespace

std::string explorer_html(const ExploreData& d, const Tokenizer& tok, const ExplorePage& page) {
  const int64_t n = static_cast<int64_t>(d.ids.size()), F = d.F;
  LM_CHECK(n > 0, "explorer: nothing to show (no tokens)");
  LM_CHECK((n + F - 1) / F < 65535, "explorer: " << n << " tokens make more blocks than the page packs (65534)");
  for (int32_t id : d.ids)
    LM_CHECK(id >= 0 && id < tok.vocab_size(), "explorer: token " << id << " is outside the tokenizer's vocabulary");
  const InferConfig& c = d.cfg;
  const std::string settings = "k " + std::to_string(c.k) + ", chunks of " + std::to_string(c.chunk_len) + " tokens, " +
                               position_mode_name(c.positions) + " positions, " + granularity_name(c.granularity) +
                               " granularity" +
                               (c.capacity > 0 ? ", capacity " + std::to_string(c.capacity) + " blocks" : "");
  return fill_placeholders(
      kExplorerTemplate,
      {{"TITLE", html_escape(valid_utf8(page.title))},
       {"MODEL", html_escape(valid_utf8(page.model))},
       {"SETTINGS", html_escape(settings + "; " + std::to_string(n) + " tokens, " + std::to_string(F) + " per block")},
       {"TEXT", explorer_text(d, tok)},
       {"DATA", script_safe(explorer_json(d, tok, page))}});
}

}  // namespace lm
