// ModelInfer (PROTOCOL.md 11.4): one reactor per call, routed on the peeked model
// (grpc_infer_common.h has the threading rule both reactors follow).
//
//   peek + route (grpc thread), then by the upstream's protocol:
//     builtin  decode, repository.infer(), runExecution -> encode
//     grpc     the ByteBuffer as it came (fields 1/2 rewritten when the route says so)
//              -> upstream ModelInfer -> its answer; a message naming client shared-memory
//              regions, or one big enough for the handoff to a colocated upstream, is
//              decoded instead (decoded_forward.h): the upstream never sees a client
//              region the gateway did not register with it
//     http     decode -> binary-tensor /infer -> decode -> encode (decoded_forward.h)
//   A route's mirror gets a copy in its own protocol; its answer is dropped.

#include "gateway/frontends/grpc_model_infer.h"

#include <optional>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/error_mapping.h"
#include "gateway/handoff_request.h"
#include "gateway/upstream/fleet_call.h"
#include "gateway/upstream/model_rename.h"
#include "gateway/upstream/model_rename.h"
#include "gateway/upstream/fleet_call.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

using ::grpc::ByteBuffer;

constexpr const char* kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";

bool isImmediate(const builtin::Execution& execution) {
  return execution.responses.size() == 1 && execution.responses[0].delay.count() == 0 &&
         execution.complete_after.count() == 0;
}

}  // namespace

ModelInferCall::ModelInferCall(std::shared_ptr<Shared> shared, http::EventLoop& loop,
                               const CallContext& context)
    : shared_(std::move(shared)), loop_(loop), context_(context) {}

void ModelInferCall::start(codecs::MovableByteBuffer request) {
  if (!admit(request.length())) return;
  if (codecs::Status routed = route(request); !routed.ok()) return finish(grpcStatusFor(routed));
  proceed(request);
}

void ModelInferCall::startArriving(codecs::MovableByteBuffer request, codecs::Buffer head,
                                   std::shared_ptr<http::BodyArrival> arrival) {
  if (!admit(request.length())) return;
  // A head that does not route (no route, the model's rate limit) is not answered on:
  // the whole message may name another model after its tensors. It waits for that.
  const bool routed = route(codecs::MovableByteBuffer(codecs::BufferChain(std::move(head)))).ok();
  // Sent as it arrives only where the message goes on as it is, to an upstream that asked
  // for it, through the loop's own client (whichever endpoint the fleet picks: one the
  // native client does not reach waits for the whole body in the fleet call).
  if (routed && passesThrough(request.length()) && decision_.upstream->config().stream_requests &&
      !decision_.mirror && !decision_.rewrites() && decision_.upstream->grpcOnLoop(loop_) != nullptr) {
    return passthrough(std::move(request), std::move(arrival));
  }
  // Every other path reads the message: it goes on as before once it is whole.
  hold();
  arrival->whenSettled([this, request = std::move(request), routed](bool whole) mutable {
    if (!whole) {
      finish(grpcStatusFor(http::BodyArrival::notArrived()));
    } else if (codecs::Status again = routed ? absl::OkStatus() : route(request); !again.ok()) {
      finish(grpcStatusFor(again));
    } else {
      proceed(request);
    }
    release();
  });
}

// The call's admission (its identity, whatever the message); false once it is answered.
bool ModelInferCall::admit(size_t length) {
  shared_->startInfo(context_, info_);
  info_.request_bytes = length;
  Shared::Admission admitted = shared_->admit(context_, "inference", "ModelInfer", &info_);
  if (!admitted.status.ok()) {
    finish(admitted.status);
    return false;
  }
  principal_ = std::move(admitted.principal);
  return true;
}

// The route on what `peeked` names (the whole message, or the head of one still
// arriving), with the model's rate limit: decision_ once OK.
codecs::Status ModelInferCall::route(const codecs::MovableByteBuffer& peeked) {
  codecs::StatusOr<Decision> decision = routeMessage(*shared_, peeked, context_,
                                                     Caller{principal_ ? &*principal_ : nullptr, tls::Listener::kGrpc},
                                                     &names_regions_);
  if (!decision.ok()) return decision.status();
  decision_ = std::move(*decision);
  if (shared_->recorder && shared_->recorder->active()) {
    shared_->recorder->routed(info_, seriesKeyOf(telemetry::Protocol::kGrpc, decision_));
    if (decision_.upstream->protocol() != upstream::Upstream::Protocol::kBuiltin) {
      decision_.pick.stats = info_.callStats();
    }
  }
  return absl::OkStatus();
}

