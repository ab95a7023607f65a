// Beyond the paper: the paper scores every cached landmark key; this bounded and approximate search is ours.
// key_index.h: exact top-k retrieval that does not score every landmark (issue 12, after Quest,
// Tang et al. 2024). One head's cached landmark keys, already rotated where retrieval scores
// them, are kept in tiles of S consecutive blocks; each tile also keeps, per feature d, the
// smallest and largest value any of its keys has there. For a query q no key of the tile can
// score above the tile's bound
//     sum over d of max(q_d * min_d, q_d * max_d)  =  q+ . max  +  q- . min
// (q+ and q- the positive and negative parts of q). top_k visits tiles from the highest bound
// down and stops at the first tile whose bound is below the k-th best score found so far: every
// tile after it is skipped, and the answer is still exactly the k best keys. Keys of similar text
// have similar landmark keys, so a tile of filler has a tight bound: when the k best blocks stand
// clear of the filler, one query scores only their tiles out of thousands. When the k-th best score is
// a near-tie among filler blocks (a pass-key prompt with k 4 and one key block), every tile's
// bound reaches it and all are scored: exactness costs that (tests/test_key_index.cpp).
//
// Exact means: the same blocks, ties included, as scoring every key with scan_scores and taking
// the k best (ties to the older block, landmark/retrieval.h). Both score a key with the same
// arithmetic (cpu::vec_times_rows over the tile, then the scale), so they agree bit for bit; the
// bound is compared with a margin that covers its own rounding and the rounding of a score (see
// key_index.cpp), so rounding never skips a tile that holds a winner.
//
// Approximate, on request (approx_top_k): score only a fixed number of tiles, those of highest
// bound. Its cost no longer grows with the near-ties that make the exact walk visit every tile:
// a bound per tile and query (two GEMMs over a chunk's queries: 2 values per feature against 64
// keys' worth to score the tile) and the chosen tiles scored. What it can miss is a winner whose
// tile's bound ranks below the budget; bench_topk measures the recall, and every query says
// whether its answer is proven exact. docs/landmark.md section 10.
//
// Blocks are numbered from the oldest held (0) as the cache numbers them; drop_oldest forgets the
// oldest ones (a cache at its capacity). Memory: each key once (rotated, in the tiles; a caller
// that needs it at another position rotates it on from there, infer/layer_cache.h), plus two
// bound vectors per tile: about (1 + 2 / S) * HS values per block.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lm {

// What a search did, summed over calls (for benchmarks and the tests' check that tiles were
// skipped): keys scored exactly, tiles whose bound was computed, tiles visited, and queries whose
// answer the approximate search could not prove exact (approx_top_k).
struct KeySearchStats {
  int64_t queries = 0, keys_scored = 0, tiles_bounded = 0, tiles_visited = 0, budget_stops = 0;
};

template <class Scalar>
class LandmarkKeyIndex {
 public:
  static constexpr int64_t kDefaultTile = 64;
  explicit LandmarkKeyIndex(int64_t HS, int64_t tile = kDefaultTile);

  int64_t size() const { return end_ - first_; }  // blocks held
  int64_t head_size() const { return HS_; }
  int64_t tile() const { return S_; }

  // Adds the newest block: `rotated` is its landmark key as retrieval scores it (HS values).
  void append(const Scalar* rotated);
  // Forgets the `count` oldest blocks (0 <= count <= size()).
  void drop_oldest(int64_t count);
  // The key of block b (0 = oldest held) as appended, read in place: feature d at
  // key[d * *stride] (the tiles keep keys transposed).
  const Scalar* rotated_key(int64_t b, int64_t* stride) const;

  // scale * q . key for the oldest `count` blocks (count <= size()), into out[0..count).
  void scan_scores(const Scalar* q, Scalar scale, int64_t count, Scalar* out) const;

  // The min(k, count + extra.size()) best blocks among the oldest `count` (scored as scan_scores
  // does) and the `extra` candidates (block index, score: blocks the caller scored another way,
  // e.g. the newest ones at their stingy slots; their indices must be >= count). Ties go to the
  // smaller index. Returned in ascending order.
  std::vector<int32_t> top_k(const Scalar* q, Scalar scale, int64_t count, int64_t k,
                             const std::vector<std::pair<int32_t, Scalar>>& extra,
                             KeySearchStats* stats = nullptr) const;

  // The approximate search, for n queries at once (rows of Q, n x HS): every tile's bound for
  // every query by two GEMMs (Q+ times the tiles' maxima, Q- times their minima), then per query
  // the `tiles` tiles of highest bound scored exactly (as scan_scores does), the extras added,
  // and the best min(k, ...) of those returned in out[i], ascending. A winner in a tile of lower
  // bound is missed. A query's answer is proven exact when its k-th best score beats the highest
  // bound among the tiles it did not score (with the margin top_k uses); `stats->budget_stops`
  // counts the queries where it is not. extras: nullptr or n lists (as top_k's `extra`).
  void approx_top_k(const Scalar* Q, int64_t n, Scalar scale, int64_t count, int64_t k, int64_t tiles,
                    const std::vector<std::pair<int32_t, Scalar>>* extras, std::vector<int32_t>* out,
                    KeySearchStats* stats = nullptr) const;

 private:
  int64_t HS_, S_;
  int64_t base_ = 0;   // absolute number of the first block in tiles_ (a multiple of S_)
  int64_t first_ = 0;  // absolute number of the oldest block held
  int64_t end_ = 0;    // absolute number one past the newest block
  // Tile j (blocks base_ + j*S .. base_ + (j+1)*S - 1): rotated keys transposed, (HS, S), then
  // the per-feature min and max of those present.
  std::vector<Scalar> tiles_, mins_, maxs_;
  std::vector<Scalar> absmax_;  // per feature, the largest |value| of any key ever appended (for the margin)
};

}  // namespace lm
