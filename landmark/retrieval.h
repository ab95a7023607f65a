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
template <class T>
std::vector<std::vector<int32_t>> select_blocks(const T* scores, int64_t NH, int64_t n, int64_t nb, int64_t k,
                                                Granularity g);

// Stingy position mapping with k retrieved blocks out of n cached ones (chronological 0..n-1).
// The k + 1 block slots s = 0..k before the current context each span F + 1 positions. The k
// most recent cached blocks keep their true relative slots (the newest is slot k); older blocks
// are scored as if in slot 0. Returns the scoring slot of every cached block.
std::vector<int32_t> stingy_score_slots(int64_t n, int64_t k);
// The same for one block b (0 = oldest): k - age for the k newest (age 0 = newest), else 0.
inline int64_t stingy_score_slot(int64_t b, int64_t n, int64_t k) {
  const int64_t age = n - 1 - b;
  return age < k ? k - age : 0;
}
// After selection (`chosen`: ascending cached indices): recent blocks keep their slots; the older
// ones take the lowest free slots, in chronological order. Returns one slot per chosen block.
std::vector<int32_t> stingy_attention_slots(const std::vector<int32_t>& chosen, int64_t n, int64_t k);

}  // namespace lm