// Whether the routed message of `length` bytes goes to its upstream as it came (gRPC, no
// client region, no handoff), rather than decoded.
bool ModelInferCall::passesThrough(size_t length) const {
  return decision_.upstream->protocol() == upstream::Upstream::Protocol::kGrpc && !names_regions_ &&
         !takesHandoff(*decision_.upstream, length);
}

// The routed call with its whole message.
void ModelInferCall::proceed(codecs::MovableByteBuffer& request) {
  // A request naming client regions is not mirrored: the mirror must never see them, and
  // reading them a second time would race with the client reusing its regions.
  if (decision_.mirror && !names_regions_) mirror(request);
  if (passesThrough(request.length())) return passthrough(std::move(request));
  // The other paths decode the message: one contiguous view of it.
  codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(request);
  if (!bytes.ok()) return finish(grpcStatusFor(bytes.status()));
  if (decision_.upstream->protocol() != upstream::Upstream::Protocol::kBuiltin) {
    return forwardDecodedMessage(*bytes);
  }
  codecs::StatusOr<codecs::InferRequest> decoded = decodeBound(*bytes);
  if (decoded.ok()) {
    builtin::Execution execution = decision_.upstream->repository()->infer(*decoded, /*streaming=*/false);
    if (isImmediate(execution)) {
      builtin::TimedResponse& only = execution.responses.front();
      return onEmission(Emission{std::move(only.response), true, only.from_model, false});
    }
    loop_.post([this, execution = std::move(execution)]() mutable { play(std::move(execution)); });
    return;
  }
  loop_.post([this, decoded = std::move(decoded)]() mutable { run(std::move(decoded)); });
}

void ModelInferCall::cancel() {
  // A reference for the posted finish: the upstream's cancel may answer on this thread
  // and the server let go meanwhile.
  hold();
  cancelled_->store(true);
  cancelUpstream();
  loop_.post([this] {
    finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "cancelled"));
    release();
  });
}

// Builtin upstream: the message decoded for the upstream's model, its client regions
// bound (binding_).
codecs::StatusOr<codecs::InferRequest> ModelInferCall::decodeBound(const codecs::Buffer& bytes) {
  const auto decode_start = telemetry::Clock::now();
  codecs::StatusOr<codecs::InferRequest> decoded = shared_->decoder.decode(bytes);
  info_.transcode += telemetry::Clock::now() - decode_start;
  if (!decoded.ok()) return decoded;
  decoded->model_name = decision_.upstream_model;
  decoded->model_version = decision_.upstream_version;
  codecs::StatusOr<ShmBinding> bound = ShmBinding::bind(shared_->router->regions(), *decoded);
  if (!bound.ok()) return bound.status();
  binding_ = std::move(*bound);
  return decoded;
}

// ---- gRPC upstream: passthrough ----
void ModelInferCall::passthrough(codecs::MovableByteBuffer message, std::shared_ptr<http::BodyArrival> arrival) {
  const bool rewrites = decision_.rewrites();
  if (rewrites) {
    codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(message);
    if (!bytes.ok()) return finish(grpcStatusFor(bytes.status()));
    auto rewritten = upstream::rewriteModelFields(*bytes, decision_.upstream_model, decision_.upstream_version);
    if (!rewritten.ok()) return finish(grpcStatusFor(rewritten.status()));
    message = codecs::MovableByteBuffer(std::move(*rewritten));
  }
  upstream::GrpcCallOptions options;
  options.deadline = upstreamDeadline(context_, decision_.timeout);
  options.metadata = shared_->router->forwardedMetadata(context_.clientMetadata(), true);
  // The call runs on this call's loop, through the loop's own gRPC client (at most one
  // hand-over, to the loop, instead of grpc's own between its client threads).
  options.on_loop = decision_.upstream->grpcOnLoop(loop_);
  if (options.on_loop) options.answer_progress = passthroughRelay();
  if (rewrites) {
    // Renamed before passive health hears of the attempt: an answer that cannot be (no
    // protobuf behind a grpc-status 0) counts against its endpoint. This call outlives the
    // fleet call's use of the check (hold() below).
    options.answer_ok = [this](const codecs::MovableByteBuffer& answer) {
      return renamed_.emplace(renameAnswer(answer)).ok();
    };
  }
  options.arrival = std::move(arrival);  // a message still arriving: sent as it comes
  stampTraceHeaders(options.metadata, info_);
  hold();
  auto call = upstream::fleetUnary(decision_.upstream->fleet(), kModelInferMethod, std::move(message),
                                   std::move(options), decision_.pick,
                                   [this](codecs::Status status, codecs::MovableByteBuffer answer) {
                                     onGrpcAnswer(std::move(status), std::move(answer));
                                     release();
                                   });
  setUpstreamCall([call] { call->cancel(); });
}

