#pragma once

// Base64 (RFC 4648, standard alphabet, with padding) as Triton's JSON APIs use it: `file:`
// load parameters and the CUDA shared-memory handle (`raw_handle: {"b64": ...}`).

#include <optional>
#include <string>
#include <string_view>

namespace infergate::codecs {

std::string base64Encode(std::string_view bytes);

// Strict, with a little of libb64's leniency (Triton's decoder): ASCII whitespace is
// skipped and padding is optional. Any other byte outside the alphabet, padding followed
// by digits, or a dangling 6 bits is nullopt: a mangled value is reported, never guessed.
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace infergate::codecs
