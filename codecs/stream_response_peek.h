#pragma once

// Reads of a serialized ModelStreamInferResponse without decoding it: what the stream
// relay (gateway/frontends/grpc_stream_infer.cc) needs of each answer a gRPC upstream's
// stream sends, the tensors never touched.
//
//   ModelStreamInferResponse: 1 error_message (LEN string) | 2 infer_response (LEN)
//   ModelInferResponse:       1 model_name (LEN) | 4 parameters (LEN map entries) | ...
//   parameters entry:         1 key (LEN string) | 2 value (LEN InferParameter)
//   InferParameter:           1 bool_param (VARINT) | ...
//
// Every field is visited (the last occurrence wins, as protobuf reads them); others are
// skipped by their length. Pure; thread-safe.

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace infergate::codecs {

// The model_name inside the response (field 2, then field 1), or nullopt when there is
// none or the message is not well-formed.
std::optional<std::string> peekStreamResponseModel(std::span<const uint8_t> message);

// What an answer says of its request.
struct StreamAnswer {
  // An in-band error, or a response whose triton_final_response parameter is not false
  // (non-decoupled models' answers are final whether they carry it or not).
  bool final = true;
  bool error = false;  // error_message (field 1) is set
};

// A message that is not well-formed reads as a final error.
StreamAnswer peekStreamAnswer(std::span<const uint8_t> message);

}  // namespace infergate::codecs