// The answer's progress, for a message that goes on unchanged (grpc_answer_relay.h); null
// where the server sends only whole messages or the route rewrites the model's name. As
// relayFor's, the pointer owns nothing: the client tells progress only before it delivers
// the call's end, and this call outlives that.
std::shared_ptr<upstream::AnswerProgress> ModelInferCall::passthroughRelay() {
  if (!sendsAhead() || decision_.rewrites()) return nullptr;
  GrpcAnswerRelay::Sink& sink = *this;
  passthrough_relay_.emplace(sink, static_cast<uint64_t>(shared_->options.max_send_message_bytes));
  return std::shared_ptr<upstream::AnswerProgress>(std::shared_ptr<void>(), &*passthrough_relay_);
}

// grpc thread (the upstream call's completion), the loop's (its own client's), or the
// thread that freed a slot. An answer whose message went ahead comes on the loop: only the
// worker's own client tells progress.
void ModelInferCall::onGrpcAnswer(codecs::Status status, codecs::MovableByteBuffer answer) {
  if (sent_ahead_) {
    passthrough_relay_->detach();
    if (!status.ok()) return finishUpstreamError(status);  // cuts what went
    if (!passthrough_relay_->complete(answer)) {
      return finish(::grpc::Status(::grpc::StatusCode::INTERNAL, "the upstream's answer ended short"));
    }
    info_.response_bytes = passthrough_relay_->messageBytes();
    return finish(::grpc::Status::OK);
  }
  if (!status.ok()) return finishUpstreamError(status);
  if (decision_.rewrites()) {
    codecs::StatusOr<codecs::BufferChain> renamed = renamed_ ? std::move(*renamed_) : renameAnswer(answer);
    renamed_.reset();
    if (!renamed.ok()) {
      return finish(grpcStatusFor(upstreamGarbage(decision_.upstream->name(), "response", renamed.status())));
    }
    answer = codecs::MovableByteBuffer(std::move(*renamed));
  }
  finish(::grpc::Status::OK, std::move(answer));
}

codecs::StatusOr<codecs::BufferChain> ModelInferCall::renameAnswer(const codecs::MovableByteBuffer& answer) const {
  INFERGATE_ASSIGN_OR_RETURN(codecs::Buffer flat, codecs::fromByteBuffer(answer));
  const std::string_view version = decision_.versionShown();
  return upstream::rewriteModelFields(flat, decision_.client_model,
                                      version.empty() ? std::nullopt : std::optional<std::string_view>(version));
}

