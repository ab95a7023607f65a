// bpe.cpp: byte-level BPE: training from a corpus (incremental pair counts over unique words),
// encoding by merge rank, and loading GPT-2's encoder.json + vocab.bpe.
// Not here: the pre-tokeniser and the Tokenizer base (tokenizer.cpp). Encoding is the plain
// "merge the lowest-ranked pair, repeat" loop, quadratic in a chunk's length; chunks are words.
#include <algorithm>
#include <fstream>
#include <map>
#include <queue>
#include <sstream>

#include "tensor/check.h"
#include "train/tokenizer.h"

namespace lm {

namespace {
uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t key_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t key_right(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// Replaces every non-overlapping (left, right), scanning left to right, by `result`. Returns
// whether anything changed. Training and encoding both use it, so they split words alike.
bool merge_pair(std::vector<int32_t>& ids, int32_t left, int32_t right, int32_t result) {
  size_t out = 0;
  bool changed = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + 1 < ids.size() && ids[i] == left && ids[i + 1] == right) {
      ids[out++] = result;
      ++i;
      changed = true;
    } else {
      ids[out++] = ids[i];
    }
  }
  ids.resize(out);
  return changed;
}
}  // namespace

// ---- construction and encoding ----

BpeTokenizer::BpeTokenizer(std::vector<int32_t> byte_ids, std::vector<Merge> merges)
    : byte_ids_(std::move(byte_ids)), merges_(std::move(merges)) {
  LM_CHECK(byte_ids_.size() == 256, "BPE: expected 256 byte ids, got " << byte_ids_.size());
  int32_t max_id = -1;
  for (int32_t id : byte_ids_) max_id = std::max(max_id, id);
  for (const Merge& m : merges_) max_id = std::max(max_id, m.result);
  LM_CHECK(max_id < (1 << 30), "BPE: id " << max_id << " is implausibly large");
  // Contiguous ids need one definition each: more ids than bytes + merges is an error before
  // anything is allocated (one id of 777777772 once asked for 25 GB of empty strings).
  LM_CHECK(static_cast<size_t>(max_id) < 256 + merges_.size(), "BPE: the ids must be contiguous, but the largest, "
                                                                   << max_id << ", is past the 256 bytes and "
                                                                   << merges_.size() << " merges");
  // Every id in [0, max_id] must stand for exactly one byte string; merges may only use ids
  // that exist by the time of their rank.
  std::vector<std::string> bytes(static_cast<size_t>(max_id + 1));
  std::vector<char> defined(bytes.size(), 0);
  auto define = [&](int32_t id, const std::string& s, const char* what) {
    LM_CHECK(id >= 0, "BPE: negative id " << id << " for " << what);
    if (defined[id]) {
      LM_CHECK(bytes[id] == s, "BPE: id " << id << " stands for two different strings (" << what << ")");
    }
    bytes[id] = s;
    defined[id] = 1;
  };
  for (int b = 0; b < 256; ++b) define(byte_ids_[b], std::string(1, static_cast<char>(b)), "a byte");
  size_t total_bytes = 256;
  for (size_t r = 0; r < merges_.size(); ++r) {
    const Merge& m = merges_[r];
    LM_CHECK(
        m.left >= 0 && m.left <= max_id && defined[m.left] && m.right >= 0 && m.right <= max_id && defined[m.right],
        "BPE: merge " << r << " (" << m.left << ", " << m.right
                      << ") uses an id that no byte or earlier merge defines");
    // A chain of merges doubles a token's length each time: bounded, per token and in all.
    const size_t len = bytes[m.left].size() + bytes[m.right].size();
    total_bytes += len;
    LM_CHECK(len <= kMaxTokenBytes && total_bytes <= kMaxTotalBytes,
             "BPE: merge " << r << " makes a token of " << len << " bytes (" << total_bytes
                           << " in all so far); the limits are " << kMaxTokenBytes << " per token and "
                           << kMaxTotalBytes << " in all");
    define(m.result, bytes[m.left] + bytes[m.right], "a merge result");
    // A pair listed twice keeps its first (lowest) rank, as GPT-2's loader does.
    rank_of_.emplace(pair_key(m.left, m.right), static_cast<int32_t>(r));
  }
  for (size_t id = 0; id < bytes.size(); ++id)
    LM_CHECK(defined[id], "BPE: the ids must be contiguous, but id " << id << " (of 0.." << max_id
                                                                     << ") is neither a byte nor a merge result");
  token_bytes_ = std::move(bytes);
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  LM_CHECK(id >= 0 && id < base_vocab_size(),
           "BPE: token_bytes: id " << id << " outside [0, " << base_vocab_size() << ")");
  return token_bytes_[static_cast<size_t>(id)];
}

