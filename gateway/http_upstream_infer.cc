#include "gateway/http_upstream_infer.h"

#include <algorithm>

#include "codecs/binary_tensor.h"
#include "codecs/json_request_encoder.h"
#include "codecs/text.h"

namespace infergate::gateway {

codecs::StatusOr<upstream::HttpUpstreamRequest> httpUpstreamInfer(
    codecs::InferRequest& request, const Decision& d, const upstream::Upstream& target,
    HeaderPairs headers, std::optional<std::chrono::system_clock::time_point> deadline) {
  INFERGATE_ASSIGN_OR_RETURN(std::string path,
                             httpModelPath(d.upstream_model, d.upstream_version, "/infer"));
  codecs::JsonRequestEncoder::Options options;
  options.binary_inputs =
      target.config().http_format == config::UpstreamConfig::HttpFormat::kBinary;
  // Asked for the encoding only: the client's own choice decides its response's form.
  const std::optional<bool> client_binary_output = request.binary_data_output;
  if (options.binary_inputs) request.binary_data_output = true;
  codecs::StatusOr<codecs::HttpInferBody> body = codecs::JsonRequestEncoder(options).encode(request);
  request.binary_data_output = client_binary_output;
  if (!body.ok()) return body.status();
  upstream::HttpUpstreamRequest out;
  out.method = "POST";
  out.target = std::move(path);
  out.headers = std::move(headers);
  out.headers.emplace_back("Content-Type", std::string(body->contentType()));
  if (body->header_length) {
    out.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*body->header_length));
  }
  out.body = std::move(body->body);
  if (deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        *deadline - std::chrono::system_clock::now());
    out.timeout = std::max(left, std::chrono::milliseconds(1));
  }
  return out;
}

codecs::StatusOr<codecs::InferResponse> httpUpstreamInferAnswer(
    const codecs::DecodeLimits& limits, const upstream::HttpUpstreamResponse& r,
    std::string_view upstream_name) {
  if (r.status != 200) return httpErrorAnswer(r.status, r.body.view(), upstream_name);
  std::optional<uint64_t> header_length;
  if (const std::string_view* ihcl = r.headers.find("Inference-Header-Content-Length")) {
    header_length = codecs::parseUint64(codecs::trimAscii(*ihcl));
    if (!header_length) {
      return upstreamGarbage(upstream_name, "response", codecs::invalidArgument(
                                                "Inference-Header-Content-Length '", *ihcl, "'"));
    }
  }
  auto decoded =
      codecs::BinaryTensorDecoder(limits).decodeResponse(r.body, header_length, r.body.size());
  if (!decoded.ok()) return upstreamGarbage(upstream_name, "response", decoded.status());
  return decoded;
}

}  // namespace infergate::gateway
