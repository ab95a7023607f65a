// batch.h: random training windows from a token file. Each row of a batch is a window of T + 1
// consecutive tokens at a start drawn from the project's Philox RNG, so (seed, cursor) alone
// reproduce a batch: resuming needs no sampler state beyond the cursor.
// Not here: landmark insertion into the windows (landmark/), evaluation over whole files.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"
#include "train/token_file.h"

namespace lm {

struct Batch {
  Tensor x;  // i32 (B, T): tokens [s, s + T) of each row's window
  Tensor y;  // i32 (B, T): tokens [s + 1, s + T + 1), the next-token targets of x
};

// Row b starts at a uniform integer in [0, size - T - 1], drawn from
// philox::block(cursor + b, RngStream::Data, seed). The caller advances cursor by B per batch.
// With `starts` (sorted, from document_starts), row b starts at a uniform element of it instead,
// drawn from the same stream. Throws lm::Error when the file holds fewer than T + 1 tokens, or
// when `starts` is empty or ends past size - T - 1.
Batch sample_batch(const TokenFile& data, int64_t B, int64_t T, uint64_t seed, uint64_t cursor,
                   const std::vector<int64_t>* starts = nullptr);

// Where windows may start when each is to begin at a document (train --doc-starts): position 0
// and every position right after a `separator` token (the tokenizer's "\n"), up to last_start.
// Empty when there is none; sorted.
std::vector<int64_t> document_starts(const TokenFile& data, int32_t separator, int64_t last_start);

// The start of the row with counter `counter`: window_start over `starts` when given, else over
// [0, num_starts). Checks that starts is non-empty and its last element below num_starts.
int64_t row_start(uint64_t counter, uint64_t seed, int64_t num_starts, const std::vector<int64_t>* starts);

// The start sample_batch uses for the row with counter `counter` (exposed for tests and docs).
int64_t window_start(uint64_t counter, uint64_t seed, int64_t num_starts);

}  // namespace lm
