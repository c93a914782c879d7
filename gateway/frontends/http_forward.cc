// The HTTP frontend toward remote upstreams (http_frontend.h has the map):
//
//   forwardHttp   same protocol: the request goes out as it came (method, raw target,
//                 body Buffer, the headers that matter) and the answer comes back as the
//                 upstream sent it, status and body included; generate_stream is relayed
//                 piece by piece. A rewrite changes the target's model segment and, in
//                 successful answers, the name members the client reads.
//   forwardGrpc   transcoded: infer -> ModelInfer (raw contents, tensors not copied) and
//                 back to JSON / binary as the client asked (inferDecoded, in
//                 http_decoded.cc); the other model endpoints -> their typed RPC and back
//                 to Triton's JSON (admin_transcode.h).
//   mirror        a copy of an infer request to the route's mirror, answer dropped.
//   merged*       repository index and all-model statistics gathered from every upstream.
//
// Callbacks: HTTP client callbacks run on the exchange's loop; gRPC ones on grpc's
// threads and post to the loop before touching the exchange. A cancelled exchange
// cancels its upstream call; a completed call clears the cancel handler (the handler
// holds the call, the call's callback holds the exchange: that cycle is broken there).

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "codecs/compression.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/json_depth.h"
#include "codecs/json_response_decoder.h"
#include "codecs/json_response_encoder.h"
#include "codecs/protobuf_request_encoder.h"
#include "codecs/protobuf_response_decoder.h"
#include "codecs/sequence_peek.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/frontends/http_frontend_internal.h"
#include "gateway/handoff_request.h"
#include "gateway/http_upstream_infer.h"
#include "gateway/shm_binding.h"
#include "gateway/upstream/admin_transcode.h"
#include "gateway/upstream/model_rename.h"
#include "gateway/upstream/fleet_call.h"
#include "gateway/upstream/grpc_client_native.h"
#include "grpc_service.pb.h"

namespace infergate::gateway::frontends {

using http::HttpExchange;
using http::HttpResponse;
using upstream::Upstream;

namespace {

constexpr std::string_view kService = "/inference.GRPCInferenceService/";

// What a forwarded answer needs of the decision once the request is gone.
struct Names {
  std::string upstream_name;
  std::string client_model, upstream_model;
  std::string client_version;  // Decision::versionShown(): "" keeps the upstream's
  bool rewrites = false;

  explicit Names(const Decision& d)
      : upstream_name(d.upstream->name()),
        client_model(d.client_model),
        upstream_model(d.upstream_model),
        client_version(d.versionShown()),
        rewrites(d.rewrites()) {}
  // For relayAnswer() and publicStatus() alone, which read the names only when the route
  // rewrites: shared then, null (nothing copied, nothing moved with the callbacks)
  // otherwise; relayed() gives what they read.
  static std::shared_ptr<const Names> forRelay(const Decision& d) {
    return d.rewrites() ? std::make_shared<const Names>(d) : nullptr;
  }
  static const Names& relayed(const std::shared_ptr<const Names>& names) {
    static const Names* const kNone = new Names();
    return names ? *names : *kNone;
  }

 private:
  Names() = default;
};

std::string publicMessage(std::string_view message, const Names& n) {
  return gateway::publicMessage(message, n.upstream_model, n.client_model);
}

codecs::Status publicStatus(const codecs::Status& status, const Names& n) {
  return gateway::publicStatus(status, n.upstream_model, n.client_model);
}

// The JSON header of an /infer body forwarded untouched: the whole body, or its first
// Inference-Header-Content-Length bytes, decompressed first when it came compressed.
// nullopt when it cannot be read that way.
struct BodyHeader {
  codecs::Buffer body;    // holds `text`
  std::string_view text;  // "" for a raw binary body (Inference-Header-Content-Length: 0)
  size_t readable = 0;    // bytes readable from text.data() (simdjson's padding)
};

std::optional<BodyHeader> jsonHeaderOf(const http::HttpRequest& req,
                                       const codecs::DecodeLimits& limits) {
  BodyHeader h;
  h.body = req.body;
  h.readable = std::max(req.body_readable, h.body.size());
  if (const std::string_view* encoding = req.headers.find("Content-Encoding")) {
    auto parsed = codecs::parseContentEncoding(*encoding);
    if (!parsed.ok()) return std::nullopt;
    if (*parsed != codecs::ContentEncoding::kIdentity) {
      auto plain = codecs::decompress(*parsed, codecs::BufferChain(req.body),
                                      limits.max_decompressed_bytes);
      if (!plain.ok()) return std::nullopt;
      h.body = std::move(*plain);
      h.readable = h.body.size();
    }
  }
  h.text = h.body.view();
  if (const std::string_view* length = req.headers.find("Inference-Header-Content-Length")) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), n);
    if (ec != std::errc() || end != length->data() + length->size() || n > h.text.size()) {
      return std::nullopt;
    }
    h.text = h.text.substr(0, n);
  }
  return h;
}

