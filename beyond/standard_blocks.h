// standard_blocks.h: beyond the paper. A standard model (trained without landmarks) read in
// blocks with a training-free block scorer (block_scorers.h), to ask whether landmark training is
// needed at all. Raw tokens go in, in chunks of chunk_len; every F = landmark_every tokens (the
// value the model's config records, 50 by default, as for its landmark twin) form a block. In
// every layer each (head, query) scores the cached blocks by the chosen scorer, keeps the top k
// and attends to [retrieved blocks | tail | chunk up to itself] with the ordinary softmax: there
// is no landmark to gate a block, so a retrieved token competes with the local ones directly.
//
// Where the retrieved blocks sit. A standard model has seen positions 0 .. block_size - 1 only,
// so everything it attends to must fit there. Stingy (the default): the k' chosen blocks keep
// their order and sit in the k slots of F positions just before the window, right-aligned (block
// c of k' at slot k - k' + c), and the window [tail | chunk] starts at k F; choosing exactly the
// newest blocks puts them where they are in the text. This is the landmark model's stingy rule
// without its empty slot, so the two kinds of model see retrieved text at the same distances, up
// to one block. Exact: every block and token at its true position (a reference: for the first
// block_size tokens only). Positions past the model's block_size are refused, not extrapolated.
//
// CPU only, f32 or f64; block K/V in RAM. No decode step or attention capture.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "beyond/block_scorers.h"
#include "beyond/config.h"
#include "infer/session.h"
#include "nn/gpt.h"

namespace lm {

// A ChunkReader (infer/session.h): BeyondSession reads a standard model with a scorer through it.
class StandardBlockSession : public ChunkReader {
 public:
  StandardBlockSession(const GPT& model, const BeyondConfig& cfg);
  ~StandardBlockSession() override;
  // One chunk of at most chunk_len raw tokens: their logits (n, V), row r predicting the token
  // after raw[r].
  Tensor feed_chunk(const std::vector<int32_t>& raw) override;
  int64_t cached_blocks() const override;
  int64_t tokens_fed() const override;
  const std::vector<RetrievalRecord>& retrieval_log() const override;
  void set_trace(RetrievalTrace* trace) override;    // with detail: scores and masses too (the explorer)
  int64_t summary_bytes_per_block() const override;  // every layer's summary of one block
  // With BeyondConfig::mass_recall: each record's agreement with the oracle, one per entry of
  // retrieval_log() (zero where nothing was cached), as mass_recall.h keeps them.
  const std::vector<OracleAgreement>& agreements() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lm
