#pragma once

// Encodes an InferRequest as an HTTP /infer body (JSON, optionally with binary tensors),
// the form an HTTP upstream is sent. Pure: model in, bytes out.

#include "codecs/http_infer_body.h"
#include "codecs/infer.h"
#include "codecs/status.h"

namespace infergate::codecs {

class JsonRequestEncoder {
 public:
  struct Options {
    // Tensors travel as binary blobs (no copy, exact). Off: as JSON `data`, except
    // FP16/BF16 which can only be binary.
    bool binary_inputs = true;
    // Triton's HTTP frontend rejects every `triton_` parameter, while its gRPC clients
    // send triton_enable_empty_final_response on every call: drop them toward HTTP.
    bool drop_triton_parameters = true;
  };

  JsonRequestEncoder() = default;
  explicit JsonRequestEncoder(const Options& options) : options_(options) {}

  // Errors: INVALID_ARGUMENT when a tensor's data does not match its shape and type.
  StatusOr<HttpInferBody> encode(const InferRequest& request) const;

 private:
  Options options_;
};

}  // namespace infergate::codecs
