// config.h: the knobs of cached chunked inference (Section 3.2): chunk length, how many blocks to
// retrieve (k), how many to keep (capacity), who shares a retrieval (granularity), how retrieved
// blocks are positioned (stingy or exact), where block K/V live (RAM or a file on disk), and
// the cutoff of the context-miss token. Their names and checks: config.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "landmark/retrieval.h"

namespace lm {

enum class PositionMode { Stingy, Exact };
PositionMode parse_position_mode(const std::string& s);  // "stingy" | "exact"
const char* position_mode_name(PositionMode m);

// How the top k of the landmark scores is found. Scan (the default): every query scores every
// cached landmark key. Bounded: tiles of landmark keys with per-feature bounds, a tile skipped
// when its bound cannot win (landmark/key_index.h); exact, the same blocks as Scan. It serves
// the CPU with token-head granularity; CUDA and the shared granularities (token, head, whose
// softmax needs every score) always scan. It saves work only when the k best stand clear of the
// rest: on a pass-key prompt the k-th best score is a near-tie among filler blocks, which an exact
// search must score one by one (docs/infer.md, "Searching the landmark keys without scoring them
// all"; measured in docs/results/inference.md#topk-bench). Approx: the same tiles, but per query
// only the InferConfig::search_tiles tiles of highest bound are scored, whatever the scores, so
// its cost stays small where Bounded scores every tile; not exact (a winner in a tile of lower
// bound is missed), though each query knows whether its answer is proven (RetrievalRecord::budget_cut).
enum class KeySearch { Bounded, Scan, Approx };
KeySearch parse_key_search(const std::string& s);  // "bounded" | "scan" | "approx"
const char* key_search_name(KeySearch s);

struct InferConfig {
  int64_t chunk_len = 250;  // raw tokens fed per step (the local context)
  int64_t k = 4;            // blocks retrieved per query (clamped to the blocks cached)
  int64_t capacity = 0;     // keep only the newest S blocks (0: all)
  Granularity granularity = Granularity::TokenHead;
  PositionMode positions = PositionMode::Stingy;
  std::string block_dir;               // non-empty: block K/V in files in this directory (slow memory, block_store.h)
  bool kv_f16 = false;                 // store block K/V as f16 (half the bytes; read back as f32)
  bool blocks_on_device = false;       // a CUDA session: block K/V stay in GPU memory (no offload to the host)
  double cmt_cutoff = 0;               // models with a context-miss token: S(CMT) below this is set to 0
                                       // for the gating of retrieved blocks (Appendix D); in [0, 1]
  KeySearch search = KeySearch::Scan;  // how the top k is found (Scan and Bounded exact)
  int64_t search_tiles = 16;           // KeySearch::Approx: tiles of 64 landmark keys scored per query, at most
  int64_t standard_local = 0;          // eval of a standard model: each window read in independent pieces of
                                       // this many tokens, no memory between them (Table 1's baseline row
                                       // at l_local 360); 0: the whole window at once
  void validate() const;
};

}  // namespace lm
