// block_scorers.h: beyond the paper. How a cached block is summarised for retrieval, and how a
// query scores the summary. The paper scores a block by its landmark key, which training taught
// to stand for the block (BeyondConfig::scorer = Landmark; retrieval_plan.h). The training-free
// scorers here summarise the block's own keys instead, so they also serve a standard model read
// in blocks (standard_blocks.h):
//   Mean    q . mean of the block's F keys                        (MoBA's block score)
//   Quest   sum over features d of max(q_d min_d, q_d max_d)      (Quest's upper bound on q . k)
//   Reps    max over the block's r representative keys of q . k   (InfLLM; the representatives are
//           the r tokens that received the most attention from the block's own tokens, on average
//           over the queries that see them)
//   Oracle  log of sum over the block's keys of exp(q . k)        (the block's attention mass up to
//           the row's normaliser: the top k by this are the top k by full-attention mass)
// Every score is scaled by 1/sqrt(HS) like an attention score. The keys are rotated at the
// positions retrieval scores landmark keys at (the block in slot 0 with stingy positions, its
// true place with exact ones), so a query sees them as it sees a landmark key; unlike the landmark
// scorer, the k newest blocks are not rescored at their stingy slots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/hooks.h"
#include "tensor/dtype.h"

namespace lm {

enum class BlockScorer { Landmark, Mean, Quest, Reps, Oracle };
BlockScorer parse_block_scorer(const std::string& s);  // "landmark" | "mean" | "quest" | "reps" | "oracle"
const char* block_scorer_name(BlockScorer s);

// The oracle keeps every key of every block in fast memory and scores all of them: dense, so it
// is refused past this many tokens (BeyondConfig::scorer).
constexpr int64_t kOracleMaxTokens = 32768;

// Per head, the summary rows of every cached block, oldest block first, each row HS values:
//   Mean 1 row, Quest 2 (the per-feature max, then min), Reps r, Oracle F (the keys themselves).
// With keep_keys (mass recall against the oracle, BeyondConfig::mass_recall) the F keys are kept
// too, beside another scorer's rows. Values in the cache's dtype (F32 or F64), on the host.
class BlockSummaries {
 public:
  BlockSummaries(BlockScorer scorer, int64_t NH, int64_t F, int64_t HS, int64_t reps, bool keep_keys, DType dtype);
  // Rows per block of `s` (the oracle's: F).
  int64_t rows_per_block(BlockScorer s) const;
  int64_t blocks() const { return nb_; }
  // One finished block: keys (NH, F, HS) rotated at their scoring positions, row-major; with Reps,
  // queries (NH, F, HS) rotated at the same positions (the representatives' choice reads them).
  template <class Scalar>
  void append(const Scalar* keys, const Scalar* queries);
  void drop_oldest(int64_t count);
  // The bytes one block's summary takes in all heads (this layer): what the scorer keeps to score
  // a block, beside the landmark key's NH HS values (the paper's figure). Keys kept only for mass
  // recall are not counted.
  int64_t bytes_per_block() const;
  // Head h's rows of scorer s (Oracle: the kept keys), (blocks * rows_per_block(s), HS) row-major.
  template <class Scalar>
  const Scalar* rows(BlockScorer s, int64_t h) const;
  // Head h's representatives' token indices in each block (Reps), blocks * r of them.
  const std::vector<int32_t>& rep_tokens(int64_t h) const { return reps_at_[static_cast<size_t>(h)]; }
  BlockScorer scorer;
  int64_t NH, F, HS, reps;
  bool keep_keys;
  DType dtype;

