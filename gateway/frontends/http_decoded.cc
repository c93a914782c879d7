// The HTTP frontend's /infer decoded and sent in the upstream's protocol (inferDecoded):
// toward gRPC always, toward HTTP when the request names client regions or the upstream
// takes tensors through the handoff. The request goes through decoded_forward.h; the
// client's side of the answer is one object per request (DecodedInferAnswer), which also
// holds the relay that may send a gRPC answer's binary outputs as they arrive
// (http_binary_relay.h).

#include <memory>
#include <optional>
#include <string>

#include "gateway/decoded_forward.h"
#include "gateway/frontends/http_binary_relay.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/frontends/http_frontend_internal.h"
#include "gateway/handoff_request.h"
#include "gateway/router.h"

namespace infergate::gateway::frontends {

using http::HttpExchange;
using http::HttpResponse;
using upstream::Upstream;

namespace {

// The client's side of an /infer decoded toward its upstream: the answer in the client's
// form once the call ends, and toward gRPC the relay that may begin it sooner
// (http_binary_relay.h), whose progress this object is told as the call's
// upstream::AnswerProgress. One object per request, so that every callback holds one
// pointer. It holds the exchange, whose cancel handler holds the call that holds this:
// respond() clears the handler, and a cancelled exchange drops it.
class DecodedInferAnswer final : public upstream::AnswerProgress {
 public:
  DecodedInferAnswer(std::shared_ptr<HttpExchange> exchange, std::shared_ptr<HandoffRequest> request,
                     const Decision& d)
      : exchange_(std::move(exchange)),
        request_(std::move(request)),
        client_model_(d.client_model),
        upstream_model_(d.upstream_model),
        client_version_(d.versionShown()) {}
  DecodedInferAnswer(const DecodedInferAnswer&) = delete;  // the relay views the names
  DecodedInferAnswer& operator=(const DecodedInferAnswer&) = delete;

  http::EventLoop& loop() const { return exchange_->loop(); }

  // Whether the answer may go on as it arrives (then make this the call's answer_progress).
  bool mayRelay(const codecs::DecodeLimits& limits) {
    relay_ = BinaryAnswerRelay::forRequest(*exchange_, request_->request(), client_model_, client_version_, limits);
    return relay_.has_value();
  }

  // The call this answers, once started: its answer refused (refuseAnswer) when the relay
  // cut the client's answer.
  void setCall(std::weak_ptr<DecodedCall> call) { call_ = std::move(call); }

  void onProgress(const codecs::MutableBuffer& message, size_t have, size_t size) override {
    if (!relay_ || !relay_->onProgress(*exchange_, message, have, size)) return;
    // Cut short: the rest of the upstream's message is wanted no more. Cancelled from a
    // task of its own, not from inside the client's progress; the call's end then finds
    // the relay ended.
    loop().post([call = call_] {
      if (std::shared_ptr<DecodedCall> c = call.lock()) c->refuseAnswer();
    });
  }

  // The loop thread.
  void respond(codecs::StatusOr<codecs::InferResponse> response) {
    exchange_->setCancelHandler(nullptr);
    if (relay_ && relay_->finish(*exchange_, response)) return;
    if (exchange_->responded()) return;
    if (!response.ok()) {
      return exchange_->respond(errorResponse(publicStatus(response.status(), upstream_model_, client_model_)));
    }
    response->model_name = client_model_;
    if (!client_version_.empty()) response->model_version = client_version_;
    const auto encode_start = telemetry::Clock::now();
    HttpResponse encoded = inferResponse(*response, request_->request(), exchange_->request());
    exchange_->info().transcode += telemetry::Clock::now() - encode_start;
    exchange_->respond(std::move(encoded));
  }

 private:
  std::shared_ptr<HttpExchange> exchange_;
  std::shared_ptr<HandoffRequest> request_;
  // What the client sees: its model name and version ("" keeps the upstream's), and the
  // upstream's name for it that errors are rewritten from.
  std::string client_model_, upstream_model_, client_version_;
  std::optional<BinaryAnswerRelay> relay_;
  std::weak_ptr<DecodedCall> call_;
};

}  // namespace

// An /infer the gateway decodes and sends in the upstream's protocol: toward gRPC always;
// toward HTTP when the request names client regions or the upstream takes tensors through
// the handoff (decoded_forward.h).
void HttpFrontend::inferDecoded(const Exchange& exchange, const Decision& d) {
  const http::HttpRequest& http = exchange->request();
  const auto decode_start = telemetry::Clock::now();
  codecs::StatusOr<codecs::InferRequest> decoded = decodeHttpInfer(http, options_.limits, nullptr);
  exchange->info().transcode += telemetry::Clock::now() - decode_start;
  if (!decoded.ok()) return exchange->respond(decodeErrorResponse(http, decoded.status()));
  decoded->model_name = d.upstream_model;
  decoded->model_version = d.upstream_version;
  auto request = HandoffRequest::create(router_->regions(), std::move(*decoded));
  if (!request.ok()) return exchange->respond(errorResponse(request.status()));

  DecodedForwardOptions options;
  options.deadline = deadlineOf(d.timeout);
  options.limits = options_.limits;
  options.loop = &exchange->loop();
  if (!http.bodyWhole()) options.arrival = http.arrival;
  const bool toward_grpc = d.upstream->protocol() == Upstream::Protocol::kGrpc;
  for (auto& [k, v] : Router::forwardedHeaders(*d.snapshot, http.headers)) {
    if (!toward_grpc || !k.ends_with("-bin")) options.metadata.emplace_back(std::move(k), std::move(v));
  }
  stampTraceHeaders(options.metadata, exchange->info());
  auto answer = std::make_shared<DecodedInferAnswer>(exchange, *request, d);
  // A large answer toward the client's binary outputs goes on as it arrives
  // (http_binary_relay.h); never one the handoff pool takes (it is read back from slots).
  if (toward_grpc && !d.upstream->config().handoff.enabled && answer->mayRelay(options_.limits)) {
    options.answer_progress = answer;
  }
  DecodedDone done = [answer](codecs::StatusOr<codecs::InferResponse> response) {
    answer->respond(std::move(response));
  };
  if (toward_grpc) {  // answered on a grpc thread (or on the loop, by its own client)
    done = [answer](codecs::StatusOr<codecs::InferResponse> response) {
      answer->loop().runInLoop([answer, response = std::move(response)]() mutable {
        answer->respond(std::move(response));
      });
    };
  }
  auto call = forwardDecoded(d, *request, std::move(options), std::move(done));
  answer->setCall(call);
  // Not once answered already (see forwardHttp).
  if (!exchange->responded()) exchange->setCancelHandler([call] { call->cancel(); });
}

}  // namespace infergate::gateway::frontends