// Whether a JSON header may name a shared-memory region, so that the gateway must decode
// the request rather than pass it through: an upstream must never be handed a client's
// region name (it would resolve it in its own table: another client's region, or the
// gateway's handoff pool). Sound by construction: the key is either written plainly or
// with a \u escape somewhere in the text, and both are caught; a false positive only
// costs a decode.
bool mayNameRegion(std::string_view json) {
  return json.find("shared_memory_region") != std::string_view::npos ||
         json.find("\\u") != std::string_view::npos;
}

// "/v2/models/<m>[/versions/<v>]/<suffix>" or the repository form, for a rewritten model.
std::string upstreamTarget(const HttpRoute& m, const Decision& d, std::string_view query) {
  std::string target;
  if (m.endpoint == HttpEndpoint::kRepositoryLoad || m.endpoint == HttpEndpoint::kRepositoryUnload) {
    target = codecs::strCat("/v2/repository/models/", d.upstream_model,
                            m.endpoint == HttpEndpoint::kRepositoryLoad ? "/load" : "/unload");
  } else {
    target = modelPath(d.upstream_model, d.upstream_version, "");
    switch (m.endpoint) {
      case HttpEndpoint::kModelReady: target += "/ready"; break;
      case HttpEndpoint::kModelInfer: target += "/infer"; break;
      case HttpEndpoint::kModelGenerate: target += "/generate"; break;
      case HttpEndpoint::kModelGenerateStream: target += "/generate_stream"; break;
      case HttpEndpoint::kModelConfig: target += "/config"; break;
      case HttpEndpoint::kModelStats: target += "/stats"; break;
      case HttpEndpoint::kModelTraceSetting: target += "/trace/setting"; break;
      default: break;
    }
  }
  if (!query.empty()) target += codecs::strCat("?", query);
  return target;
}

// Request headers an HTTP upstream must see to read the body as the client sent it.
constexpr std::string_view kBodyHeaders[] = {"Content-Type", "Content-Encoding",
                                             "Inference-Header-Content-Length",
                                             "Accept-Encoding", "endpoint-load-metrics-format"};
// Response headers relayed back to the client.
constexpr std::string_view kAnswerHeaders[] = {"Content-Type", "Content-Encoding",
                                               "Inference-Header-Content-Length", "Retry-After",
                                               "endpoint-load-metrics"};

upstream::HttpUpstreamRequest passthroughRequest(const Decision& d, const http::HttpRequest& req,
                                                 std::string target) {
  upstream::HttpUpstreamRequest out;
  out.method = req.method;
  out.target = std::move(target);
  out.headers = Router::forwardedHeaders(*d.snapshot, req.headers);
  for (std::string_view name : kBodyHeaders) {
    if (const std::string_view* v = req.headers.find(name)) out.headers.emplace_back(name, *v);
  }
  out.body = codecs::BufferChain(req.body);
  out.timeout = d.timeout;
  return out;
}

// A successful /infer answer with the client's model name (and version, when the client
// named one) in its JSON header; the binary section is kept as slices.
codecs::StatusOr<HttpResponse> renameInferAnswer(const upstream::HttpUpstreamResponse& r,
                                                 const Names& n) {
  codecs::Buffer body = r.body;
  bool inflated = false;
  if (const std::string_view* ce = r.headers.find("Content-Encoding")) {
    INFERGATE_ASSIGN_OR_RETURN(codecs::ContentEncoding encoding, codecs::parseContentEncoding(*ce));
    if (encoding != codecs::ContentEncoding::kIdentity) {
      INFERGATE_ASSIGN_OR_RETURN(body, codecs::decompress(encoding, codecs::BufferChain(body),
                                                          UINT64_MAX));
      inflated = true;
    }
  }
  size_t json_size = body.size();
  const std::string_view* ihcl = r.headers.find("Inference-Header-Content-Length");
  if (ihcl) {
    std::optional<uint64_t> n = codecs::parseUint64(codecs::trimAscii(*ihcl));
    if (!n || *n > body.size()) {
      return codecs::invalidArgument("Inference-Header-Content-Length '", *ihcl, "' is not valid");
    }
    json_size = *n;
  }
  std::optional<std::string> json =
      upstream::renameInJson(body.view().substr(0, json_size), "model_name", n.client_model);
  if (!json) return codecs::invalidArgument("the infer response has no model_name");
  if (!n.client_version.empty()) {
    if (auto versioned = upstream::renameInJson(*json, "model_version", n.client_version)) {
      json = std::move(versioned);
    }
  }
  HttpResponse out;
  out.status = r.status;
  for (std::string_view name : kAnswerHeaders) {
    if (inflated && name == "Content-Encoding") continue;
    if (name == "Inference-Header-Content-Length") continue;
    if (const std::string_view* v = r.headers.find(name)) out.header(std::string(name), std::string(*v));
  }
  if (ihcl) out.header("Inference-Header-Content-Length", std::to_string(json->size()));
  out.body.append(codecs::Buffer::fromString(std::move(*json)));
  out.body.append(body.slice(json_size, body.size() - json_size));
  return out;
}

