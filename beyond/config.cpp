// config.cpp: the extensions' checks (config.h).
#include "beyond/config.h"

#include "tensor/check.h"

namespace lm {

void BeyondConfig::validate() const {
  InferConfig::validate();
  LM_CHECK(!certify || positions == PositionMode::Exact,
           "inference: --certify needs --positions exact (stingy positions score a block's landmark at one slot and "
           "attend it at another, so the left-out weight is not that of any row the model reads)");
  LM_CHECK(left_out <= 1, "inference: --left-out must be at most 1 (a weight), got " << left_out);
  LM_CHECK(left_out < 0 ||
               (positions == PositionMode::Exact && search == KeySearch::Scan && granularity == Granularity::TokenHead),
           "inference: --left-out needs --positions exact, --search scan and --granularity token-head (its "
           "left-out weight is that of the exact scan's scores, per row)");
  const bool summaries = scorer != BlockScorer::Landmark || mass_recall;
  LM_CHECK(scorer == BlockScorer::Landmark || search == KeySearch::Scan,
           "inference: --scorer " << block_scorer_name(scorer)
                                  << " scores every block (--search scan); the bounded and approximate searches "
                                     "serve landmark keys only");
  LM_CHECK(!summaries || !blocks_on_device,
           "inference: --scorer " << block_scorer_name(scorer) << " and --mass-recall keep their summaries on the host "
                                  << "(no --blocks-on-device)");
  LM_CHECK(scorer == BlockScorer::Landmark || (!certify && left_out < 0),
           "inference: --certify and --left-out reason about the landmark gates of the landmark scorer, not --scorer "
               << block_scorer_name(scorer));
  LM_CHECK(reps >= 1, "inference: --reps must be at least 1, got " << reps);
}

}  // namespace lm