// Shadow traffic toward the route's mirror, in its protocol; the answer is dropped and
// nothing of it touches this call (which may be gone by then).
void ModelInferCall::mirror(const codecs::MovableByteBuffer& message) {
  upstream::Upstream& target = *decision_.mirror;
  codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(message);
  if (!bytes.ok()) return;
  if (target.protocol() == upstream::Upstream::Protocol::kGrpc) {
    codecs::MovableByteBuffer copy(message);
    if (decision_.rewrites()) {
      auto rewritten = upstream::rewriteModelFields(*bytes, decision_.upstream_model, decision_.upstream_version);
      if (!rewritten.ok()) return;
      copy = codecs::MovableByteBuffer(std::move(*rewritten));
    }
    upstream::GrpcCallOptions options;
    options.deadline = upstreamDeadline(context_, decision_.timeout);
    upstream::fleetUnary(target.fleet(), kModelInferMethod, std::move(copy), std::move(options),
                         decision_.mirrorPick(), [](codecs::Status, codecs::MovableByteBuffer) {});
    return;
  }
  codecs::StatusOr<codecs::InferRequest> decoded = shared_->decoder.decode(*bytes);
  if (!decoded.ok()) return;
  decoded->model_name = decision_.upstream_model;
  decoded->model_version = decision_.upstream_version;
  http::EventLoop& loop = shared_->nextLoop();
  if (target.protocol() == upstream::Upstream::Protocol::kBuiltin) {
    loop.post([&loop, &target, request = std::move(*decoded)] {
      runExecution(loop, target.repository()->infer(request, /*streaming=*/false),
                   std::make_shared<std::atomic<bool>>(false), [](Emission) {});
    });
    return;
  }
  auto out = httpInferRequest(*shared_, *decoded, decision_, target, context_);
  if (!out.ok()) return;
  loop.post([&loop, &target, snapshot = decision_.snapshot, pick = decision_.mirrorPick(),
             out = std::move(*out)]() mutable {
    upstream::HttpUpstreamCallbacks ignore;
    ignore.on_complete = [](codecs::StatusOr<upstream::HttpUpstreamResponse>) {};
    upstream::fleetHttp(target.fleet(), target.http(loop), loop, std::move(out), std::move(pick),
                        std::move(ignore));
  });
}

// ---- remote upstream, decoded: HTTP always; gRPC when the message names client regions
// or takes the shared-memory handoff (gateway/decoded_forward.h) ----
void ModelInferCall::forwardDecodedMessage(const codecs::Buffer& bytes) {
  const auto decode_start = telemetry::Clock::now();
  codecs::StatusOr<codecs::InferRequest> decoded = shared_->decoder.decode(bytes);
  info_.transcode += telemetry::Clock::now() - decode_start;
  if (!decoded.ok()) return finish(grpcStatusFor(decoded.status()));
  decoded->model_name = decision_.upstream_model;
  decoded->model_version = decision_.upstream_version;
  auto request = HandoffRequest::create(shared_->router->regions(), std::move(*decoded));
  if (!request.ok()) return finish(grpcStatusFor(request.status()));
  DecodedForwardOptions options;
  options.deadline = upstreamDeadline(context_, decision_.timeout);
  options.limits = shared_->options.limits;
  options.loop = &loop_;
  hold();
  if (decision_.upstream->protocol() == upstream::Upstream::Protocol::kGrpc) {
    options.metadata = shared_->router->forwardedMetadata(context_.clientMetadata(), true);
    stampTraceHeaders(options.metadata, info_);
    // Answered on a grpc thread or the loop; cancel() from any thread, and the answer
    // still comes.
    auto call = forwardDecoded(decision_, *request, std::move(options),
                               [this](codecs::StatusOr<codecs::InferResponse> response) {
                                 onDecodedAnswer(std::move(response));
                                 release();
                               });
    setUpstreamCall([call] { call->cancel(); });
    return;
  }
  options.metadata = metadataToHttpHeaders(shared_->router->forwardedMetadata(context_.clientMetadata(), false));
  stampTraceHeaders(options.metadata, info_);
  // Toward HTTP everything runs on the loop, cancel included (no answer follows it).
  loop_.post([this, request = *request, options = std::move(options)]() mutable {
    if (cancelled_->load()) return release();
    options.http_relay = relayFor(*request);
    auto call = forwardDecoded(decision_, std::move(request), std::move(options),
                               [this](codecs::StatusOr<codecs::InferResponse> response) {
                                 decoded_answered_ = true;
                                 decoded_call_.reset();
                                 onDecodedAnswer(std::move(response));
                                 release();
                               });
    if (decoded_answered_) return;  // a refusal answers at once
    decoded_call_ = std::move(call);
    setUpstreamCall([this] {
      loop_.post([this] {
        if (!decoded_call_) return;
        decoded_call_->cancel();  // no answer follows: the reference is ours to drop
        decoded_call_.reset();
        if (relay_) relay_->detach();
        release();
      });
    });
  });
}