// The 502 for an upstream's answer that could not be renamed for the client.
HttpResponse notRenamed(HttpEndpoint endpoint, const Names& n, const codecs::Status& why) {
  return errorResponse(upstreamGarbage(n.upstream_name, endpointName(endpoint), why));
}

// The upstream's answer for the client: as sent, or renamed where a rewrite applies.
HttpResponse relayAnswer(upstream::HttpUpstreamResponse r, HttpEndpoint endpoint, const Names& n) {
  auto asSent = [&] {
    HttpResponse out;
    out.status = r.status;
    out.relayed = std::move(r.headers);  // those of kAnswerHeaders go out, as they came
    out.relayed_names = kAnswerHeaders;
    out.body.append(r.body);
    return out;
  };
  if (!n.rewrites) return asSent();
  if (r.status != 200) {
    auto message = codecs::decodeJsonError(r.body.view());
    if (!message.ok()) return asSent();
    HttpResponse out = HttpResponse::jsonError(r.status, publicMessage(*message, n));
    if (const std::string_view* v = r.headers.find("Retry-After")) out.header("Retry-After", std::string(*v));
    return out;
  }
  codecs::Status failed;
  switch (endpoint) {
    case HttpEndpoint::kModelInfer: {
      auto renamed = renameInferAnswer(r, n);
      if (renamed.ok()) return std::move(*renamed);
      failed = renamed.status();
      break;
    }
    case HttpEndpoint::kModelMetadata:
    case HttpEndpoint::kModelConfig:
    case HttpEndpoint::kModelGenerate: {
      std::string_view key = endpoint == HttpEndpoint::kModelGenerate ? "model_name" : "name";
      if (auto renamed = upstream::renameInJson(r.body.view(), key, n.client_model)) {
        HttpResponse out = asSent();
        out.body = codecs::BufferChain(codecs::Buffer::fromString(std::move(*renamed)));
        return out;
      }
      failed = codecs::invalidArgument("no '", key, "' member");
      break;
    }
    case HttpEndpoint::kModelStats: {
      auto stats = upstream::modelStatisticsFromJson(r.body.view());
      if (stats.ok()) {
        for (auto& row : *stats->mutable_model_stats()) row.set_name(n.client_model);
        return HttpResponse::json(200, upstream::modelStatisticsToJson(*stats));
      }
      failed = stats.status();
      break;
    }
    default:
      return asSent();  // ready, load, unload, trace, generate_stream: no name to show
  }
  return notRenamed(endpoint, n, failed);
}

// A passthrough answer toward the client when nothing in it is rewritten: relayed as it
// arrives when the upstream client streams it (a large one), else whole, as sent.
class ExchangeRelay final : public upstream::AnswerRelay {
 public:
  ExchangeRelay(std::shared_ptr<HttpExchange> exchange, HttpEndpoint endpoint)
      : exchange_(std::move(exchange)), endpoint_(endpoint) {}

  void onHead(int status, const http::HeaderList& headers, uint64_t length) override {
    HttpResponse head;
    head.status = status;
    head.relayed = headers;
    head.relayed_names = kAnswerHeaders;
    exchange_->beginStream(std::move(head), length);
  }
  void onPiece(codecs::Buffer piece) override { exchange_->sendChunk(std::move(piece)); }
  // Each piece is dropped once written to the client's socket (or with the connection), so
  // the upstream is read no faster than the client takes the answer.
  bool takesBlocks() const override { return true; }

  void complete(codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
    exchange_->setCancelHandler(nullptr);
    // Broken mid-answer: ended short, so the connection closes after what was sent.
    if (exchange_->streaming()) return exchange_->endStream();
    const Names& n = Names::relayed(nullptr);
    if (!r.ok()) return exchange_->respond(errorResponse(publicStatus(r.status(), n)));
    exchange_->respond(relayAnswer(std::move(*r), endpoint_, n));
  }

 private:
  std::shared_ptr<HttpExchange> exchange_;
  HttpEndpoint endpoint_;
};

