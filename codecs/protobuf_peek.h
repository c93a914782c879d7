#pragma once

// Reads the model name and version of a serialized ModelInferRequest without decoding the
// rest: the gRPC passthrough path routes on them and forwards the message untouched.
//
//   ModelInferRequest: 1 model_name (LEN) | 2 model_version (LEN) | 3..7 skipped
//
// Every field is visited (protobuf lets a field appear anywhere, and the last occurrence
// of model_name / model_version wins), but other fields are skipped by their length, so the
// cost is one pass over the tags, not over the tensor bytes.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codecs/status.h"

namespace infergate::codecs {

struct ModelRef {
  std::string_view model_name;     // views into the message: valid while it lives
  std::string_view model_version;  // "" when absent
};

// Errors: INVALID_ARGUMENT when the message is not well-formed protobuf wire format
// (truncated, malformed varint, length past the end, invalid tag). Thread-safe (pure).
StatusOr<ModelRef> peekModelInferRequest(std::span<const uint8_t> message);

// The same for a message held in several segments (the slices of a grpc::ByteBuffer),
// without joining them: a passthrough never copies the message to route it. The names
// are copied out (they may straddle segments). Group fields (proto2 only) are refused
// here with INVALID_ARGUMENT; callers fall back to the contiguous form for those.
struct OwnedModelRef {
  std::string model_name;
  std::string model_version;
};
StatusOr<OwnedModelRef> peekModelInferRequest(std::span<const std::span<const uint8_t>> segments);

}  // namespace infergate::codecs
