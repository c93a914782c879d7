#pragma once

// An HTTP /infer body in the binary-tensor extension's layout (PROTOCOL.md section 6):
//
//   +------------------------+--------------+--------------+----
//   | JSON header            | blob, tensor | blob, tensor | ...
//   | (header_length bytes)  | k1           | k2           |
//   +------------------------+--------------+--------------+----
//
// Blobs follow in the JSON order of the tensors that carry binary_data_size; no padding.
// The body is kept as segments (the JSON text, then each tensor's own Buffer) so that it is
// written with writev without copying tensors. Without binary tensors it is JSON alone.

#include <cstdint>
#include <optional>
#include <string_view>

#include "codecs/buffer.h"

namespace infergate::codecs {

struct HttpInferBody {
  BufferChain body;
  // The JSON length for the Inference-Header-Content-Length header; set only when a binary
  // section follows the JSON (or the body is raw binary, header length 0).
  std::optional<uint64_t> header_length;

  // "application/json" without a binary section, "application/octet-stream" with one.
  std::string_view contentType() const {
    return header_length ? "application/octet-stream" : "application/json";
  }
};

}  // namespace infergate::codecs