// Sends `request` to the gRPC upstream as `method`; `on_answer` runs on the exchange's
// loop with the parsed answer. Errors (the call's, or an unparsable answer) are answered
// here, under the client's names.
template <typename Response>
void callTyped(const std::shared_ptr<HttpExchange>& exchange,
               const Decision& d, std::string_view method,
               const google::protobuf::MessageLite& request,
               std::function<void(const std::shared_ptr<HttpExchange>&, Response&)> on_answer) {
  upstream::GrpcCallOptions options;
  options.deadline = deadlineOf(d.timeout);
  for (auto& [k, v] : Router::forwardedHeaders(*d.snapshot, exchange->request().headers)) {
    if (!k.ends_with("-bin")) options.metadata.emplace_back(std::move(k), std::move(v));
  }
  options.on_loop = d.upstream->grpcOnLoop(exchange->loop());
  grpc::ByteBuffer bytes = codecs::toByteBuffer(request);
  Names names(d);
  std::string full = codecs::strCat(kService, method);
  auto call = upstream::fleetUnary(
      d.upstream->fleet(), full, std::move(bytes), std::move(options), d.pick,
      [exchange, names, method = std::string(method), on_answer = std::move(on_answer)](
          codecs::Status status, codecs::MovableByteBuffer answer) mutable {
        exchange->loop().runInLoop([exchange, names = std::move(names), method = std::move(method),
                               on_answer = std::move(on_answer), status = std::move(status),
                               answer = std::move(answer)]() mutable {
          exchange->setCancelHandler(nullptr);
          if (exchange->responded()) return;
          if (!status.ok()) return exchange->respond(errorResponse(publicStatus(status, names)));
          Response typed;
          codecs::StatusOr<codecs::Buffer> flat = codecs::fromByteBuffer(answer);
          if (!flat.ok() || !typed.ParseFromArray(flat->data(), static_cast<int>(flat->size()))) {
            return exchange->respond(errorResponse(upstreamGarbage(
                names.upstream_name, method,
                flat.ok() ? codecs::invalidArgument("not a ", method, " response") : flat.status())));
          }
          on_answer(exchange, typed);
        });
      });
  if (!exchange->responded()) exchange->setCancelHandler([call] { call->cancel(); });  // as forwardHttp
}

HttpResponse emptyOk() {
  HttpResponse r;
  r.status = 200;
  return r;
}

// A model name that is not UTF-8 cannot travel in a protobuf string, and no gRPC server
// can serve a model of that name: the answer is the one Triton gives, on that endpoint,
// for a model it does not have (PROTOCOL.md 2.1), with the name as the client wrote it.
codecs::Status unknownOnGrpc(HttpEndpoint endpoint, std::string_view model) {
  switch (endpoint) {
    case HttpEndpoint::kModelStats:
      return codecs::invalidArgument("requested model '", model, "' is not available");
    case HttpEndpoint::kRepositoryLoad:
      return codecs::internalError("failed to load '", model,
                                   "', failed to poll from model repository");
    default:
      return unknownModel(model);
  }
}

}  // namespace

