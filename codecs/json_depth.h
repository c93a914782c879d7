#pragma once

// How deeply a JSON text nests its arrays and objects, checked without parsing it: the
// pass-through paths forward a JSON body they never decode, and an upstream with a
// recursive parser (Triton's) must not receive one nested a million levels deep.

#include <cstdint>
#include <string_view>

#include "codecs/status.h"

namespace infergate::codecs {

// OK when no array or object in `text` lies more than `max_depth` levels deep (the root
// object is level 1). Brackets inside strings, escaped quotes included, do not count.
// INVALID_ARGUMENT "JSON nested deeper than N levels" otherwise. One pass over `text`;
// it does not check that `text` is well-formed JSON (the decoders do).
Status checkJsonDepth(std::string_view text, uint32_t max_depth);

}  // namespace infergate::codecs