// The loop thread. Only where the answer's message can be exactly the upstream's tensors
// behind a head (grpc_answer_relay.h): nothing in shared memory (no retryInline, no region
// to write), no classification, the binary extension.
//
// The relay lives in this call, not on the heap: the pointer handed to the HTTP call owns
// nothing (a shared_ptr without a control block, so its copies cost no atomic operation).
// That is sound because this call outlives every use of it: the HTTP client calls a relay
// only before it completes the call, and this call is deleted by a task posted after the
// reference its HTTP call holds is released (on its answer, or after cancel(), which stops
// the client calling back).
std::shared_ptr<DecodedAnswerRelay> ModelInferCall::relayFor(const HandoffRequest& request) {
  const config::UpstreamConfig& upstream = decision_.upstream->config();
  if (!sendsAhead() || upstream.http_format != config::UpstreamConfig::HttpFormat::kBinary ||
      upstream.handoff.enabled) {
    return nullptr;
  }
  const codecs::InferRequest& r = request.request();
  for (const codecs::InferInput& input : r.inputs) {
    if (input.shared_memory) return nullptr;
  }
  for (const codecs::RequestedOutput& output : r.outputs) {
    if (output.shared_memory || output.classification > 0) return nullptr;
  }
  GrpcAnswerRelay::Sink& sink = *this;  // a private base: converted here, where it is accessible
  relay_.emplace(sink, decision_.client_model, decision_.versionShown(), shared_->options.limits,
                 static_cast<uint64_t>(shared_->options.max_send_message_bytes));
  return std::shared_ptr<DecodedAnswerRelay>(std::shared_ptr<void>(), &*relay_);
}

// The reply's initial metadata for a message that goes ahead of the call's end.
std::vector<std::pair<std::string, std::string>> ModelInferCall::aheadMetadata() const {
  std::vector<std::pair<std::string, std::string>> initial;
  if (!info_.request_id.empty()) initial.emplace_back("x-request-id", info_.request_id);
  return initial;
}

void ModelInferCall::sendAhead(codecs::BufferChain message, std::shared_ptr<http::BodyArrival> arrival) {
  if (finished_.load()) return;
  sent_ahead_ = true;
  startAhead(aheadMetadata(), codecs::MovableByteBuffer(std::move(message)), std::move(arrival));
}

void ModelInferCall::sendGrowing(size_t length) {
  if (finished_.load()) return;
  sent_ahead_ = true;
  startGrowing(aheadMetadata(), length);
}

void ModelInferCall::sendPiece(codecs::Buffer piece) {
  if (!finished_.load()) growAhead(std::move(piece));
}

void ModelInferCall::onDecodedAnswer(codecs::StatusOr<codecs::InferResponse> response) {
  if (relay_) {
    relay_->detach();
    if (sent_ahead_) {
      if (!response.ok()) return finishUpstreamError(response.status());  // cuts what went
      if (!relay_->arrivedWhole()) {
        return finish(::grpc::Status(::grpc::StatusCode::INTERNAL, "the upstream's answer ended short"));
      }
      info_.response_bytes = relay_->messageBytes();
      return finish(::grpc::Status::OK);
    }
  }
  if (!response.ok()) return finishUpstreamError(response.status());
  response->model_name = decision_.client_model;
  if (!decision_.versionShown().empty()) response->model_version = decision_.versionShown();
  const auto encode_start = telemetry::Clock::now();
  codecs::StatusOr<codecs::BufferChain> chain = shared_->encoder.encode(*response);
  info_.transcode += telemetry::Clock::now() - encode_start;
  if (!chain.ok()) return finish(grpcStatusFor(encodeFailure(chain.status())));
  finish(::grpc::Status::OK, codecs::MovableByteBuffer(std::move(*chain)));
}

// ---- builtin upstream ----
void ModelInferCall::run(codecs::StatusOr<codecs::InferRequest> request) {
  if (cancelled_->load()) return;  // cancel()'s task finishes the call
  if (!request.ok()) return finish(grpcStatusFor(request.status()));
  play(decision_.upstream->repository()->infer(*request, /*streaming=*/false));
}

// Loop thread.
void ModelInferCall::play(builtin::Execution execution) {
  if (cancelled_->load()) return;  // cancel()'s task finishes the call
  runExecution(loop_, std::move(execution), cancelled_,
               [this](Emission emission) { onEmission(std::move(emission)); });
}