void HttpFrontend::forwardHttp(const Exchange& exchange, const Route& route, const Decision& d) {
  const http::HttpRequest& req = exchange->request();
  const HttpRoute& m = route.match;
  codecs::SequenceRef sequence;
  if (m.endpoint == HttpEndpoint::kModelInfer) {
    std::optional<BodyHeader> header = jsonHeaderOf(req, options_.limits);
    if (!header || mayNameRegion(header->text) || takesHandoff(*d.upstream, req.body.size())) {
      return inferDecoded(exchange, d);
    }
    // Not decoded here, so the upstream's parser would be the first to walk it.
    codecs::Status depth = codecs::checkJsonDepth(header->text, options_.limits.max_json_depth);
    if (!depth.ok()) return exchange->respond(errorResponse(depth));
    if (d.upstream->fleet()->affinityMatters()) {
      auto peeked = codecs::peekSequenceFromJson(header->text, header->readable, options_.limits);
      if (peeked.ok()) sequence = std::move(*peeked);
    }
  }
  std::string target = d.rewrites() ? upstreamTarget(m, d, req.query()) : req.target;
  upstream::HttpUpstreamRequest out = passthroughRequest(d, req, std::move(target));
  if (!req.bodyWhole()) out.arrival = req.arrival;
  stampTraceHeaders(out.headers, exchange->info());
  upstream::HttpUpstreamCallbacks callbacks;
  upstream::HttpAnswerCheck answer_ok;  // a renaming route's /infer only
  std::shared_ptr<const Names> names = Names::forRelay(d);
  if (m.endpoint == HttpEndpoint::kModelGenerateStream) {
    // Server-sent events go out as they arrive; an error answer (not 200) is relayed whole.
    auto streaming = std::make_shared<bool>(false);
    callbacks.on_head = [exchange, streaming](int status, const http::HeaderList& headers) {
      if (status != 200 || exchange->responded()) return;
      HttpResponse head;
      head.status = status;
      if (const std::string_view* v = headers.find("Content-Type")) head.header("Content-Type", std::string(*v));
      exchange->beginStream(std::move(head));
      *streaming = true;
    };
    // The events' pieces count against the upstream client's window until the client's
    // connection has written them: a client that reads slowly makes the upstream's events
    // wait on its socket, instead of the gateway holding them (windowed_data).
    callbacks.windowed_data = true;
    auto held = std::make_shared<codecs::BufferChain>();
    callbacks.on_data = [exchange, streaming, held](codecs::Buffer piece) {
      if (*streaming) {
        exchange->sendChunk(std::move(piece));
      } else {
        held->append(codecs::Buffer::copyOf(piece.view()));  // kept to the end: out of the window
      }
    };
    callbacks.on_complete = [exchange, streaming, held, names = std::move(names)](
                                codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      exchange->setCancelHandler(nullptr);
      if (*streaming) {
        // Broken mid-stream: the client sees the error as an event, as Triton reports
        // errors after the first event.
        if (!r.ok()) {
          exchange->sendChunk(codecs::Buffer::fromString(
              "data: " + codecs::encodeJsonError(codecs::messageOf(r.status())) + "\n\n"));
        }
        return exchange->endStream();
      }
      const Names& n = Names::relayed(names);
      if (!r.ok()) return exchange->respond(errorResponse(publicStatus(r.status(), n)));
      r->body = held->flatten();
      exchange->respond(relayAnswer(std::move(*r), HttpEndpoint::kModelGenerateStream, n));
    };
  } else if (names == nullptr) {
    // Nothing of the answer is rewritten: one still arriving once its head is in goes on
    // to the client as it comes, from the buffer the upstream client reads it into; any
    // other is relayed whole, as sent.
    auto relay = std::make_shared<ExchangeRelay>(exchange, m.endpoint);
    callbacks.relay = relay;
    callbacks.on_complete = [relay = std::move(relay)](codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      relay->complete(std::move(r));
    };
  } else {
    // A renaming route's /infer answer is renamed before passive health hears of the
    // attempt, so that one that cannot be (garbage behind a 200) counts against its
    // endpoint; on_complete, which follows at once, sends what was renamed.
    std::shared_ptr<std::optional<codecs::StatusOr<HttpResponse>>> renamed;
    if (m.endpoint == HttpEndpoint::kModelInfer) {
      renamed = std::make_shared<std::optional<codecs::StatusOr<HttpResponse>>>();
      answer_ok = [renamed, names](const upstream::HttpUpstreamResponse& r) {
        return renamed->emplace(renameInferAnswer(r, *names)).ok();
      };
    }
    callbacks.on_complete = [exchange, names = std::move(names), endpoint = m.endpoint, renamed](
                                codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      exchange->setCancelHandler(nullptr);
      const Names& n = Names::relayed(names);
      if (!r.ok()) return exchange->respond(errorResponse(publicStatus(r.status(), n)));
      if (renamed && renamed->has_value()) {
        codecs::StatusOr<HttpResponse> out = std::move(**renamed);
        return exchange->respond(out.ok() ? std::move(*out) : notRenamed(endpoint, n, out.status()));
      }
      exchange->respond(relayAnswer(std::move(*r), endpoint, n));
    };
  }
  upstream::PickContext pick = d.pick;
  if (sequence.present()) pick.sequence = std::move(sequence);
  auto call = upstream::fleetHttp(d.upstream->fleet(), d.upstream->http(exchange->loop()),
                                  exchange->loop(), std::move(out), std::move(pick),
                                  std::move(callbacks), std::move(answer_ok));
  // Not once answered already (a refusal answers at once): the handler would hold the call,
  // whose callbacks hold the exchange, and nothing would clear it.
  if (call && !exchange->responded()) exchange->setCancelHandler([call] { call->cancel(); });
}

