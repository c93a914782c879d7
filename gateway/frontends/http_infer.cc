// POST /v2/models/<m>[/versions/<v>]/infer on a builtin upstream: decode (JSON, binary
// extension, raw binary, gzip/deflate), run the model, encode in the client's form (JSON
// or binary outputs, compressed when Accept-Encoding asks). The decode and encode steps
// are shared with the gRPC-upstream path (http_frontend_internal.h).

#include "codecs/binary_tensor.h"
#include "codecs/compression.h"
#include "codecs/json_response_encoder.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/frontends/http_frontend_internal.h"
#include "gateway/frontends/http_routes.h"
#include "gateway/shm_binding.h"

namespace infergate::gateway::frontends {

using http::HttpExchange;
using http::HttpResponse;

codecs::StatusOr<std::optional<uint64_t>> headerLength(const http::HttpRequest& request) {
  const std::string_view* value = request.headers.find("Inference-Header-Content-Length");
  if (!value) return std::optional<uint64_t>();
  std::optional<uint64_t> n = codecs::parseUint64(codecs::trimAscii(*value));
  if (!n || *n > 0x7fffffffULL) {
    return codecs::invalidArgument("Unable to parse Inference-Header-Content-Length '", *value,
                                   "'");
  }
  return n;
}

HttpResponse inferResponse(const codecs::InferResponse& response,
                           const codecs::InferRequest& request, const http::HttpRequest& http) {
  auto body = codecs::JsonResponseEncoder().encode(response, request);
  if (!body.ok()) return errorResponse(body.status());
  HttpResponse r;
  r.header("Content-Type", std::string(body->contentType()));
  if (body->header_length) {
    r.header("Inference-Header-Content-Length", std::to_string(*body->header_length));
  }
  codecs::ContentEncoding encoding = codecs::ContentEncoding::kIdentity;
  if (const std::string_view* accept = http.headers.find("Accept-Encoding")) {
    encoding = codecs::negotiateAcceptEncoding(*accept);
  }
  if (encoding != codecs::ContentEncoding::kIdentity) {
    auto packed = codecs::compress(encoding, body->body);
    if (packed.ok()) {  // on failure Triton sends the body uncompressed
      r.header("Content-Encoding", std::string(codecs::contentEncodingName(encoding)));
      r.body.append(*packed);
      return r;
    }
  }
  r.body = std::move(body->body);
  return r;
}

codecs::StatusOr<codecs::InferRequest> decodeHttpInfer(
    const http::HttpRequest& http, const codecs::DecodeLimits& limits,
    const codecs::BinaryTensorDecoder::RawInputSpec* raw_input) {
  codecs::Buffer body = http.body;
  size_t readable = http.body_readable;
  if (const std::string_view* ce = http.headers.find("Content-Encoding")) {
    INFERGATE_ASSIGN_OR_RETURN(codecs::ContentEncoding encoding, codecs::parseContentEncoding(*ce));
    if (encoding != codecs::ContentEncoding::kIdentity) {
      INFERGATE_ASSIGN_OR_RETURN(body, codecs::decompress(encoding, codecs::BufferChain(body),
                                                          limits.max_decompressed_bytes));
      readable = body.size();
    }
  }
  INFERGATE_ASSIGN_OR_RETURN(std::optional<uint64_t> header_length, headerLength(http));
  codecs::BinaryTensorDecoder decoder(limits);
  if (header_length && *header_length == 0) {
    if (raw_input == nullptr) {
      return codecs::unimplemented(
          "raw binary requests (Inference-Header-Content-Length: 0) are passed through to "
          "HTTP upstreams only");
    }
    return decoder.decodeRawRequest(body, *raw_input);
  }
  return decoder.decodeRequest(body, header_length, readable);
}

HttpResponse decodeErrorResponse(const http::HttpRequest& http, const codecs::Status& status) {
  HttpResponse r = errorResponse(status);
  // An unsupported Content-Encoding (415-like, UNIMPLEMENTED) says what is supported.
  const std::string_view* ce = http.headers.find("Content-Encoding");
  if (ce && !codecs::parseContentEncoding(*ce).ok()) r.header("Accept-Encoding", "gzip, deflate");
  return r;
}

void HttpFrontend::infer(const Exchange& exchange, const Route& route, const Decision& d) {
  const http::HttpRequest& http = exchange->request();
  builtin::ModelRepository& repo = *d.upstream->repository();
  auto model = repo.find(d.upstream_model, d.upstream_version);
  if (!model.ok()) return exchange->respond(errorResponse(model.status()));
  const builtin::ModelSpec& spec = (*model)->spec();
  if (spec.decoupled) {
    return exchange->respond(errorResponse(builtin::decoupledUnaryError(spec, builtin::UnaryPath::kHttp)));
  }
  std::optional<codecs::BinaryTensorDecoder::RawInputSpec> raw;
  if (const std::string_view* ihcl = http.headers.find("Inference-Header-Content-Length");
      ihcl && codecs::trimAscii(*ihcl) == "0") {
    if (spec.inputs.size() != 1) {
      return exchange->respond(HttpResponse::jsonError(
          400, codecs::strCat("raw binary request (Inference-Header-Content-Length: 0) needs a "
                              "model with exactly one input; '", d.client_model, "' has ",
                              spec.inputs.size())));
    }
    const builtin::TensorSpec& input = spec.inputs[0];
    raw = codecs::BinaryTensorDecoder::RawInputSpec{input.name, input.datatype, input.dims,
                                                    spec.max_batch_size > 0};
  }
  codecs::StatusOr<codecs::InferRequest> decoded =
      decodeHttpInfer(http, options_.limits, raw ? &*raw : nullptr);
  if (!decoded.ok()) return exchange->respond(decodeErrorResponse(http, decoded.status()));
  auto request = std::make_shared<codecs::InferRequest>(std::move(*decoded));
  request->model_name = d.upstream_model;
  request->model_version = d.upstream_version;
  auto binding = ShmBinding::bind(router_->regions(), *request);
  if (!binding.ok()) return exchange->respond(errorResponse(binding.status()));

  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  exchange->setCancelHandler([cancelled] { cancelled->store(true); });
  builtin::Execution execution = repo.infer(*request, /*streaming=*/false);
  runExecution(exchange->loop(), std::move(execution), cancelled,
               [exchange, request, binding = std::move(*binding),
                public_name = d.client_model](Emission emission) {
                 if (exchange->responded()) return;
                 codecs::Status delivered =
                     emission.response.ok() ? binding.deliver(*emission.response) : absl::OkStatus();
                 if (!emission.response.ok()) {
                   exchange->respond(errorResponse(emission.response.status()));
                 } else if (emission.empty) {
                   exchange->respond(HttpResponse::jsonError(
                       500, "the model completed the request without a response"));
                 } else if (!delivered.ok()) {
                   exchange->respond(errorResponse(delivered));
                 } else {
                   emission.response->model_name = public_name;
                   exchange->respond(inferResponse(*emission.response, *request, exchange->request()));
                 }
               });
}

}  // namespace infergate::gateway::frontends
