#pragma once

// Decodes a serialized ModelInferResponse (and the ModelStreamInferResponse around it)
// from an upstream into an InferResponse, straight from the wire format, without copying
// tensor bytes.
//
//   ModelInferResponse: 1 model_name | 2 model_version | 3 id | 4 parameters (map)
//                       | 5 outputs (InferOutputTensor) | 6 raw_output_contents
//   ModelStreamInferResponse: 1 error_message | 2 infer_response (ModelInferResponse)
//
// raw_output_contents is index-aligned with outputs (Triton: one entry per output, empty
// for shm and zero-size outputs); entry i becomes output i's data as a Buffer slice of the
// message. An output with no raw entry at its index takes its typed `contents`, converted
// to the binary form (KServe / MLServer answer that way); with neither it has no data.
// Non-empty data must match shape and datatype; empty data is accepted whatever the shape
// (the response does not say which outputs went to shared memory: the pipeline knows).
// Output and response parameters are kept with their kind, in order.
//
// Errors: RESOURCE_EXHAUSTED past a DecodeLimits limit (message size, outputs or raw
// entries over max_tensors, typed tensor over max_tensor_bytes); INVALID_ARGUMENT for
// malformed wire format, an invalid datatype, a negative dim, more raw entries than
// outputs, data that does not match its output, typed FP16/BF16. The caller stamps them
// ErrorOrigin::kUpstream.
// Ownership: output Buffers share `message`'s owner. Thread-safety: const, any thread.

#include <optional>
#include <string>

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"

namespace infergate::codecs {

// One ModelStreamInferResponse: an in-band error (response then holds at most the id and
// the model name/version Triton copies from the request), a response, or both.
struct StreamInferResponse {
  std::string error_message;              // "" when none
  std::optional<InferResponse> response;  // set when infer_response was present
};

class ProtobufResponseDecoder {
 public:
  explicit ProtobufResponseDecoder(const DecodeLimits& limits = {}) : limits_(limits) {}

  StatusOr<InferResponse> decode(const Buffer& message) const;
  StatusOr<StreamInferResponse> decodeStreamResponse(const Buffer& message) const;

 private:
  DecodeLimits limits_;
};

}  // namespace infergate::codecs