void HttpFrontend::forwardGrpc(const Exchange& exchange, const Route& route, const Decision& d) {
  const HttpRoute& m = route.match;
  const http::HttpRequest& req = exchange->request();
  if (codecs::validUtf8(d.upstream_model) != d.upstream_model) {
    return exchange->respond(errorResponse(unknownOnGrpc(m.endpoint, d.client_model)));
  }
  std::string client_model = d.client_model;
  switch (m.endpoint) {
    case HttpEndpoint::kModelInfer:
      return inferDecoded(exchange, d);
    case HttpEndpoint::kModelMetadata: {
      inference::ModelMetadataRequest r;
      r.set_name(d.upstream_model);
      r.set_version(d.upstream_version);
      return callTyped<inference::ModelMetadataResponse>(
          exchange, d, "ModelMetadata", r,
          [client_model](const Exchange& ex, inference::ModelMetadataResponse& a) {
            a.set_name(client_model);
            ex->respond(HttpResponse::json(200, upstream::modelMetadataToJson(a)));
          });
    }
    case HttpEndpoint::kModelReady: {
      inference::ModelReadyRequest r;
      r.set_name(d.upstream_model);
      r.set_version(d.upstream_version);
      return callTyped<inference::ModelReadyResponse>(
          exchange, d, "ModelReady", r,
          [](const Exchange& ex, inference::ModelReadyResponse& a) {
            ex->respond(a.ready() ? emptyOk()
                                  : HttpResponse::jsonError(400, "Model version not ready"));
          });
    }
    case HttpEndpoint::kModelConfig: {
      inference::ModelConfigRequest r;
      r.set_name(d.upstream_model);
      r.set_version(d.upstream_version);
      return callTyped<inference::ModelConfigResponse>(
          exchange, d, "ModelConfig", r,
          [client_model](const Exchange& ex, inference::ModelConfigResponse& a) {
            a.mutable_config()->set_name(client_model);
            auto json = upstream::modelConfigToJson(a);
            ex->respond(json.ok() ? HttpResponse::json(200, std::move(*json))
                                  : errorResponse(json.status()));
          });
    }
    case HttpEndpoint::kModelStats: {
      inference::ModelStatisticsRequest r;
      r.set_name(d.upstream_model);
      r.set_version(d.upstream_version);
      return callTyped<inference::ModelStatisticsResponse>(
          exchange, d, "ModelStatistics", r,
          [client_model](const Exchange& ex, inference::ModelStatisticsResponse& a) {
            for (auto& row : *a.mutable_model_stats()) row.set_name(client_model);
            ex->respond(HttpResponse::json(200, upstream::modelStatisticsToJson(a)));
          });
    }
    case HttpEndpoint::kRepositoryLoad: {
      auto r = upstream::loadRequestFromJson(d.upstream_model, req.body.view());
      if (!r.ok()) return exchange->respond(errorResponse(r.status()));
      return callTyped<inference::RepositoryModelLoadResponse>(
          exchange, d, "RepositoryModelLoad", *r,
          [](const Exchange& ex, inference::RepositoryModelLoadResponse&) { ex->respond(emptyOk()); });
    }
    case HttpEndpoint::kRepositoryUnload: {
      auto r = upstream::unloadRequestFromJson(d.upstream_model, req.body.view());
      if (!r.ok()) return exchange->respond(errorResponse(r.status()));
      return callTyped<inference::RepositoryModelUnloadResponse>(
          exchange, d, "RepositoryModelUnload", *r,
          [](const Exchange& ex, inference::RepositoryModelUnloadResponse&) { ex->respond(emptyOk()); });
    }
    case HttpEndpoint::kModelTraceSetting: {
      auto r = upstream::traceSettingRequestFromJson(
          d.upstream_model, req.method == "GET" ? std::string_view() : req.body.view());
      if (!r.ok()) return exchange->respond(errorResponse(r.status()));
      return callTyped<inference::TraceSettingResponse>(
          exchange, d, "TraceSetting", *r,
          [](const Exchange& ex, inference::TraceSettingResponse& a) {
            ex->respond(HttpResponse::json(200, upstream::traceSettingToJson(a)));
          });
    }
    case HttpEndpoint::kModelGenerate:
    case HttpEndpoint::kModelGenerateStream:
      return exchange->respond(errorResponse(codecs::unimplemented(
          "the generate extension is HTTP only: model '", d.client_model, "' is routed to upstream '",
          d.upstream->name(), "', which speaks gRPC")));
    default:
      exchange->respond(HttpResponse::jsonError(404, "Not Found"));
  }
}

