// landmark_batch.cpp: sample_landmark_batch (landmark_batch.h).
#include "train/landmark_batch.h"

#include <vector>

#include "landmark/tokens.h"
#include "tensor/create.h"
#include "tensor/rng.h"

namespace lm {

LandmarkBatch sample_landmark_batch(const TokenFile& data, int64_t B, int64_t T, const LandmarkDataOptions& o,
                                    uint64_t seed, uint64_t cursor, bool training, const std::vector<int64_t>* starts) {
  LM_CHECK(B > 0 && T > 1, "sample_landmark_batch: need B > 0 and T > 1, got B=" << B << " T=" << T);
  LM_CHECK(o.every > 0, "sample_landmark_batch: landmark spacing F must be positive, got " << o.every);
  LM_CHECK(o.landmark_id >= 0 && o.landmark_id < data.vocab(), "sample_landmark_batch: landmark id "
                                                                   << o.landmark_id << " is not in the vocabulary of "
                                                                   << data.path() << " (size " << data.vocab() << ")");
  LM_CHECK(!o.context_miss || (o.cmt_id >= 0 && o.cmt_id < data.vocab()),
           "sample_landmark_batch: context-miss id " << o.cmt_id << " is not in the vocabulary");
  LM_CHECK(o.jump_max >= 1, "sample_landmark_batch: p_jump must be >= 1, got " << o.jump_max);
  LM_CHECK(o.cmt_prob >= 0 && o.cmt_prob <= 1, "sample_landmark_batch: P_CMT must be in [0, 1], got " << o.cmt_prob);
  const int64_t N = data.size();
  // A window of T augmented positions spans at most T raw tokens, plus up to two for the last target.
  const int64_t num_starts = N - T - 2;
  LM_CHECK(num_starts > 0, "sample_landmark_batch: " << data.path() << " has " << N
                                                     << " tokens, too few for windows of " << T << " (+2)");
  const AugmentedIndex aug{o.every};
  const int64_t first = o.context_miss ? 1 : 0;
  std::vector<int32_t> x(B * T), y(B * T), kinds(B * T), pos(B * T);
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t counter = cursor + static_cast<uint64_t>(b);
    const int64_t s = row_start(counter, seed, num_starts, starts);  // a raw token: never a landmark
    const int64_t a0 = aug.augmented_index(s);
    int32_t* xr = x.data() + b * T;
    int32_t* yr = y.data() + b * T;
    int32_t* kr = kinds.data() + b * T;
    int32_t* pr = pos.data() + b * T;
    if (o.context_miss) {
      xr[0] = o.cmt_id;
      yr[0] = kIgnoreIndex;
      kr[0] = kContextMiss;
      pr[0] = -1;
    }
    int32_t p = 0;
    for (int64_t t = first; t < T; ++t) {
      const int64_t a = a0 + (t - first);
      pr[t] = p;
      if (aug.is_landmark(a)) {
        xr[t] = o.landmark_id;
        yr[t] = kIgnoreIndex;
        bool controlled = false;
        if (o.context_miss && o.cmt_prob > 0) {
          Philox4 r = philox::block(counter * static_cast<uint64_t>(T) + static_cast<uint64_t>(t),
                                    static_cast<uint32_t>(RngStream::ContextMiss), seed);
          controlled = uniform_from<double>(r) < o.cmt_prob;
        }
        kr[t] = controlled ? kControlledLandmark : kLandmark;
        int64_t step = 1;
        if (training && o.jump_max > 1) {
          Philox4 r = philox::block(counter * static_cast<uint64_t>(T) + static_cast<uint64_t>(t),
                                    static_cast<uint32_t>(RngStream::Jumps), seed);
          step = 1 + static_cast<int64_t>(uniform_from<double>(r) * static_cast<double>(o.jump_max));
        }
        p += static_cast<int32_t>(step);
      } else {
        xr[t] = data[aug.raw_index(a)];
        const int64_t next = aug.is_landmark(a + 1) ? a + 2 : a + 1;  // the next regular position
        yr[t] = data[aug.raw_index(next)];
        kr[t] = kRegular;
        p += 1;
      }
    }
  }
  return LandmarkBatch{from_vector(x, {B, T}), from_vector(y, {B, T}), from_vector(kinds, {B, T}),
                       from_vector(pos, {B, T})};
}

}  // namespace lm
