#pragma once

// How Triton reads the two strings that name a model on the wire: the version string (the
// same rules on both frontends) and the model name as one segment of an HTTP path.

#include <cstdint>
#include <string_view>

#include "codecs/status.h"

namespace infergate::codecs {

// Triton's GetModelVersionFromString: "" -> -1 (latest); otherwise std::stol semantics
// (leading whitespace, an optional sign, at least one digit, the rest ignored: " 3x" is 3).
// Errors, INVALID_ARGUMENT, with Triton's texts:
//   not a number   "failed to get model version from specified version string 'v1'
//                   (details: stol), version should be an integral value > 0"
//   negative       "invalid model version specified '-1' , version should be an integral
//                   value > 0"
//   past int64     the first text.
StatusOr<int64_t> parseModelVersion(std::string_view version);

// Whether `name` reaches a Triton HTTP server unchanged as the <name> segment of
// /v2/models/<name>/...: Triton matches the raw path against [^/]+ without percent-decoding
// it, so the name must travel verbatim. Refused: empty, "." and ".." (an HTTP client
// removes dot segments), '/', the delimiters that end a path ('?', '#'), and bytes that
// cannot stand in a request target (controls, space, DEL). '%' and bytes >= 0x80 travel as
// they are.
bool isVerbatimPathSegment(std::string_view name);

}  // namespace infergate::codecs
