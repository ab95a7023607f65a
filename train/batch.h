// batch.h: random training windows from a token file. Each row of a batch is a window of T + 1
// consecutive tokens at a start drawn from the project's Philox RNG, so (seed, cursor) alone
// reproduce a batch: resuming needs no sampler state beyond the cursor.
// Not here: landmark insertion into the windows (landmark/), evaluation over whole files.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"
#include "train/token_file.h"

namespace lm {

struct Batch {
  Tensor x;  // i32 (B, T): tokens [s, s + T) of each row's window
  Tensor y;  // i32 (B, T): tokens [s + 1, s + T + 1), the next-token targets of x
};

// Row b starts at a uniform integer in [0, size - T - 1], drawn from
// philox::block(cursor + b, RngStream::Data, seed). The caller advances cursor by B per batch.
// Throws lm::Error when the file holds fewer than T + 1 tokens.
Batch sample_batch(const TokenFile& data, int64_t B, int64_t T, uint64_t seed, uint64_t cursor);

// The start sample_batch uses for the row with counter `counter` (exposed for tests and docs).
int64_t window_start(uint64_t counter, uint64_t seed, int64_t num_starts);

}  // namespace lm