// A body still arriving goes on as it comes, by reference: toward an HTTP upstream passed
// through as it came (forwardHttp), toward a gRPC upstream as ModelInfer's raw contents;
// the worker's clients send each byte once it is in. Nothing on the way may read a tensor
// first: no mirror (it would send a copy), no handoff pool (it copies tensors into slots),
// no client region (the request is decoded against it), and toward gRPC no BYTES tensor
// (its elements are counted when decoded; "BYTES" written with a \u escape is caught by
// mayNameRegion's test).
bool HttpFrontend::sendsAsArrives(const http::HttpRequest& req, const Decision& d,
                                  http::EventLoop& loop) const {
  const Upstream::Protocol protocol = d.upstream->protocol();
  if (protocol == Upstream::Protocol::kBuiltin || d.mirror != nullptr) return false;
  if (req.headers.find("Content-Encoding") != nullptr) return false;
  // Any endpoint may take tensors into its pool (another one's refusal says nothing of it).
  if (d.upstream->config().handoff.enabled) return false;
  // Only the worker's own clients send a body as it arrives: toward an endpoint they do not
  // reach (libcurl's), the call would wait holding its slot for the whole upload.
  const std::shared_ptr<upstream::GrpcLoopClient> grpc =
      protocol == Upstream::Protocol::kGrpc ? d.upstream->grpcOnLoop(loop) : nullptr;
  if (protocol == Upstream::Protocol::kGrpc && grpc == nullptr) return false;
  std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = d.upstream->fleet()->endpoints();
  for (const std::shared_ptr<upstream::Endpoint>& e : *endpoints) {
    const config::ListenAddress& address = e->address();
    if (protocol == Upstream::Protocol::kGrpc ? !grpc->serves(address)
                                              : !d.upstream->http(loop)->sendsAsArrives(address)) {
      return false;
    }
  }
  std::optional<BodyHeader> header = jsonHeaderOf(req, options_.limits);
  if (!header || header->text.empty() || mayNameRegion(header->text)) return false;
  return protocol == Upstream::Protocol::kHttp || header->text.find("BYTES") == std::string_view::npos;
}

// Shadow traffic: the same infer request to the mirror upstream, in its protocol, the
// answer dropped. The client's request is never held up: every path is asynchronous and
// failures are only counted by the upstream.
void HttpFrontend::mirror(const Exchange& exchange, const Route& route, const Decision& d) {
  if (route.match.endpoint != HttpEndpoint::kModelInfer) return;
  const http::HttpRequest& http = exchange->request();
  // A request naming client regions is not mirrored: the mirror must never see them, and
  // reading them a second time would race with the client reusing its regions.
  std::optional<BodyHeader> header = jsonHeaderOf(http, options_.limits);
  if (!header || mayNameRegion(header->text)) return;
  Upstream& target = *d.mirror;
  switch (target.protocol()) {
    case Upstream::Protocol::kHttp: {
      std::string path = d.rewrites() ? upstreamTarget(route.match, d, http.query()) : http.target;
      upstream::HttpUpstreamCallbacks ignore;
      ignore.on_complete = [](codecs::StatusOr<upstream::HttpUpstreamResponse>) {};
      upstream::fleetHttp(target.fleet(), target.http(exchange->loop()), exchange->loop(),
                          passthroughRequest(d, http, std::move(path)),
                          d.mirrorPick(), std::move(ignore));
      return;
    }
    case Upstream::Protocol::kGrpc: {
      auto decoded = decodeHttpInfer(http, options_.limits, nullptr);
      if (!decoded.ok()) return;
      decoded->model_name = d.upstream_model;
      decoded->model_version = d.upstream_version;
      auto message = codecs::ProtobufRequestEncoder().encode(*decoded);
      if (!message.ok()) return;
      upstream::GrpcCallOptions options;
      options.deadline = deadlineOf(d.timeout);
      options.on_loop = target.grpcOnLoop(exchange->loop());
      upstream::fleetUnary(target.fleet(), codecs::strCat(kService, "ModelInfer"),
                           codecs::MovableByteBuffer(std::move(*message)), std::move(options), d.mirrorPick(),
                           [](codecs::Status, codecs::MovableByteBuffer) {});
      return;
    }
    case Upstream::Protocol::kBuiltin: {
      auto decoded = decodeHttpInfer(http, options_.limits, nullptr);
      if (!decoded.ok()) return;
      decoded->model_name = d.upstream_model;
      decoded->model_version = d.upstream_version;
      runExecution(exchange->loop(), target.repository()->infer(*decoded, /*streaming=*/false),
                   std::make_shared<std::atomic<bool>>(false), [](Emission) {});
      return;
    }
  }
}

namespace {

// The answers of every upstream to one question, merged once all are in. Loop thread.
struct Gather {
  std::shared_ptr<HttpExchange> exchange;
  std::vector<std::string> answers;
  codecs::Status error;
  size_t pending = 0;
  std::function<void(Gather&)> finish;

