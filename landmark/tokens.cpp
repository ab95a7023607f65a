// tokens.cpp: landmark insertion, targets and regular-position selection (tokens.h).
#include "landmark/tokens.h"

#include "tensor/create.h"
#include "tensor/ops.h"

namespace lm {

LandmarkInserter::LandmarkInserter(int64_t block_len, int32_t landmark_id, int64_t phase)
    : block_len_(block_len), landmark_id_(landmark_id), phase_(phase) {
  LM_CHECK(block_len > 0, "LandmarkInserter: block length F must be positive, got " << block_len);
  LM_CHECK(phase >= 0 && phase < block_len,
           "LandmarkInserter: phase " << phase << " must be in [0, " << block_len << ")");
}

void LandmarkInserter::push(const std::vector<int32_t>& raw, std::vector<int32_t>& out, std::vector<int32_t>* kinds) {
  for (int32_t t : raw) {
    out.push_back(t);
    if (kinds) kinds->push_back(kRegular);
    if (++phase_ == block_len_) {  // the block is full: close it with its landmark
      out.push_back(landmark_id_);
      if (kinds) kinds->push_back(kLandmark);
      phase_ = 0;
    }
  }
}

std::vector<int32_t> insert_landmarks(const std::vector<int32_t>& raw, int64_t block_len, int32_t landmark_id) {
  std::vector<int32_t> out;
  out.reserve(raw.size() + raw.size() / static_cast<size_t>(block_len));
  LandmarkInserter ins(block_len, landmark_id);
  ins.push(raw, out);
  return out;
}

std::vector<int32_t> landmark_targets(const std::vector<int32_t>& tokens, const std::vector<int32_t>& kinds,
                                      int32_t next_regular) {
  LM_CHECK(tokens.size() == kinds.size(),
           "landmark_targets: " << tokens.size() << " tokens but " << kinds.size() << " kinds");
  std::vector<int32_t> y(tokens.size(), kIgnoreIndex);
  int32_t next = next_regular;  // walking backwards: the next regular token seen so far
  for (size_t i = tokens.size(); i-- > 0;) {
    if (kinds[i] == kRegular) {
      y[i] = next;
      next = tokens[i];
    }
  }
  return y;
}

Tensor select_regular(const Tensor& x, const Tensor& kinds) {
  LM_CHECK(kinds.dim() == 2 && kinds.dtype() == DType::I32,
           "select_regular: kinds must be i32 (B, T), got " << describe(kinds));
  LM_CHECK(x.dim() >= 2 && x.size(0) == kinds.size(0) && x.size(1) == kinds.size(1),
           "select_regular: x " << describe(x) << " must start with the (B, T) of kinds " << describe(kinds));
  const int64_t B = kinds.size(0), T = kinds.size(1);
  std::vector<int32_t> k = kinds.to_vector<int32_t>();
  int64_t R = -1;
  std::vector<Tensor> rows;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<Tensor> keep;
    int64_t count = 0;
    for (int64_t t = 0; t < T;) {  // runs of regular positions become one narrow each
      if (k[b * T + t] != kRegular) {
        ++t;
        continue;
      }
      int64_t e = t;
      while (e < T && k[b * T + e] == kRegular) ++e;
      keep.push_back(x.select(0, b).narrow(0, t, e - t));
      count += e - t;
      t = e;
    }
    LM_CHECK(R < 0 || R == count,
             "select_regular: batch rows have different numbers of regular positions (" << R << " vs " << count << ")");
    R = count;
    rows.push_back((keep.empty() ? x.select(0, b).narrow(0, 0, 0) : concat(keep, 0)).unsqueeze(0));
  }
  return concat(rows, 0);
}

}  // namespace lm
