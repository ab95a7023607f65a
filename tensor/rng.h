// rng.h: the project's one random number generator, Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11). It is counter-based: the n-th number is a pure
// function of (seed, n), so CPU threads and CUDA threads produce identical streams without
// sharing state. Not cryptographic. The global Generator only remembers (seed, offset).
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/hostdevice.h"

namespace lm {

struct Philox4 {
  uint32_t v[4];
};

namespace philox {
LM_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}
// Ten rounds of the Philox bijection on a 128-bit counter under a 64-bit key.
LM_HD Philox4 block(uint64_t counter, uint32_t stream, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = stream, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}
}  // namespace philox

// Uniform in [0, 1) from the top 24 bits (float) or 53 bits (double) of the block.
template <class Scalar>
LM_HD Scalar uniform_from(const Philox4& r);
template <>
LM_HD float uniform_from<float>(const Philox4& r) {
  return static_cast<float>(r.v[0] >> 8) * (1.0f / 16777216.0f);
}
template <>
LM_HD double uniform_from<double>(const Philox4& r) {
  uint64_t bits = (static_cast<uint64_t>(r.v[0] >> 5) << 26) | (r.v[1] >> 6);  // 27 + 26 bits
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}
// Standard normal by Box-Muller in double, then rounded to Scalar: u1 from words 0-1, u2 from 2-3.
template <class Scalar>
LM_HD Scalar normal_from(const Philox4& r) {
  uint64_t b1 = (static_cast<uint64_t>(r.v[0] >> 5) << 26) | (r.v[1] >> 6);
  uint64_t b2 = (static_cast<uint64_t>(r.v[2] >> 5) << 26) | (r.v[3] >> 6);
  double u1 = (static_cast<double>(b1) + 1.0) * (1.0 / 9007199254740992.0);  // (0, 1]: log is finite
  double u2 = static_cast<double>(b2) * (1.0 / 9007199254740992.0);
  double radius = std::sqrt(-2.0 * std::log(u1));
  return static_cast<Scalar>(radius * std::cos(6.283185307179586476925 * u2));
}

// The global generator: element i of the next draw of n values uses counter offset + i; the draw
// then advances offset by n. Streams keep uniform, normal and later users (dropout, data
// sampling) apart even when their counters coincide.
enum class RngStream : uint32_t { Uniform = 1, Normal = 2, Data = 4, Jumps = 5, ContextMiss = 6, User = 16 };

struct RngState {
  uint64_t seed = 0x5EED;
  uint64_t offset = 0;
};

RngState& global_rng();            // the process-wide state (not thread safe by design:
void manual_seed(uint64_t seed);   // draws happen on the host thread that runs the model)
uint64_t rng_reserve(uint64_t n);  // returns the first counter of n fresh ones

}  // namespace lm
