// POST /v2/models/<m>[/versions/<v>]/infer: decode (JSON, binary extension, raw binary,
// gzip/deflate), run on the builtin model, encode in the client's form (JSON or binary
// outputs, compressed when Accept-Encoding asks).

#include "codecs/binary_tensor.h"
#include "codecs/compression.h"
#include "codecs/json_response_encoder.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/frontends/http_routes.h"
#include "gateway/shared_memory_refusal.h"

namespace infergate::gateway::frontends {

using http::HttpExchange;
using http::HttpResponse;

namespace {

// The request's Inference-Header-Content-Length, parsed as Triton does (int32, >= 0).
codecs::StatusOr<std::optional<uint64_t>> headerLength(const http::HttpRequest& request) {
  const std::string* value = request.headers.find("Inference-Header-Content-Length");
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
  if (const std::string* accept = http.headers.find("Accept-Encoding")) {
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

}  // namespace

void HttpFrontend::infer(const std::shared_ptr<HttpExchange>& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  const http::HttpRequest& http = exchange->request();
  auto model = repository_->find(m.model, m.version);
  if (!model.ok()) return exchange->respond(errorResponse(model.status()));
  const builtin::ModelSpec& spec = (*model)->spec();
  if (spec.decoupled) {
    return exchange->respond(errorResponse(builtin::decoupledUnaryError(spec, builtin::UnaryPath::kHttp)));
  }

  codecs::Buffer body = http.body;
  size_t readable = http.body_readable;
  if (const std::string* ce = http.headers.find("Content-Encoding")) {
    auto encoding = codecs::parseContentEncoding(*ce);
    if (!encoding.ok()) {
      HttpResponse r = errorResponse(encoding.status());
      r.header("Accept-Encoding", "gzip, deflate");
      return exchange->respond(std::move(r));
    }
    if (*encoding != codecs::ContentEncoding::kIdentity) {
      auto inflated = codecs::decompress(*encoding, codecs::BufferChain(body),
                                         options_.limits.max_decompressed_bytes);
      if (!inflated.ok()) return exchange->respond(errorResponse(inflated.status()));
      body = std::move(*inflated);
      readable = body.size();
    }
  }

  auto header_length = headerLength(http);
  if (!header_length.ok()) return exchange->respond(errorResponse(header_length.status()));
  codecs::BinaryTensorDecoder decoder(options_.limits);
  codecs::StatusOr<codecs::InferRequest> decoded = codecs::InferRequest();
  if (*header_length && **header_length == 0) {
    if (spec.inputs.size() != 1) {
      return exchange->respond(HttpResponse::jsonError(
          400, codecs::strCat("raw binary request (Inference-Header-Content-Length: 0) needs a "
                              "model with exactly one input; '", spec.name, "' has ",
                              spec.inputs.size())));
    }
    const builtin::TensorSpec& input = spec.inputs[0];
    decoded = decoder.decodeRawRequest(
        body, {input.name, input.datatype, input.dims, spec.max_batch_size > 0});
  } else {
    decoded = decoder.decodeRequest(body, *header_length, readable);
  }
  if (!decoded.ok()) return exchange->respond(errorResponse(decoded.status()));
  auto request = std::make_shared<codecs::InferRequest>(std::move(*decoded));
  request->model_name = m.model;
  request->model_version = m.version;
  if (auto refused = refuseSharedMemory(*request); !refused.ok()) {
    return exchange->respond(errorResponse(refused));
  }

  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  exchange->setCancelHandler([cancelled] { cancelled->store(true); });
  builtin::Execution execution = repository_->infer(*request, /*streaming=*/false);
  runExecution(exchange->loop(), std::move(execution), cancelled,
               [exchange, request](Emission emission) {
                 if (exchange->responded()) return;
                 if (!emission.response.ok()) {
                   exchange->respond(errorResponse(emission.response.status()));
                 } else if (emission.empty) {
                   exchange->respond(HttpResponse::jsonError(
                       500, "the model completed the request without a response"));
                 } else {
                   exchange->respond(inferResponse(*emission.response, *request, exchange->request()));
                 }
               });
}

}  // namespace infergate::gateway::frontends