  void done(size_t i, codecs::StatusOr<std::string> answer) {
    if (answer.ok()) {
      answers[i] = std::move(*answer);
    } else if (error.ok()) {
      error = answer.status();
    }
    if (--pending > 0) return;
    if (!error.ok()) return exchange->respond(errorResponse(error));
    finish(*this);
  }
};

// Asks every upstream: `local` for builtin ones, `over_http` (method, target) for HTTP
// ones, `over_grpc` (method, typed request -> JSON of the typed answer) for gRPC ones.
template <typename GrpcRequest, typename GrpcResponse>
void gatherAll(const std::shared_ptr<HttpExchange>& exchange, const Router& router,
               std::function<codecs::StatusOr<std::string>(builtin::ModelRepository&)> local,
               std::string_view http_method, std::string_view http_target,
               std::string_view grpc_method, GrpcRequest grpc_request,
               std::function<std::string(const GrpcResponse&)> to_json,
               std::function<void(Gather&)> finish) {
  auto gather = std::make_shared<Gather>();
  gather->exchange = exchange;
  std::shared_ptr<const RouterSnapshot> snapshot = router.snapshot();
  const upstream::UpstreamSet& set = *snapshot->upstreams;
  gather->answers.resize(set.size());
  gather->pending = set.size();
  gather->finish = std::move(finish);
  const http::HttpRequest& req = exchange->request();
  for (size_t i = 0; i < set.size(); ++i) {
    Upstream& u = set.at(i);
    switch (u.protocol()) {
      case Upstream::Protocol::kBuiltin:
        gather->done(i, local(*u.repository()));
        break;
      case Upstream::Protocol::kHttp: {
        upstream::HttpUpstreamRequest out;
        out.method = std::string(http_method);
        out.target = std::string(http_target);
        out.headers = Router::forwardedHeaders(*snapshot, req.headers);
        out.body = codecs::BufferChain(req.body);
        out.timeout = u.timeout();
        upstream::HttpUpstreamCallbacks callbacks;
        callbacks.on_complete = [gather, i, name = u.name()](
                                    codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
          if (!r.ok()) return gather->done(i, r.status());
          if (r->status != 200) return gather->done(i, httpErrorAnswer(r->status, r->body.view(), name));
          gather->done(i, std::string(r->body.view()));
        };
        upstream::fleetHttp(u.fleet(), u.http(exchange->loop()), exchange->loop(), std::move(out),
                            upstream::PickContext{}, std::move(callbacks));
        break;
      }
      case Upstream::Protocol::kGrpc: {
        upstream::GrpcCallOptions options;
        if (u.timeout().count()) options.deadline = deadlineOf(u.timeout());
        options.on_loop = u.grpcOnLoop(exchange->loop());
        grpc::ByteBuffer bytes = codecs::toByteBuffer(grpc_request);
        upstream::fleetUnary(
            u.fleet(), codecs::strCat(kService, grpc_method), std::move(bytes), std::move(options),
            upstream::PickContext{},
            [gather, i, to_json, name = u.name(), method = std::string(grpc_method),
             loop = &exchange->loop()](codecs::Status status, codecs::MovableByteBuffer answer) {
              loop->runInLoop([gather, i, to_json, name, method, status, answer = std::move(answer)] {
                if (!status.ok()) return gather->done(i, status);
                GrpcResponse typed;
                auto flat = codecs::fromByteBuffer(answer);
                if (!flat.ok() || !typed.ParseFromArray(flat->data(), static_cast<int>(flat->size()))) {
                  return gather->done(i, upstreamGarbage(name, method, codecs::invalidArgument(
                                                                           "not a ", method, " response")));
                }
                gather->done(i, to_json(typed));
              });
            });
        break;
      }
    }
  }
}

}  // namespace

void HttpFrontend::mergedIndex(const Exchange& exchange) {
  const http::HttpRequest& req = exchange->request();
  auto index = upstream::indexRequestFromJson(req.body.view());
  if (!index.ok()) return exchange->respond(errorResponse(index.status()));
  bool ready_only = index->ready();
  gatherAll<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse>(
      exchange, *router_,
      [ready_only](builtin::ModelRepository& repo) -> codecs::StatusOr<std::string> {
        return repo.indexJson(ready_only);
      },
      "POST", "/v2/repository/index", "RepositoryIndex", *index,
      [](const inference::RepositoryIndexResponse& a) { return upstream::repositoryIndexToJson(a); },
      [](Gather& g) {
        g.exchange->respond(HttpResponse::json(200, upstream::mergeRepositoryIndexJson(g.answers)));
      });
}

void HttpFrontend::mergedStatistics(const Exchange& exchange) {
  gatherAll<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>(
      exchange, *router_,
      [](builtin::ModelRepository& repo) { return repo.statisticsJson("", ""); }, "GET",
      "/v2/models/stats", "ModelStatistics", inference::ModelStatisticsRequest(),
      [](const inference::ModelStatisticsResponse& a) { return upstream::modelStatisticsToJson(a); },
      [](Gather& g) {
        auto merged = upstream::mergeModelStatisticsJson(g.answers);
        g.exchange->respond(merged.ok() ? HttpResponse::json(200, std::move(*merged))
                                        : errorResponse(merged.status()));
      });
}

}  // namespace infergate::gateway::frontends
