// retrieval.h: the pure math of retrieval at inference (Section 3.2): choosing the top-k cached
// blocks from landmark scores at three granularities, and the "stingy" position mapping of
// Section 3.2.1. No cache, no model: infer/ owns those and calls these functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lm {

// Who shares a set of retrieved blocks:
//   TokenHead: every (token, head) picks its own k blocks (the paper's default, as in training);
//   Token:     one set per token, shared by its heads: max over heads of the per-head softmax
//              over landmarks, then top-k;
//   Head:      one set per head, shared by the chunk's tokens: max over tokens, then top-k.
enum class Granularity { TokenHead, Token, Head };
Granularity parse_granularity(const std::string& s);  // "token-head" | "token" | "head"
const char* granularity_name(Granularity g);

// scores: (NH, n, nb) row-major landmark scores (query . landmark key / sqrt(HS)) of n queries
// against nb cached blocks. Returns (NH * n) lists, entry h * n + i = the chosen block indices of
// (head h, query i), k' = min(k, nb) of them, in chronological (ascending) order. Ties go to the
// older block, so the choice is deterministic.
template <class Scalar>
std::vector<std::vector<int32_t>> select_blocks(const Scalar* scores, int64_t NH, int64_t n, int64_t nb, int64_t k,
                                                Granularity g);

// The top k of a row of scores fed in pieces, front to back: what select_blocks' token-head
// selection does to a whole row, for a caller that computes the row a piece at a time and never
// holds all of it (infer/retrieval_plan.cpp scores a million-token cache in pieces that stay in
// cache). push(v, first, len) takes scores v[0..len) of blocks first..first+len-1; pieces must
// come in order. take() returns the chosen block indices in ascending order. Ties go to the older
// block; a NaN never enters once k are held. Same answer as select_blocks, piece sizes whatever.
template <class Scalar>
class TopKStream {
 public:
  explicit TopKStream(int64_t k) : k_(k) { best_.reserve(static_cast<size_t>(k) + 1); }
  void push(const Scalar* v, int64_t first, int64_t len);
  std::vector<int32_t> take() const;
  // What is held, best first: (block index, value).
  std::vector<std::pair<int32_t, Scalar>> entries() const;

 private:
  struct Entry {
    Scalar value;
    int32_t index;
  };
  void insert(Scalar value, int64_t index);  // into best_, keeping k and worst_
  int64_t k_;
  std::vector<Entry> best_;   // best first
  Scalar worst_ = Scalar(0);  // best_.back().value once k are held
};

// `count` empty streams keeping k each, every one built (and its room for k + 1 reserved) in
// place: a vector filled with copies of one stream would copy its size but not that room, and each
// copy would then grow one entry at a time (1.5 million reallocations in a 32k-token prompt).
template <class Scalar>
std::vector<TopKStream<Scalar>> top_k_streams(int64_t count, int64_t k) {
  std::vector<TopKStream<Scalar>> streams;
  streams.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) streams.emplace_back(k);
  return streams;
}

// Stingy position mapping (Section 3.2.1, Fig. 2) with k retrieved blocks out of n cached ones
// (chronological 0..n-1). The k + 1 block slots s = 0..k before the current context each span
// F + 1 positions.
// Scoring: the k most recent cached blocks score their landmark at their true relative slot (the
// newest in slot k, the one before in k - 1, ...); every older block scores at slot 0. Returns
// the scoring slot of every cached block.
std::vector<int32_t> stingy_score_slots(int64_t n, int64_t k);
// The same for one block b (0 = oldest): k - age for the k newest (age 0 = newest), else 0.
inline int64_t stingy_score_slot(int64_t b, int64_t n, int64_t k) {
  const int64_t age = n - 1 - b;
  return age < k ? k - age : 0;
}
// Placement, once the blocks are chosen (`chosen`: ascending cached indices, at most k of them).
// The order of the blocks is kept: with k' = min(k, n) blocks retrieved, the j-th chosen block
// goes to slot j + (1 + k - k' if it is one of the k most recent blocks, else 0). Older blocks
// fill slots 0, 1, ... from the left; recent ones sit right of one empty slot. So an older block
// never sits right of a newer one, and choosing exactly the k most recent blocks puts them on
// their true slots (1..k, or k-n+1..k when fewer than k are cached). Example: 10 cached blocks,
// k 3, chosen {0, 1, 7}: slots 0, 1, 3. Returns one slot per chosen block.
std::vector<int32_t> stingy_attention_slots(const std::vector<int32_t>& chosen, int64_t n, int64_t k);

}  // namespace lm
