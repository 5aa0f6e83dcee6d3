// Bit-exact scalar conversions of the stored number formats to float32. All three are subsets of
// float32, so each conversion is exact (no rounding), including subnormals, infinities and NaNs.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace glm5rt {

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// bf16 is the upper half of a float32.
inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals, inf and NaN (payload kept).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_to_f32(sign | ((exp + 127 - 15) << 23) | (mant << 13));
  if (mant == 0) return bits_to_f32(sign);  // +-0
  // Subnormal: value = mant * 2^-24; normalise so that the leading 1 becomes implicit.
  int e = -14;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  mant &= 0x3ffu;
  return bits_to_f32(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 13));
}

// OCP FP8 E4M3 "fn" (torch.float8_e4m3fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities;
// S.1111.111 (0x7f / 0xff) is NaN; the largest finite value is 448; exponent 0 holds subnormals m * 2^-9.
inline float e4m3_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  if (exp == 0xf && mant == 0x7) return bits_to_f32(sign | 0x7fc00000u);  // NaN
  if (exp != 0) return bits_to_f32(sign | ((exp + 127 - 7) << 23) | (mant << 20));
  if (mant == 0) return bits_to_f32(sign);
  int e = -6;
  while ((mant & 0x8u) == 0) {
    mant <<= 1;
    --e;
  }
  mant &= 0x7u;
  return bits_to_f32(sign | (static_cast<uint32_t>(e + 127) << 23) | (mant << 20));
}

}  // namespace glm5rt
