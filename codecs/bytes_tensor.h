#pragma once

// BYTES tensors in their binary form: each element is a 4-byte little-endian unsigned
// length followed by that many bytes, elements concatenated, no padding.
//
//   +----------+-----------+----------+-----------+----
//   | len0 u32 | len0 bytes| len1 u32 | len1 bytes| ...
//   +----------+-----------+----------+-----------+----

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/status.h"

namespace infergate::codecs {

inline uint32_t loadU32Le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

inline void appendU32Le(std::string& out, uint32_t v) {
  char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
               static_cast<char>(v >> 24)};
  out.append(b, 4);
}

// Calls fn(std::string_view element) for each element, in order. Stops with
// INVALID_ARGUMENT naming `tensor` when a length prefix or an element runs past the end.
template <typename Fn>
Status forEachBytesElement(std::span<const uint8_t> data, std::string_view tensor, Fn&& fn) {
  size_t pos = 0;
  size_t index = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 4) {
      return invalidArgument("BYTES tensor '", tensor, "': element ", index,
                             " has a truncated 4-byte length prefix");
    }
    uint32_t len = loadU32Le(data.data() + pos);
    pos += 4;
    if (len > data.size() - pos) {
      return invalidArgument("BYTES tensor '", tensor, "': element ", index, " of ", len,
                             " bytes runs past the end of the tensor data");
    }
    fn(std::string_view(reinterpret_cast<const char*>(data.data() + pos), len));
    pos += len;
    ++index;
  }
  return absl::OkStatus();
}

// Number of elements in a serialized BYTES tensor, or the error of forEachBytesElement.
StatusOr<uint64_t> countBytesElements(std::span<const uint8_t> data, std::string_view tensor);

// Appends one element (length prefix + bytes). Elements are at most 2^32 - 1 bytes.
inline void appendBytesElement(std::string& out, std::string_view element) {
  appendU32Le(out, static_cast<uint32_t>(element.size()));
  out.append(element);
}

std::string serializeBytesElements(const std::vector<std::string>& elements);

// The elements of a serialized BYTES tensor (copies; for tests and the demo models).
StatusOr<std::vector<std::string>> parseBytesElements(std::span<const uint8_t> data,
                                                      std::string_view tensor);

}  // namespace infergate::codecs