 private:
  template <class Scalar>
  std::vector<std::vector<Scalar>>& store(bool keys);
  template <class Scalar>
  const std::vector<std::vector<Scalar>>& store(bool keys) const;
  // Rows of the scorer's own summary per block (0 for Oracle, whose rows are the kept keys, and
  // for Landmark, which keeps only the keys, for mass recall).
  int64_t own_rows() const {
    return scorer == BlockScorer::Oracle || scorer == BlockScorer::Landmark ? 0 : rows_per_block(scorer);
  }
  int64_t nb_ = 0;
  std::vector<std::vector<float>> rows_f32_, keys_f32_;  // per head
  std::vector<std::vector<double>> rows_f64_, keys_f64_;
  std::vector<std::vector<int32_t>> reps_at_;
};

class RotaryCache;
class Tensor;

// Appends to `sum` the block of F tokens starting at local index `begin` of a layer's un-rotated
// keys k_loc (NH, L, HS; and queries q_loc, needed with Reps), rotated at positions pos0 ..
// pos0 + F - 1 (its scoring positions). Host tensors of the summaries' dtype.
void summarise_block(BlockSummaries& sum, const Tensor& k_loc, const Tensor* q_loc, int64_t begin, int64_t pos0,
                     RotaryCache& rope);

// The r representatives of one block for one head: the tokens j with the largest mean over
// i >= j of softmax_i(q_i . k_j * scale, over j' <= i), i.e. the attention each token received from
// the block's own (causal) queries that see it; q and k (F, HS) row-major, rotated at the same
// positions. Ties to the earlier token; returned ascending.
template <class Scalar>
std::vector<int32_t> representatives(const Scalar* q, const Scalar* k, int64_t F, int64_t HS, double scale, int64_t r);

// Scores (n, nb) of head h's n rotated queries q (n, HS) against every block held, under scorer s
// (not Landmark), each scaled by `scale`: one GEMM against the rows (two for Quest: the positive
// and the negative parts of q), then the per-block max (Reps) or log-sum-exp (Oracle). Returns the
// summary rows scored per query (nb * rows_per_block(s)).
template <class Scalar>
int64_t score_blocks(const BlockSummaries& sum, BlockScorer s, int64_t h, const Scalar* q, int64_t n, double scale,
                     Scalar* out);

// score_blocks for every head of q_rot (NH, n, HS; host, contiguous), heads on parallel threads:
// (NH, n, nb) into out. Returns the summary rows scored over all rows.
template <class Scalar>
int64_t score_all_heads(const BlockSummaries& sum, BlockScorer s, const Scalar* q, int64_t NH, int64_t n, double scale,
                        std::vector<Scalar>& out);

// How well a row's chosen blocks agree with the oracle's: `lse` the row's oracle scores (nb), `sel`
// its chosen blocks. recall: the share of the cached blocks' attention mass the chosen blocks hold;
// iou: |sel and the oracle's top |sel|| / |their union|.
struct OracleAgreement {
  double recall_sum = 0, iou_sum = 0;
  int64_t rows = 0;
  void add(const OracleAgreement& o) {
    recall_sum += o.recall_sum;
    iou_sum += o.iou_sum;
    rows += o.rows;
  }
};
template <class Scalar>
void agree_with_oracle(const Scalar* lse, int64_t nb, const std::vector<int32_t>& sel, OracleAgreement* acc);
// Every row r = h * n + i of sel (the chosen blocks of q's rows) against the oracle (sum.keep_keys).
template <class Scalar>
OracleAgreement oracle_agreement(const BlockSummaries& sum, const Scalar* q, int64_t NH, int64_t n, double scale,
                                 const std::vector<std::vector<int32_t>>& sel);

// A training-free scorer as a layer's block scoring (infer/hooks.h): the summaries of its blocks,
// scored by score_all_heads. BeyondSession sets one per layer for BeyondConfig::scorer.
class SummaryScoring : public BlockScoring {
 public:
  SummaryScoring(BlockScorer s, int64_t NH, int64_t F, int64_t HS, int64_t reps, DType dtype)
      : sum_(s, NH, F, HS, reps, false, dtype) {}
  bool needs_queries() const override { return sum_.scorer == BlockScorer::Reps; }
  void add_block(const Tensor& k_loc, const Tensor* q_loc, int64_t begin, int64_t pos0, RotaryCache& rope) override {
    summarise_block(sum_, k_loc, q_loc, begin, pos0, rope);
  }
  void keep_newest(int64_t held) override { sum_.drop_oldest(sum_.blocks() - held); }
  int64_t blocks() const override { return sum_.blocks(); }
  int64_t score(const Tensor& q_rot, double scale, std::vector<float>& out) const override;
  int64_t score(const Tensor& q_rot, double scale, std::vector<double>& out) const override;
  int64_t bytes_per_block() const override { return sum_.bytes_per_block(); }

 private:
  BlockSummaries sum_;
};

}  // namespace lm