// The loop thread, or the server's on the immediate path.
void ModelInferCall::onEmission(Emission emission) {
  if (finished_.load()) return;
  if (emission.empty) {  // not for a non-decoupled model; refuse rather than hang
    return finish(grpcStatusFor(codecs::internalError("the model completed without a response")));
  }
  if (!emission.response.ok()) return finish(publicGrpcStatus(emission.response.status(), decision_));
  if (codecs::Status delivered = binding_.deliver(*emission.response); !delivered.ok()) {
    return finish(grpcStatusFor(delivered));
  }
  emission.response->model_name = decision_.client_model;
  const auto encode_start = telemetry::Clock::now();
  codecs::StatusOr<codecs::BufferChain> chain = shared_->encoder.encode(*emission.response);
  info_.transcode += telemetry::Clock::now() - encode_start;
  if (!chain.ok()) return finish(grpcStatusFor(encodeFailure(chain.status())));
  finish(::grpc::Status::OK, codecs::MovableByteBuffer(std::move(*chain)));
}

// An upstream's (or the fleet's) error; an overload refusal also tells when to come back,
// as trailing metadata `retry-after` (seconds), the HTTP header's counterpart.
void ModelInferCall::finishUpstreamError(const codecs::Status& status) {
  if (std::optional<uint32_t> after = upstream::retryAfterOf(status)) {
    trailing_.emplace_back("retry-after", std::to_string(*after));
  }
  finish(publicGrpcStatus(status, decision_));
}

// Once, from whichever thread gets there first.
void ModelInferCall::finish(const ::grpc::Status& status, codecs::MovableByteBuffer message) {
  if (finished_.exchange(true)) return;
  Reply out;
  out.status = status;
  if (!info_.request_id.empty()) out.initial_metadata.emplace_back("x-request-id", info_.request_id);
  out.trailing_metadata = std::move(trailing_);
  out.sent_ahead = sent_ahead_;
  if (status.ok() && !sent_ahead_) {
    info_.response_bytes = message.length();
    out.message = std::move(message);
  }
  if (shared_->recorder) shared_->recorder->finishGrpc(info_, status.error_code(), "ModelInfer");
  reply(std::move(out));
}

void ModelInferCall::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) loop_.post([this] { delete this; });
}

void ModelInferCall::setUpstreamCall(std::function<void()> cancel) {
  std::lock_guard<std::mutex> lock(upstream_mu_);
  if (cancelled_->load()) {
    cancel();
    return;
  }
  cancel_upstream_ = std::move(cancel);
}

void ModelInferCall::cancelUpstream() {
  std::function<void()> cancel;
  {
    std::lock_guard<std::mutex> lock(upstream_mu_);
    cancel = std::move(cancel_upstream_);
  }
  if (cancel) cancel();
}

namespace {

// grpc++'s side of a ModelInfer: the reactor grpc keeps until OnDone.
class GrpcppModelInfer final : public ::grpc::ServerUnaryReactor, public ModelInferCall {
 public:
  GrpcppModelInfer(std::shared_ptr<Shared> shared, ::grpc::CallbackServerContext* context, ByteBuffer* response)
      : ModelInferCall(shared, shared->nextLoop(), call_context_),
        call_context_(*context, shared->relayed),
        context_(context),
        response_(response) {}

  void OnCancel() override { cancel(); }
  void OnDone() override { engineDone(); }

 private:
  void reply(Reply out) override {
    for (auto& [key, value] : out.initial_metadata) context_->AddInitialMetadata(key, value);
    for (auto& [key, value] : out.trailing_metadata) context_->AddTrailingMetadata(key, value);
    if (out.status.ok()) response_->Swap(&out.message.get());
    Finish(out.status);
  }

  GrpcppCallContext call_context_;
  ::grpc::CallbackServerContext* context_;  // grpc's, valid until OnDone
  ByteBuffer* response_;                    // grpc's, valid until OnDone
};

}  // namespace

::grpc::ServerUnaryReactor* InferenceService::ModelInfer(Ctx* context, const ByteBuffer* request,
                                                         ByteBuffer* response) {
  auto* reactor = new GrpcppModelInfer(shared_, context, response);
  reactor->start(codecs::MovableByteBuffer(*request));  // grpc keeps its own until OnDone
  return reactor;
}

}  // namespace infergate::gateway::frontends::grpc_detail
