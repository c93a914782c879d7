#pragma once

// IEEE 754 half precision (FP16) and bfloat16 (BF16) conversions. Both travel only as raw
// little-endian 16-bit values; these are for the demo models and for tests.

#include <cstdint>

namespace infergate::codecs {

float fp16ToFloat(uint16_t h);
// Round to nearest, ties to even; overflow becomes infinity; NaN stays NaN.
uint16_t floatToFp16(float f);

// BF16 is the upper 16 bits of an IEEE float32.
float bf16ToFloat(uint16_t b);
// Truncation, as the Python client does.
uint16_t floatToBf16Truncate(float f);
// Round to nearest, ties to even (NaN kept quiet).
uint16_t floatToBf16Round(float f);

}  // namespace infergate::codecs
