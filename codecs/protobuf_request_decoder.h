#pragma once

// Decodes a serialized ModelInferRequest (PROTOCOL.md 11.2, 11.4) into an InferRequest,
// straight from the wire format (protobuf_wire.h), without copying tensor bytes.
//
// Data of each input, in priority: shared-memory parameters (-> InferInput::shared_memory,
// no data); typed `contents` (converted to the binary form of the input's datatype); else
// the next unused raw_input_contents entry, as a Buffer slice of `message`. Raw entries
// are consumed in order only by inputs that are neither shm nor typed, so raw entry i is
// not necessarily input i.
//
// Parameters are kept with their exact kind and in order of appearance, except the keys
// lifted into fields: a tensor's shared_memory_region / _offset / _byte_size, and an
// output's classification and binary_data.
//
// Errors (never a crash, whatever the bytes):
//   RESOURCE_EXHAUSTED  message > limits.max_binary_body_bytes; more than
//                       limits.max_tensors inputs, outputs or raw entries; a typed tensor
//                       whose binary form exceeds limits.max_tensor_bytes; more than
//                       kMaxParametersPerMap parameters or kMaxShapeRank dims.
//   INVALID_ARGUMENT    malformed wire format (including trailing junk that is not a
//                       valid field); unknown datatype; negative dim; duplicate input
//                       name; contents mixed with raw_input_contents; an input with no
//                       data; surplus raw entries; raw or typed data that does not match
//                       shape and datatype; typed FP16/BF16; shm parameters of the wrong
//                       kind (offset/byte_size must be int64_param), incomplete (offset or
//                       byte_size without region, region without byte_size) or combined
//                       with contents; classification not an int64_param >= 0; binary_data
//                       not a bool_param; a parameter with no value.
//
// Ownership: the request's input Buffers share `message`'s owner (the message bytes stay
// alive while any input does); names and parameters are copies.
// Thread-safety: decode() is const; one decoder may serve every thread.

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"

namespace infergate::codecs {

class ProtobufRequestDecoder {
 public:
  explicit ProtobufRequestDecoder(const DecodeLimits& limits = {}) : limits_(limits) {}

  StatusOr<InferRequest> decode(const Buffer& message) const;

 private:
  DecodeLimits limits_;
};

}  // namespace infergate::codecs
