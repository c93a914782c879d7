#pragma once

// Pieces of the HTTP frontend shared by its .cc files; not a public header.

#include <chrono>
#include <optional>

#include "codecs/binary_tensor.h"
#include "codecs/infer.h"
#include "codecs/limits.h"
#include "gateway/http/http_message.h"

namespace infergate::gateway::frontends {

// The request's Inference-Header-Content-Length, parsed as Triton does (int32, >= 0):
// nothing when absent, INVALID_ARGUMENT when it does not parse.
codecs::StatusOr<std::optional<uint64_t>> headerLength(const http::HttpRequest& request);

// An /infer body (JSON, binary extension, gzip/deflate) as an InferRequest; tensors stay
// slices of the body. `raw_input`: the model's only input, for the raw-binary form
// (Inference-Header-Content-Length: 0); null refuses that form (UNIMPLEMENTED), for
// upstreams whose input the gateway does not know.
codecs::StatusOr<codecs::InferRequest> decodeHttpInfer(
    const http::HttpRequest& http, const codecs::DecodeLimits& limits,
    const codecs::BinaryTensorDecoder::RawInputSpec* raw_input);

// The response to a decodeHttpInfer() error (with Accept-Encoding when the body's
// Content-Encoding was not supported).
http::HttpResponse decodeErrorResponse(const http::HttpRequest& http, const codecs::Status& status);

// The deadline of a request with `timeout` from now; none for 0 (no timeout).
inline std::optional<std::chrono::system_clock::time_point> deadlineOf(std::chrono::milliseconds timeout) {
  if (timeout.count() == 0) return std::nullopt;
  return std::chrono::system_clock::now() + timeout;
}

// `response` in the client's form: JSON, binary outputs where `request` asked for them,
// compressed when the client's Accept-Encoding allows.
http::HttpResponse inferResponse(const codecs::InferResponse& response,
                                 const codecs::InferRequest& request, const http::HttpRequest& http);

}  // namespace infergate::gateway::frontends
