#pragma once

// Size and shape limits every decoder enforces. The defaults are Triton's: 64 MiB for
// the JSON header, each JSON-decoded tensor and a decompressed body
// (--http-max-input-size), and 2 GiB - 1 for binary bodies and gRPC messages.
// Past a size or count limit the error is RESOURCE_EXHAUSTED (HTTP 413), naming the
// limit; JSON nested past max_json_depth is INVALID_ARGUMENT (400).

#include <cstdint>

namespace infergate::codecs {

inline constexpr uint64_t kMiB = 1024 * 1024;

struct DecodeLimits {
  uint64_t max_json_bytes = 64 * kMiB;             // the JSON text of one body
  uint64_t max_tensor_bytes = 64 * kMiB;           // one tensor decoded from JSON data
  uint64_t max_decompressed_bytes = 64 * kMiB;     // an inflated gzip/deflate body
  uint64_t max_binary_body_bytes = 0x7fffffffULL;  // a binary-extension body / gRPC message
  uint32_t max_json_depth = 100;                   // nesting of arrays and objects in a body
  uint32_t max_tensors = 65536;                    // inputs or outputs in one message
  uint32_t max_rank = 64;                          // dimensions of one tensor's shape
  uint64_t max_elements = 0x7fffffffULL;           // elements of one tensor
};

}  // namespace infergate::codecs
