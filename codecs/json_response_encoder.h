#pragma once

// Encodes an InferResponse as the HTTP /infer response body a Triton client expects
// (PROTOCOL.md sections 5.4 and 6): keys in Triton's order, each output as JSON `data`,
// as a binary blob (binary_data_size), or bare (written to shared memory).
//
// Which outputs go binary is the client's choice, so the encoder takes the request: an
// output's own `binary_data`, else the request's `binary_data_output`, else JSON.

#include "codecs/http_infer_body.h"
#include "codecs/infer.h"
#include "codecs/status.h"

namespace infergate::codecs {

class JsonResponseEncoder {
 public:
  // Errors: INVALID_ARGUMENT for FP16/BF16 outputs asked for as JSON (Triton's 400) and for
  // output data that does not match its shape and type.
  StatusOr<HttpInferBody> encode(const InferResponse& response, const InferRequest& request) const;
};

// Whether `output` is sent binary for `request` (the rule above).
bool wantsBinaryOutput(const InferRequest& request, std::string_view output);

// Appends a tensor's data as a flat JSON array (FP16/BF16: INVALID_ARGUMENT), and a
// parameter value, in the writer's layout; for bodies built outside the /infer encoder
// (the generate extension).
Status appendJsonTensorData(std::string& out, DataType datatype, const Buffer& data,
                            std::string_view tensor);
void appendJsonParamValue(std::string& out, const ParamValue& value);

// `{"error":"<message>"}`, compact, as every error body of Triton and the gateway.
// `text` with every byte that starts no well-formed UTF-8 sequence replaced by U+FFFD.
std::string validUtf8(std::string_view text);

std::string encodeJsonError(std::string_view message);

}  // namespace infergate::codecs
