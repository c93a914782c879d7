#pragma once

// A decoded inference request toward an HTTP upstream, and its answer back, for every path
// that cannot pass the client's bytes through: a gRPC client, and an HTTP client whose
// request names shared-memory regions (the gateway reads them, so the body changes).
//
//   httpUpstreamInfer        the binary-tensor extension (or JSON when the upstream is
//                            configured `http_format: json`), every output asked binary
//                            so that FP16/BF16 and non-UTF-8 BYTES come back exactly; the
//                            request's own binary_data_output is left as the client set it
//   httpUpstreamInferAnswer  a 200 decoded (binary extension or JSON), an error answer as
//                            the status the upstream meant (its own message, the code of
//                            its HTTP status), garbage as upstreamGarbage (502)

#include <chrono>
#include <optional>
#include <string_view>

#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"
#include "gateway/router.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway {

// `headers`: the client's forwarded headers (lowercase names); the body headers are added.
codecs::StatusOr<upstream::HttpUpstreamRequest> httpUpstreamInfer(
    codecs::InferRequest& request, const Decision& d, const upstream::Upstream& target,
    HeaderPairs headers, std::optional<std::chrono::system_clock::time_point> deadline);

codecs::StatusOr<codecs::InferResponse> httpUpstreamInferAnswer(
    const codecs::DecodeLimits& limits, const upstream::HttpUpstreamResponse& r,
    std::string_view upstream_name);

}  // namespace infergate::gateway