void BpeTokenizer::append_base_token(int32_t id, std::string& out) const { out += token_bytes_[id]; }

std::vector<int32_t> BpeTokenizer::encode_chunk(const std::string& chunk) const {
  std::vector<int32_t> ids(chunk.size());
  for (size_t i = 0; i < chunk.size(); ++i) ids[i] = byte_ids_[static_cast<unsigned char>(chunk[i])];
  if (ids.size() > kLongChunk) return merge_long_chunk(std::move(ids));
  // A word: apply the lowest-ranked merge among its adjacent pairs, everywhere, until none applies.
  while (ids.size() >= 2) {
    int32_t best = -1;  // lowest rank among adjacent pairs
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = rank_of_.find(pair_key(ids[i], ids[i + 1]));
      if (it != rank_of_.end() && (best < 0 || it->second < best)) best = it->second;
    }
    if (best < 0) break;
    const Merge& m = merges_[static_cast<size_t>(best)];
    merge_pair(ids, m.left, m.right, m.result);
  }
  return ids;
}

// The same merges in the same order for a chunk too long to rescan after every merge (one
// 300 KB "word" took minutes): the tokens form a linked list, and a heap holds (rank, position)
// of every adjacent pair that has a merge. Popping the lowest rank, leftmost first, is the order
// above: a merge of rank r creates only pairs holding its result, whose merges have ranks above
// r (a merge may only use ids defined by earlier ones), so no lower rank ever appears later.
// An entry whose pair has changed since it was pushed is skipped. O(n log n) for n bytes.
std::vector<int32_t> BpeTokenizer::merge_long_chunk(std::vector<int32_t> ids) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<int64_t> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
  using Entry = std::pair<int32_t, int64_t>;  // (rank, position of the pair's left token)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto rank_at = [&](int64_t i) -> int32_t {
    if (i < 0 || next[i] < 0) return -1;
    auto it = rank_of_.find(pair_key(ids[i], ids[next[i]]));
    return it == rank_of_.end() ? -1 : it->second;
  };
  auto push = [&](int64_t i) {
    const int32_t r = rank_at(i);
    if (r >= 0) heap.push({r, i});
  };
  for (int64_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<char> alive(static_cast<size_t>(n), 1);
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    if (!alive[i] || rank_at(i) != r) continue;  // stale
    const int64_t j = next[i];                   // merge i and j into i
    ids[i] = merges_[static_cast<size_t>(r)].result;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  std::vector<int32_t> out;
  for (int64_t i = 0; i >= 0 && i < n; i = next[i]) out.push_back(ids[i]);
  return out;
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  std::unordered_map<std::string, std::vector<int32_t>> cache;  // words repeat a lot in prose
  for (const auto& [begin, end] : pretokenize(text)) {
    std::string chunk = text.substr(begin, end - begin);
    auto it = cache.find(chunk);
    if (it == cache.end()) it = cache.emplace(chunk, encode_chunk(chunk)).first;
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

void BpeTokenizer::base_to_json(nlohmann::json& j) const {
  j["byte_ids"] = byte_ids_;
  nlohmann::json merges = nlohmann::json::array();
  for (const Merge& m : merges_) merges.push_back({m.left, m.right, m.result});
  j["merges"] = std::move(merges);
}

// ---- training ----
//
// The corpus is reduced to its unique words with counts. pair_count holds, for every adjacent
// pair, the number of times it occurs in the corpus; where lists the words that (may) contain
// it. A merge only touches the words listed for its pair: each one's pairs are subtracted,
// the word is merged, its new pairs added. A max-heap with lazy deletion finds the next best
// pair: stale entries (whose count changed since they were pushed) are skipped when popped.

namespace {

// A unique word of the corpus: its ids as merged so far, and how often it occurs.
struct Word {
  std::vector<int32_t> ids;
  int64_t count;
};

// The corpus's unique words as bytes, sorted so that word indices (and everything after) do not
// depend on hashing.
std::vector<Word> unique_words(const std::string& text) {
  std::unordered_map<std::string, int64_t> word_counts;
  for (const auto& [begin, end] : pretokenize(text)) ++word_counts[text.substr(begin, end - begin)];
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts.begin(), word_counts.end());
  word_counts.clear();
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [w, c] : sorted) {
    Word word{std::vector<int32_t>(w.size()), c};
    for (size_t i = 0; i < w.size(); ++i) word.ids[i] = static_cast<unsigned char>(w[i]);
    words.push_back(std::move(word));
  }
  return words;
}

// Replaces every non-overlapping (m.left, m.right) of `ids`, scanning left to right, by m.result,
// as merge_pair does, and remembers where: `sites` holds the old index of each merged pair and the
// new index of its result.
std::vector<int32_t> merge_with_sites(const std::vector<int32_t>& ids, const BpeTokenizer::Merge& m,
                                      std::vector<std::pair<size_t, size_t>>& sites) {
  std::vector<int32_t> merged;
  merged.reserve(ids.size());
  for (size_t i = 0; i < ids.size();) {
    if (i + 1 < ids.size() && ids[i] == m.left && ids[i + 1] == m.right) {
      sites.emplace_back(i, merged.size());
      merged.push_back(m.result);
      i += 2;
    } else {
      merged.push_back(ids[i++]);
    }
  }
  return merged;
}

// The words, the count of every mergeable adjacent pair, the words that (may) hold each pair, and
// the heap that finds the best pair; merge() keeps them up to date.
class PairCounts {
 public:
  std::vector<int64_t> token_len = std::vector<int64_t>(256, 1);  // bytes per id, merges included as they are made

  PairCounts(std::vector<Word> words, bool split_digits) : words_(std::move(words)), split_digits_(split_digits) {
    for (size_t w = 0; w < words_.size(); ++w)
      for (size_t i = 0; i + 1 < words_[w].ids.size(); ++i) {
        if (!mergeable(words_[w].ids[i], words_[w].ids[i + 1])) continue;
        uint64_t key = pair_key(words_[w].ids[i], words_[w].ids[i + 1]);
        pair_count_[key] += words_[w].count;
        std::vector<int32_t>& list = where_[key];
        if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
      }
    for (const auto& [key, c] : pair_count_) heap_.push({c, key});
  }

  // Takes the most frequent pair off the heap into *best; false when no pair occurs twice.
  bool pop_best(uint64_t* best) {
    while (!heap_.empty()) {
      auto it = pair_count_.find(heap_.top().second);
      if (it != pair_count_.end() && it->second == heap_.top().first) break;
      heap_.pop();  // stale
    }
    if (heap_.empty() || heap_.top().first < 2) return false;  // no pair occurs twice: nothing to learn
    *best = heap_.top().second;
    heap_.pop();
    return true;
  }

  // Applies merge m of pair `key` to every word listed for it, then moves the counts of the pairs
  // that changed (and pushes their new counts on the heap).
  void merge(const BpeTokenizer::Merge& m, uint64_t key) {
    std::vector<int32_t> affected = std::move(where_[key]);
    where_.erase(key);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    delta_.clear();
    for (int32_t w : affected) {
      Word& word = words_[static_cast<size_t>(w)];
      std::vector<std::pair<size_t, size_t>> sites;
      std::vector<int32_t> merged = merge_with_sites(word.ids, m, sites);
      if (sites.empty()) continue;  // a stale listing
      count_around_sites(word.ids, sites, true, w, m.result);
      count_around_sites(merged, sites, false, w, m.result);
      word.ids = std::move(merged);
    }
    for (const auto& [k, d] : delta_) {
      if (d == 0) continue;
      int64_t& c = pair_count_[k];
      c += d;
      if (c <= 0)
        pair_count_.erase(k);
      else
        heap_.push({c, k});
    }
  }

 private:
  // With split_digits, a pair that holds a digit byte is never counted, so it never becomes a
  // merge: digits stay single-byte tokens for good (a merge result never holds a digit, so
  // checking the two ids against the digit bytes is enough). Nor is a pair whose token would be
  // longer than kMaxTokenBytes (a run of one byte doubles its longest token with every merge),
  // so training never makes a tokenizer that loading would refuse.
  bool mergeable(int32_t left, int32_t right) const {
    auto digit = [](int32_t id) { return id >= '0' && id <= '9'; };
    return (!split_digits_ || (!digit(left) && !digit(right))) &&
           token_len[static_cast<size_t>(left)] + token_len[static_cast<size_t>(right)] <=
               int64_t(BpeTokenizer::kMaxTokenBytes);
  }

  // Only the pairs touching a merge change: the old pairs at j-1, j, j+1 around each site j
  // leave (old_side), the new pairs at k-1 and k around each result k arrive; every other pair is
  // the same pair before and after. So the work is proportional to the merges made, not to the
  // word's length (one 300 KB word once cost a full recount per merge: minutes).
  void count_around_sites(const std::vector<int32_t>& ids, const std::vector<std::pair<size_t, size_t>>& sites,
                          bool old_side, int32_t w, int32_t result) {
    const int64_t count = words_[static_cast<size_t>(w)].count;
    size_t next = 0;  // pair indices below this were counted already (sites overlap)
    for (const auto& [at_old, at_new] : sites) {
      const size_t at = old_side ? at_old : at_new, last = old_side ? at + 1 : at;
      for (size_t j = at > 0 ? at - 1 : 0; j <= last; ++j) {
        if (j < next || j + 1 >= ids.size()) continue;
        next = j + 1;
        if (!mergeable(ids[j], ids[j + 1])) continue;
        const uint64_t key = pair_key(ids[j], ids[j + 1]);
        delta_[key] += old_side ? -count : count;
        if (!old_side && (ids[j] == result || ids[j + 1] == result)) {
          std::vector<int32_t>& list = where_[key];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
    }
  }

  // Heap order: higher count first; equal counts -> smaller key (left id, then right id) first.
  using Entry = std::pair<int64_t, uint64_t>;
  struct Worse {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    }
  };

  std::vector<Word> words_;
  bool split_digits_;
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<Entry, std::vector<Entry>, Worse> heap_;
  std::unordered_map<uint64_t, int64_t> delta_;  // merge(): the change of each pair's count
};

}  // namespace

BpeTokenizer BpeTokenizer::train(const std::string& text, int64_t vocab_size,
                                 const std::function<void(int64_t, int64_t)>& progress, bool split_digits) {
  LM_CHECK(vocab_size >= 256, "BPE train: vocab_size must be at least 256 (the bytes), got " << vocab_size);
  LM_CHECK(vocab_size <= (1 << 30), "BPE train: vocab_size " << vocab_size << " is implausibly large");
  const int64_t wanted = vocab_size - 256;
  PairCounts pairs(unique_words(text), split_digits);

  std::vector<int32_t> byte_ids(256);
  for (int b = 0; b < 256; ++b) byte_ids[b] = b;
  std::vector<Merge> merges;
  merges.reserve(static_cast<size_t>(wanted));
  int64_t total_bytes = 256;
  uint64_t best = 0;
  while (static_cast<int64_t>(merges.size()) < wanted && pairs.pop_best(&best)) {
    const Merge m{key_left(best), key_right(best), static_cast<int32_t>(256 + merges.size())};
    const int64_t len = pairs.token_len[static_cast<size_t>(m.left)] + pairs.token_len[static_cast<size_t>(m.right)];
    if (total_bytes + len > int64_t(kMaxTotalBytes)) break;  // the vocabulary's bytes in all: see the constructor
    total_bytes += len;
    pairs.token_len.push_back(len);
    merges.push_back(m);
    pairs.merge(m, best);
    if (progress && merges.size() % 256 == 0) progress(static_cast<int64_t>(merges.size()), wanted);
  }
  if (progress) progress(static_cast<int64_t>(merges.size()), wanted);
  return BpeTokenizer(std::move(byte_ids), std::move(merges));
}

// ---- GPT-2 files ----

namespace {
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string read_whole_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in, "load_gpt2: cannot open " << what << " " << path << " (missing file?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::vector<std::string> gpt2_byte_to_unicode() {
  std::vector<std::string> map(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    append_utf8(map[b], printable ? b : next++);
  }
  return map;
}

BpeTokenizer BpeTokenizer::load_gpt2(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_whole_file(encoder_json_path, "encoder.json"));
  } catch (const nlohmann::json::exception& e) {
    LM_FAIL("load_gpt2: " << encoder_json_path << " is not valid JSON (" << e.what() << ")");
  }
  LM_CHECK(encoder.is_object() && !encoder.empty(),
           "load_gpt2: " << encoder_json_path << " must be a JSON object mapping token strings to ids");
  std::map<std::string, int32_t> id_of;
  for (const auto& [token, id] : encoder.items()) {
    LM_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 30),
             "load_gpt2: " << encoder_json_path << ": the id of \"" << token
                           << "\" must be a "
                              "non-negative integer, got "
                           << id.dump());
    id_of[token] = id.get<int32_t>();
  }
  auto lookup = [&](const std::string& token, const std::string& where) {
    auto it = id_of.find(token);
    LM_CHECK(it != id_of.end(), "load_gpt2: \"" << token << "\" (" << where << ") is not in " << encoder_json_path);
    return it->second;
  };

  const std::vector<std::string> byte_chars = gpt2_byte_to_unicode();
  std::vector<int32_t> byte_ids(256);
  for (int b = 0; b < 256; ++b) byte_ids[b] = lookup(byte_chars[b], "byte " + std::to_string(b));

  std::vector<Merge> merges;
  std::istringstream lines(read_whole_file(vocab_bpe_path, "vocab.bpe"));
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    size_t space = line.find(' ');
    LM_CHECK(
        space != std::string::npos && space > 0 && space + 1 < line.size() &&
            line.find(' ', space + 1) == std::string::npos,
        "load_gpt2: " << vocab_bpe_path << " line " << line_no << ": expected \"left right\", got \"" << line << "\"");
    const std::string left = line.substr(0, space), right = line.substr(space + 1);
    const std::string where = vocab_bpe_path + " line " + std::to_string(line_no);
    merges.push_back({lookup(left, where), lookup(right, where), lookup(left + right, where)});
  }

  BpeTokenizer tok(std::move(byte_ids), std::move(merges));
  // What is left (GPT-2: only <|endoftext|>) must sit right after the base ids: specials.
  std::vector<std::pair<int32_t, std::string>> rest;
  for (const auto& [token, id] : id_of)
    if (id >= tok.base_vocab_size()) rest.emplace_back(id, token);
  std::sort(rest.begin(), rest.end());
  for (const auto& [id, token] : rest) {
    LM_CHECK(id == tok.vocab_size(), "load_gpt2: " << encoder_json_path << ": \"" << token << "\" has id " << id
                                                   << " but the next free id after the " << tok.base_vocab_size()
                                                   << " byte and merge "
                                                      "tokens (and earlier specials) is "
                                                   << tok.vocab_size());
    tok.add_special(token);
  }
  LM_CHECK(tok.vocab_size() == static_cast<int64_t>(id_of.size()),
           "load_gpt2: " << encoder_json_path << " maps several strings to the same id (" << id_of.size()
                         << " entries, " << tok.vocab_size() << " distinct ids)");
  return tok;
}

}  // namespace lm
