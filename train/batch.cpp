// batch.cpp: random-window batching (see batch.h). Rows are independent draws, so windows may
// overlap; over many steps every start is equally likely. Not here: shuffling without replacement.
#include "train/batch.h"

#include <algorithm>

#include "tensor/check.h"
#include "tensor/rng.h"

namespace lm {

int64_t window_start(uint64_t counter, uint64_t seed, int64_t num_starts) {
  LM_CHECK(num_starts >= 1, "window_start: need at least one possible start, got " << num_starts);
  Philox4 r = philox::block(counter, static_cast<uint32_t>(RngStream::Data), seed);
  uint64_t bits = (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0];
  // The modulo's bias is at most num_starts / 2^64: invisible for any corpus that fits on disk.
  return static_cast<int64_t>(bits % static_cast<uint64_t>(num_starts));
}

std::vector<int64_t> document_starts(const TokenFile& data, int32_t separator, int64_t last_start) {
  std::vector<int64_t> starts;
  const int32_t* tokens = data.data();
  const int64_t end = std::min<int64_t>(last_start, data.size() - 1);
  for (int64_t p = 0; p <= end; ++p)
    if (p == 0 || tokens[p - 1] == separator) starts.push_back(p);
  return starts;
}

int64_t row_start(uint64_t counter, uint64_t seed, int64_t num_starts, const std::vector<int64_t>* starts) {
  if (!starts) return window_start(counter, seed, num_starts);
  LM_CHECK(!starts->empty(),
           "training windows: no document start leaves room for a whole window; use a smaller "
           "window or a file with more documents");
  LM_CHECK(starts->back() < num_starts,
           "training windows: document start "
               << starts->back() << " leaves no room for a whole window (starts must be below " << num_starts << ")");
  return (*starts)[static_cast<size_t>(window_start(counter, seed, static_cast<int64_t>(starts->size())))];
}

Batch sample_batch(const TokenFile& data, int64_t B, int64_t T, uint64_t seed, uint64_t cursor,
                   const std::vector<int64_t>* starts) {
  LM_CHECK(B >= 1 && T >= 1, "sample_batch: B and T must be positive, got B=" << B << " T=" << T);
  LM_CHECK(data.size() >= T + 1, "sample_batch: token file " << data.path() << " holds " << data.size()
                                                             << " tokens, too few for one window of T + 1 = " << T + 1
                                                             << " (input plus the shifted target); "
                                                                "use a smaller T or more data");
  const int64_t num_starts = data.size() - T;  // starts 0 .. size - T - 1
  Batch batch{Tensor({B, T}, DType::I32), Tensor({B, T}, DType::I32)};
  int32_t* x = batch.x.data<int32_t>();
  int32_t* y = batch.y.data<int32_t>();
  const int32_t* tokens = data.data();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = row_start(cursor + static_cast<uint64_t>(b), seed, num_starts, starts);
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = tokens[s + t];
      y[b * T + t] = tokens[s + t + 1];
    }
  }
  return batch;
}

}  // namespace lm
