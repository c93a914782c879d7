#pragma once

// The binary-tensor extension on the decode side (PROTOCOL.md sections 5.5 and 6): splits
// an HTTP /infer body at Inference-Header-Content-Length, decodes the JSON header and
// attaches each blob to its tensor as a slice of the body (no copy).
//
// Errors (INVALID_ARGUMENT unless noted), each naming the tensor:
//   header length past the body; a blob shorter than its binary_data_size ("unexpected
//   size for input"); bytes left after the last blob ("unexpected additional input
//   data"); a blob whose size disagrees with the tensor's shape and datatype; a BYTES
//   element running past its blob; the body over max_binary_body_bytes
//   (RESOURCE_EXHAUSTED).

#include <cstdint>
#include <optional>

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"

namespace infergate::codecs {

class BinaryTensorDecoder {
 public:
  explicit BinaryTensorDecoder(const DecodeLimits& limits = {}) : limits_(limits) {}

  // `header_length`: the request's Inference-Header-Content-Length; absent means the
  // whole body is JSON. 0 is the raw-binary form and is decoded by decodeRawRequest.
  // `readable`: bytes readable from body.data() (>= body.size()), so that the JSON can be
  // parsed in place when padding is available.
  StatusOr<InferRequest> decodeRequest(const Buffer& body, std::optional<uint64_t> header_length,
                                       size_t readable = 0) const;
  StatusOr<InferResponse> decodeResponse(const Buffer& body,
                                         std::optional<uint64_t> header_length,
                                         size_t readable = 0) const;
  // A response whose blobs are still arriving (a large answer sent on as it comes): only
  // the JSON header, the first `header_length` bytes of `body`, is read (in place, `body`
  // being readable to its end). Each output gets its blob as a slice of `body`, memory
  // that may not be written yet, so blobs are checked by their sizes alone: every output
  // must be binary and of a fixed-size datatype (a BYTES blob would have to be read to be
  // checked), and the blobs must fill the body exactly. FAILED_PRECONDITION names an
  // output that is not so (JSON `data`, BYTES); the rest as decodeResponse.
  StatusOr<InferResponse> decodeResponseAhead(const Buffer& body, uint64_t header_length) const;

  // The model's only input, as its metadata gives it (dims may hold -1).
  struct RawInputSpec {
    std::string name;
    DataType datatype = DataType::kInvalid;
    Shape dims;
    bool batching = false;  // max_batch_size > 0: a leading batch dim of 1 is added
  };
  // Inference-Header-Content-Length: 0: the whole body is the data of the model's single
  // input. Fixed-size types may have one variable dim, deduced from the byte count; BYTES
  // must have shape [1] and the body is its one element (the length prefix is added).
  // Every output is returned binary.
  StatusOr<InferRequest> decodeRawRequest(const Buffer& body, const RawInputSpec& input) const;

 private:
  DecodeLimits limits_;
};

}  // namespace infergate::codecs
