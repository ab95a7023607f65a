// half.h: IEEE 754 binary16 ("f16", "half") to and from binary32, bit by bit, for storing block
// K/V at half the bytes (infer/block_store.h, --kv-dtype f16). Plain integer code, so the host and
// a CUDA kernel would round the same way (LM_HD). Not a tensor dtype: nothing computes in f16.
//
// binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. Normal values 2^-14 ..
// 65504 with 11 significant bits (relative rounding error at most 2^-11); subnormals down to
// 2^-24; exponent 31 is infinity (mantissa 0) or NaN.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/hostdevice.h"

namespace lm {

// Round to nearest, ties to even, like a hardware conversion, with one difference: a finite
// value whose rounding would overflow (|x| >= 65520) saturates to +-65504 instead of becoming
// infinity, so a stored key or value stays finite. Infinities stay infinite, NaN stays NaN.
LM_HD uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));  // NaN, inf
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7BFFu);  // >= 65520: saturate at 65504
  if (a >= 0x38800000u) {  // >= 2^-14: a normal half. Rebias the exponent (127 -> 15), keep 10 bits.
    uint32_t h = (a >> 13) - (112u << 10);
    const uint32_t rem = a & 0x1FFFu;                        // the 13 bits dropped
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right too
    return static_cast<uint16_t>(sign | h);
  }
  if (a < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 (2^-25 itself ties to even: 0)
  // A subnormal half: the value in units of 2^-24 is m * 2^(e - 126), with m the 24-bit significand.
  const uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - e;  // shift 14..24
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // may round up to 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

// Exact: every half is a float.
LM_HD float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, bits;
  if (e == 0x1Fu) {
    bits = sign | 0x7F800000u | (m << 13);  // inf, NaN (payload kept)
  } else if (e != 0) {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    bits = sign;  // +-0
  } else {        // subnormal m * 2^-24: shift the leading 1 up to bit 10 and lower the exponent to match
    int32_t ex = 1;
    while (!(m & 0x400u)) {
      m <<= 1;
      --ex;
    }
    bits = sign | (static_cast<uint32_t>(ex + 112) << 23) | ((m & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace lm
