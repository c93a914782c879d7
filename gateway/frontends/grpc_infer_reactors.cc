// ModelInfer and ModelStreamInfer on the raw byte path (PROTOCOL.md 11.4, 11.5), routed
// per message on the model name and version peeked from fields 1 and 2.
//
// Rule of both reactors: the reactor's state is touched, and StartRead / StartWrite /
// Finish are called, on the call's event loop (ModelInfer also finishes on grpc's thread
// where it has everything at once). grpc's reactions and upstream completions run on
// grpc's threads and post to that loop. The reactor is deleted on the loop, once grpc is
// done with it and no upstream call can still call back into it (a reference count:
// grpc's, plus one per upstream call or stream in flight); runners of builtin models
// never emit once the cancel flag is set.
//
//   ModelInfer:        peek + route (grpc thread), then by the upstream's protocol:
//                        builtin  decode, repository.infer(), runExecution -> encode
//                        grpc     the ByteBuffer as it came (fields 1/2 rewritten when the
//                                 route says so) -> upstream ModelInfer -> its answer
//                        http     decode -> binary-tensor /infer -> decode -> encode
//
//   ModelStreamInfer:  OnReadDone: peek + route (+ decode unless gRPC) -> loop: onRequest
//                        builtin  infer + runExecution; non-decoupled answers in request
//                                 order (ordered slots), decoupled as produced
//                        grpc     written to that upstream's stream (one per upstream,
//                                 opened on first use, half-closed with the client's);
//                                 its answers relayed as they come, in its own order
//                        http     one /infer exchange per request, answered as it comes
//                      pump(): one StartWrite at a time from out_; a terminal status
//                      (triton_grpc_error) or the end of the stream -> Finish

#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "codecs/binary_tensor.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/json_request_encoder.h"
#include "codecs/json_response_decoder.h"
#include "codecs/protobuf_peek.h"
#include "codecs/protobuf_wire.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/grpc_frontend_internal.h"
#include "gateway/shared_memory_refusal.h"
#include "gateway/upstream/admin_transcode.h"
#include "gateway/upstream/fleet_call.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace {

using ::grpc::ByteBuffer;
using Flag = std::shared_ptr<std::atomic<bool>>;


// An encoder failure on a response the gateway built itself is the gateway's fault
// (INTERNAL), except a response past the 2 GiB message limit (RESOURCE_EXHAUSTED).
codecs::Status encodeFailure(codecs::Status status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) return status;
  return codecs::internalError("cannot encode the response: ", codecs::messageOf(status));
}

// ---- ModelInfer ----------------------------------------------------------------------

// A call's route: the model and version peeked from the message's slices (fields 1 and
// 2; nothing joined, nothing else decoded) and the client's metadata.
codecs::StatusOr<Decision> routeMessage(const Shared& shared, const ByteBuffer& message,
                                        const ::grpc::CallbackServerContext& context) {
  std::vector<::grpc::Slice> slices;
  if (!message.Dump(&slices).ok()) return codecs::internalError("cannot read the gRPC message");
  std::vector<std::span<const uint8_t>> segments;
  segments.reserve(slices.size());
  for (const ::grpc::Slice& slice : slices) segments.emplace_back(slice.begin(), slice.size());
  codecs::StatusOr<codecs::OwnedModelRef> ref = codecs::peekModelInferRequest(std::span(segments));
  if (!ref.ok()) {
    // Proto2 groups are only read by the contiguous peek; this path is never hot.
    INFERGATE_ASSIGN_OR_RETURN(codecs::Buffer whole, codecs::fromByteBuffer(message));
    INFERGATE_ASSIGN_OR_RETURN(codecs::ModelRef contiguous, codecs::peekModelInferRequest(whole.span()));
    ref = codecs::OwnedModelRef{std::string(contiguous.model_name),
                                std::string(contiguous.model_version), contiguous.sequence};
  }
  GrpcMetadataHeaders headers(context.client_metadata());
  INFERGATE_ASSIGN_OR_RETURN(Decision d,
                             shared.router->decide(ref->model_name, ref->model_version, &headers));
  if (ref->sequence.present()) d.pick.sequence = std::move(ref->sequence);
  return d;
}

// The deadline toward the upstream: the client's, shortened by the route's timeout.
std::optional<std::chrono::system_clock::time_point> upstreamDeadline(
    const ::grpc::CallbackServerContext& context, std::chrono::milliseconds timeout) {
  std::chrono::system_clock::time_point deadline = context.deadline();
  if (timeout.count() > 0) deadline = std::min(deadline, std::chrono::system_clock::now() + timeout);
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  return deadline;
}

// An upstream's error under the client's model name (a rewrite must stay invisible).
::grpc::Status publicGrpcStatus(const codecs::Status& status, const Decision& d) {
  return grpcStatusFor(publicStatus(status, d.upstream_model, d.client_model));
}

// The model_name inside a serialized ModelStreamInferResponse (field 2, then field 1), or
// nullopt when there is none or the message is malformed.
std::optional<std::string> streamModelName(const codecs::Buffer& message) {
  std::optional<std::string> name;
  codecs::Status walked = codecs::forEachField(
      message.span(), [&](codecs::FieldTag tag, codecs::WireReader& reader) -> codecs::Status {
        if (tag.number != 2 || tag.type != codecs::WireType::kLen) return reader.skip(tag);
        INFERGATE_ASSIGN_OR_RETURN(auto inner, reader.readLengthDelimited());
        return codecs::forEachField(inner, [&](codecs::FieldTag t, codecs::WireReader& r) -> codecs::Status {
          if (t.number != 1 || t.type != codecs::WireType::kLen) return r.skip(t);
          INFERGATE_ASSIGN_OR_RETURN(auto value, r.readLengthDelimited());
          name = std::string(codecs::asChars(value));
          return absl::OkStatus();
        });
      });
  return walked.ok() ? name : std::nullopt;
}

// Whether a serialized ModelStreamInferResponse ends its request: an in-band error, or a
// response whose triton_final_response parameter is not false (non-decoupled models'
// answers are final whether they carry it or not).
bool isFinalStreamAnswer(const codecs::Buffer& message) {
  bool final = true;
  codecs::Status walked = codecs::forEachField(
      message.span(), [&](codecs::FieldTag tag, codecs::WireReader& reader) -> codecs::Status {
        if (tag.number != 2 || tag.type != codecs::WireType::kLen) return reader.skip(tag);
        INFERGATE_ASSIGN_OR_RETURN(auto inner, reader.readLengthDelimited());
        return codecs::forEachField(inner, [&](codecs::FieldTag t, codecs::WireReader& r) -> codecs::Status {
          if (t.number != 4 || t.type != codecs::WireType::kLen) return r.skip(t);
          INFERGATE_ASSIGN_OR_RETURN(auto entry, r.readLengthDelimited());
          std::string_view key;
          std::optional<bool> flag;
          INFERGATE_RETURN_IF_ERROR(codecs::forEachField(
              entry, [&](codecs::FieldTag e, codecs::WireReader& er) -> codecs::Status {
                if (e.number == 1 && e.type == codecs::WireType::kLen) {
                  INFERGATE_ASSIGN_OR_RETURN(auto k, er.readLengthDelimited());
                  key = codecs::asChars(k);
                  return absl::OkStatus();
                }
                if (e.number != 2 || e.type != codecs::WireType::kLen) return er.skip(e);
                INFERGATE_ASSIGN_OR_RETURN(auto value, er.readLengthDelimited());
                return codecs::forEachField(
                    value, [&](codecs::FieldTag v, codecs::WireReader& vr) -> codecs::Status {
                      if (v.number != 1 || v.type != codecs::WireType::kVarint) return vr.skip(v);
                      INFERGATE_ASSIGN_OR_RETURN(uint64_t b, vr.readVarint());
                      flag = b != 0;
                      return absl::OkStatus();
                    });
              }));
          if (key == codecs::param::kFinalResponse && flag) final = *flag;
          return absl::OkStatus();
        });
      });
  return !walked.ok() || final;
}

// A ModelInfer (or stream) request toward an HTTP upstream: the binary-tensor extension
// (or JSON when the upstream is configured so), with the gateway's own headers.
// A gRPC client reads raw outputs: the binary form asks for every output binary too, so
// that FP16/BF16 and non-UTF-8 BYTES come back exactly (`target`: the upstream sent to,
// the route's or its mirror).
codecs::StatusOr<upstream::HttpUpstreamRequest> httpInferRequest(
    const Shared& shared, codecs::InferRequest& request, const Decision& d,
    const upstream::Upstream& target, const ::grpc::CallbackServerContext& context) {
  codecs::JsonRequestEncoder::Options options;
  options.binary_inputs =
      target.config().http_format == config::UpstreamConfig::HttpFormat::kBinary;
  if (options.binary_inputs) request.binary_data_output = true;
  INFERGATE_ASSIGN_OR_RETURN(codecs::HttpInferBody body,
                             codecs::JsonRequestEncoder(options).encode(request));
  upstream::HttpUpstreamRequest out;
  out.method = "POST";
  out.target = modelPath(d.upstream_model, d.upstream_version, "/infer");
  out.headers = metadataToHttpHeaders(shared.router->forwardedMetadata(context.client_metadata(), false));
  out.headers.emplace_back("Content-Type", std::string(body.contentType()));
  if (body.header_length) {
    out.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*body.header_length));
  }
  out.body = std::move(body.body);
  if (auto deadline = upstreamDeadline(context, d.timeout)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline -
                                                                      std::chrono::system_clock::now());
    out.timeout = std::max(left, std::chrono::milliseconds(1));
  }
  return out;
}

// An HTTP upstream's /infer answer as an InferResponse; its error answers as the status
// the upstream meant (their own message, the code from the HTTP status).
codecs::StatusOr<codecs::InferResponse> httpInferAnswer(
    const Shared& shared, const codecs::StatusOr<upstream::HttpUpstreamResponse>& r,
    std::string_view upstream_name) {
  if (!r.ok()) return r.status();
  if (r->status != 200) return httpErrorAnswer(r->status, r->body.view(), upstream_name);
  std::optional<uint64_t> header_length;
  if (const std::string* ihcl = r->headers.find("Inference-Header-Content-Length")) {
    header_length = codecs::parseUint64(codecs::trimAscii(*ihcl));
    if (!header_length) {
      return upstreamGarbage(upstream_name, "response", codecs::invalidArgument(
                                                "Inference-Header-Content-Length '", *ihcl, "'"));
    }
  }
  auto decoded = codecs::BinaryTensorDecoder(shared.options.limits)
                     .decodeResponse(r->body, header_length, r->body.size());
  if (!decoded.ok()) return upstreamGarbage(upstream_name, "response", decoded.status());
  return decoded;
}

class ModelInferReactor final : public ::grpc::ServerUnaryReactor {
 public:
  ModelInferReactor(std::shared_ptr<Shared> shared, ::grpc::CallbackServerContext* context,
                    ByteBuffer* response)
      : shared_(std::move(shared)), loop_(shared_->nextLoop()), context_(context), response_(response) {}

  // grpc thread, before the reactor is returned: route on the peeked model; a builtin
  // upstream decodes and runs here (pure CPU, never blocking) and a response due at once
  // is finished right here, without a hop to the loop; a gRPC upstream gets the message
  // as it came (rewritten only in fields 1 and 2 when the route says so).
  void start(const ::grpc::CallbackServerContext& context, const ByteBuffer& request) {
    ::grpc::Status restricted = shared_->checkRestricted(context, "inference");
    if (!restricted.ok()) return finish(restricted);
    codecs::StatusOr<Decision> decision = routeMessage(*shared_, request, context);
    if (!decision.ok()) return finish(grpcStatusFor(decision.status()));
    decision_ = std::move(*decision);
    if (decision_.mirror) mirror(context, request);
    if (decision_.upstream->protocol() == upstream::Upstream::Protocol::kGrpc) {
      return passthrough(context, request);
    }
    // Builtin and HTTP upstreams decode the message: one contiguous view of it.
    codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(request);
    if (!bytes.ok()) return finish(grpcStatusFor(bytes.status()));
    if (decision_.upstream->protocol() == upstream::Upstream::Protocol::kHttp) {
      return overHttp(context, *bytes);
    }
    codecs::StatusOr<codecs::InferRequest> decoded = shared_->decoder.decode(*bytes);
    if (decoded.ok()) {
      decoded->model_name = decision_.upstream_model;
      decoded->model_version = decision_.upstream_version;
    }
    if (decoded.ok() && refuseSharedMemory(*decoded).ok()) {
      builtin::Execution execution =
          decision_.upstream->repository()->infer(*decoded, /*streaming=*/false);
      if (isImmediate(execution)) {
        builtin::TimedResponse& only = execution.responses.front();
        return onEmission(Emission{std::move(only.response), true, only.from_model, false});
      }
      loop_.post([this, execution = std::move(execution)]() mutable { play(std::move(execution)); });
      return;
    }
    loop_.post([this, decoded = std::move(decoded)]() mutable { run(std::move(decoded)); });
  }

  void OnCancel() override {
    cancelled_->store(true);
    cancelUpstream();
    loop_.post([this] { finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "cancelled")); });
  }

  void OnDone() override { release(); }

 private:
  // ---- gRPC upstream: passthrough ----
  void passthrough(const ::grpc::CallbackServerContext& context, const ByteBuffer& request) {
    ByteBuffer message = request;  // shares the slices
    if (decision_.rewrites()) {
      codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(request);
      if (!bytes.ok()) return finish(grpcStatusFor(bytes.status()));
      auto rewritten = upstream::rewriteModelFields(*bytes, decision_.upstream_model,
                                                    decision_.upstream_version);
      if (!rewritten.ok()) return finish(grpcStatusFor(rewritten.status()));
      message = codecs::toByteBuffer(*rewritten);
    }
    upstream::GrpcCallOptions options;
    options.deadline = upstreamDeadline(context, decision_.timeout);
    options.metadata = shared_->router->forwardedMetadata(context.client_metadata(), true);
    hold();
    auto call = upstream::fleetUnary(
        decision_.upstream->fleet(), kModelInferMethod, std::move(message), std::move(options),
        decision_.pick, [this](codecs::Status status, ByteBuffer answer) {
          onGrpcAnswer(std::move(status), std::move(answer));
          release();
        });
    setUpstreamCall([call] { call->cancel(); });
  }

  // grpc thread (the upstream call's completion), or the thread that freed a slot.
  void onGrpcAnswer(codecs::Status status, ByteBuffer answer) {
    if (!status.ok()) return finishUpstreamError(status);
    if (decision_.rewrites()) {
      auto flat = codecs::fromByteBuffer(answer);
      auto renamed =
          flat.ok() ? upstream::rewriteModelFields(
                          *flat, decision_.client_model,
                          decision_.client_version.empty()
                              ? std::nullopt
                              : std::optional<std::string_view>(decision_.client_version))
                    : codecs::StatusOr<codecs::BufferChain>(flat.status());
      if (!renamed.ok()) {
        return finish(grpcStatusFor(upstreamGarbage(decision_.upstream->name(), "response", renamed.status())));
      }
      answer = codecs::toByteBuffer(*renamed);
    }
    *response_ = std::move(answer);
    finish(::grpc::Status::OK);
  }

  // Shadow traffic toward the route's mirror, in its protocol; the answer is dropped and
  // nothing of it touches this reactor (which may be gone by then).
  void mirror(const ::grpc::CallbackServerContext& context, const ByteBuffer& message) {
    upstream::Upstream& target = *decision_.mirror;
    codecs::StatusOr<codecs::Buffer> bytes = codecs::fromByteBuffer(message);
    if (!bytes.ok()) return;
    if (target.protocol() == upstream::Upstream::Protocol::kGrpc) {
      ByteBuffer copy = message;
      if (decision_.rewrites()) {
        auto rewritten = upstream::rewriteModelFields(*bytes, decision_.upstream_model,
                                                      decision_.upstream_version);
        if (!rewritten.ok()) return;
        copy = codecs::toByteBuffer(*rewritten);
      }
      upstream::GrpcCallOptions options;
      options.deadline = upstreamDeadline(context, decision_.timeout);
      upstream::fleetUnary(target.fleet(), kModelInferMethod, std::move(copy), std::move(options),
                           decision_.mirrorPick(), [](codecs::Status, ByteBuffer) {});
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
    auto out = httpInferRequest(*shared_, *decoded, decision_, target, context);
    if (!out.ok()) return;
    loop.post([&loop, &target, snapshot = decision_.snapshot, pick = decision_.mirrorPick(),
               out = std::move(*out)]() mutable {
      upstream::HttpUpstreamCallbacks ignore;
      ignore.on_complete = [](codecs::StatusOr<upstream::HttpUpstreamResponse>) {};
      upstream::fleetHttp(target.fleet(), target.http(loop), loop, std::move(out), std::move(pick),
                          std::move(ignore));
    });
  }

  // ---- HTTP upstream: transcoded ----
  void overHttp(const ::grpc::CallbackServerContext& context, const codecs::Buffer& bytes) {
    codecs::StatusOr<codecs::InferRequest> decoded = shared_->decoder.decode(bytes);
    if (!decoded.ok()) return finish(grpcStatusFor(decoded.status()));
    decoded->model_name = decision_.upstream_model;
    decoded->model_version = decision_.upstream_version;
    if (codecs::Status shm = refuseSharedMemory(*decoded); !shm.ok()) return finish(grpcStatusFor(shm));
    auto out = httpInferRequest(*shared_, *decoded, decision_, *decision_.upstream, context);
    if (!out.ok()) return finish(grpcStatusFor(out.status()));
    hold();
    loop_.post([this, out = std::move(*out)]() mutable {
      if (cancelled_->load()) return release();
      upstream::HttpUpstreamCallbacks callbacks;
      callbacks.on_complete = [this](codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
        http_call_.reset();
        codecs::StatusOr<codecs::InferResponse> answer =
            httpInferAnswer(*shared_, r, decision_.upstream->name());
        if (!answer.ok()) {
          finishUpstreamError(answer.status());
        } else {
          answer->model_name = decision_.client_model;
          if (!decision_.client_version.empty()) answer->model_version = decision_.client_version;
          auto chain = shared_->encoder.encode(*answer);
          if (!chain.ok()) {
            finish(grpcStatusFor(encodeFailure(chain.status())));
          } else {
            *response_ = codecs::toByteBuffer(*chain);
            finish(::grpc::Status::OK);
          }
        }
        release();
      };
      http_call_ = upstream::fleetHttp(decision_.upstream->fleet(), decision_.upstream->http(loop_),
                                       loop_, std::move(out), decision_.pick, std::move(callbacks));
      // The loop cancels it (OnCancel posts here first, then cancelUpstream runs below).
      setUpstreamCall([this] {
        loop_.post([this] {
          if (!http_call_) return;
          http_call_->cancel();  // no callback follows: the reference is ours to drop
          http_call_.reset();
          release();
        });
      });
    });
  }

  // ---- builtin upstream ----
  void run(codecs::StatusOr<codecs::InferRequest> request) {
    if (cancelled_->load()) return;  // OnCancel's task finishes the call
    if (!request.ok()) return finish(grpcStatusFor(request.status()));
    codecs::Status shm = refuseSharedMemory(*request);
    if (!shm.ok()) return finish(grpcStatusFor(shm));
    play(decision_.upstream->repository()->infer(*request, /*streaming=*/false));
  }

  static bool isImmediate(const builtin::Execution& execution) {
    return execution.responses.size() == 1 && execution.responses[0].delay.count() == 0 &&
           execution.complete_after.count() == 0;
  }

  // Loop thread.
  void play(builtin::Execution execution) {
    if (cancelled_->load()) return;  // OnCancel's task finishes the call
    runExecution(loop_, std::move(execution), cancelled_,
                 [this](Emission emission) { onEmission(std::move(emission)); });
  }

  // The loop thread, or grpc's thread on the immediate path.
  void onEmission(Emission emission) {
    if (finished_.load()) return;
    if (emission.empty) {  // not for a non-decoupled model; refuse rather than hang
      return finish(grpcStatusFor(codecs::internalError("the model completed without a response")));
    }
    if (!emission.response.ok()) return finish(publicGrpcStatus(emission.response.status(), decision_));
    emission.response->model_name = decision_.client_model;
    codecs::StatusOr<codecs::BufferChain> chain = shared_->encoder.encode(*emission.response);
    if (!chain.ok()) return finish(grpcStatusFor(encodeFailure(chain.status())));
    *response_ = codecs::toByteBuffer(*chain);
    finish(::grpc::Status::OK);
  }

  // Once, from whichever thread gets there first.
  // An upstream's (or the fleet's) error; an overload refusal also tells when to come back,
  // as trailing metadata `retry-after` (seconds), the HTTP header's counterpart.
  void finishUpstreamError(const codecs::Status& status) {
    if (std::optional<uint32_t> after = upstream::retryAfterOf(status)) {
      context_->AddTrailingMetadata("retry-after", std::to_string(*after));
    }
    finish(publicGrpcStatus(status, decision_));
  }

  void finish(const ::grpc::Status& status) {
    if (finished_.exchange(true)) return;
    Finish(status);
  }

  // The reactor is deleted once grpc is done with it (OnDone) and no upstream call can
  // still call back into it; the delete runs on the loop, after every task naming it.
  void hold() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) loop_.post([this] { delete this; });
  }

  void setUpstreamCall(std::function<void()> cancel) {
    std::lock_guard<std::mutex> lock(upstream_mu_);
    if (cancelled_->load()) {
      cancel();
      return;
    }
    cancel_upstream_ = std::move(cancel);
  }
  void cancelUpstream() {
    std::function<void()> cancel;
    {
      std::lock_guard<std::mutex> lock(upstream_mu_);
      cancel = std::move(cancel_upstream_);
    }
    if (cancel) cancel();
  }

  static constexpr const char* kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";

  std::shared_ptr<Shared> shared_;
  http::EventLoop& loop_;
  ::grpc::CallbackServerContext* context_;  // grpc's, valid until OnDone
  ByteBuffer* response_;  // grpc's, valid until OnDone
  Decision decision_;
  Flag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> finished_{false};
  std::atomic<int> refs_{1};  // grpc's (OnDone) + one per upstream call in flight
  std::mutex upstream_mu_;
  std::function<void()> cancel_upstream_;
  std::shared_ptr<upstream::HttpCallHandle> http_call_;  // loop thread
};

// ---- ModelStreamInfer -----------------------------------------------------------------

// One message to send, or the status that ends the stream (triton_grpc_error).
struct Outgoing {
  ByteBuffer message;
  std::optional<::grpc::Status> terminal;
};

// A request read from the stream, decoded on grpc's thread.
struct Incoming {
  codecs::StatusOr<codecs::InferRequest> request;  // builtin and HTTP upstreams
  std::string id_on_error;
  std::optional<Decision> decision;  // unset when the request could not be routed
  ByteBuffer raw;                    // gRPC upstream: the message to send as is
};

// What an in-band error names: Triton copies these from the request.
struct RequestTag {
  std::string id, model_name, model_version;
  std::optional<uint64_t> slot;  // ordered position (non-decoupled), none when decoupled
};

class StreamInferReactor final : public ::grpc::ServerBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  StreamInferReactor(std::shared_ptr<Shared> shared, ::grpc::CallbackServerContext* context)
      : shared_(std::move(shared)), loop_(shared_->nextLoop()), context_(context) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("triton_grpc_error");
    strict_ =
        it != metadata.end() && std::string_view(it->second.data(), it->second.size()) == "true";
    ::grpc::Status restricted = shared_->checkRestricted(*context, "inference");
    if (!restricted.ok()) {  // finished before any read, as Triton
      finish_called_ = true;
      reading_ = false;
      Finish(restricted);
      return;
    }
    StartRead(&read_buf_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      loop_.post([this] {
        reading_ = false;
        half_closed_ = true;
        for (auto& [key, leg] : legs_) leg.stream->writesDone();
        pump();
      });
      return;
    }
    Incoming in = route(read_buf_);
    read_buf_.Clear();
    loop_.post([this, in = std::move(in)]() mutable {
      reading_ = false;
      onRequest(std::move(in));
    });
  }

  void OnWriteDone(bool ok) override {
    loop_.post([this, ok] {
      writing_ = false;
      if (!ok) abandon();  // the client is gone
      pump();
    });
  }

  void OnCancel() override {
    cancelled_->store(true);
    loop_.post([this] {
      abandon();
      pump();
    });
  }

  void OnDone() override { loop_.post([this] { release(); }); }

 private:
  // grpc thread: route each message on its peeked model; decode it unless it goes to a
  // gRPC upstream, which gets the bytes as they came.
  Incoming route(const ByteBuffer& message) {
    Incoming in{codecs::InferRequest(), {}, std::nullopt, {}};
    codecs::StatusOr<Decision> decision = routeMessage(*shared_, message, *context_);
    bool passthrough =
        decision.ok() && decision->upstream->protocol() == upstream::Upstream::Protocol::kGrpc &&
        !decision->rewrites();
    codecs::StatusOr<codecs::Buffer> bytes =
        passthrough ? codecs::StatusOr<codecs::Buffer>(codecs::Buffer())
                    : codecs::fromByteBuffer(message);
    if (!decision.ok() || !bytes.ok()) {
      in.request = decision.ok() ? bytes.status() : decision.status();
      if (bytes.ok() && !passthrough) in.id_on_error = peekRequestId(*bytes);
      return in;
    }
    if (decision->upstream->protocol() == upstream::Upstream::Protocol::kGrpc) {
      in.raw = message;
      if (decision->rewrites()) {
        auto rewritten = upstream::rewriteModelFields(*bytes, decision->upstream_model,
                                                      decision->upstream_version);
        if (!rewritten.ok()) {
          in.request = rewritten.status();
          in.id_on_error = peekRequestId(*bytes);
          return in;
        }
        in.raw = codecs::toByteBuffer(*rewritten);
      }
    } else {
      in.request = shared_->decoder.decode(*bytes);
      if (!in.request.ok()) {
        in.id_on_error = peekRequestId(*bytes);
      } else {
        in.request->model_name = decision->upstream_model;
        in.request->model_version = decision->upstream_version;
      }
    }
    in.decision = std::move(*decision);
    return in;
  }

  // ---- loop thread from here on ----

  // The reactor is deleted once grpc is done with it and every upstream stream has ended
  // (their callbacks name it). Loop thread.
  void hold() { ++refs_; }
  void release() {
    if (--refs_ == 0) delete this;
  }

  // One stream per gRPC upstream endpoint, opened by the first request placed there,
  // carrying all later ones; the client's triton_grpc_error choice travels with it so
  // errors end streams the same way on both legs. Each request is placed by the fleet
  // (a sequence stays on its endpoint) and holds its slot until its final answer.
  struct UpstreamLeg {
    std::shared_ptr<upstream::GrpcStream> stream;
    std::shared_ptr<upstream::Endpoint> endpoint;
    Decision decision;  // of the request that opened it
    // Upstream model name -> the name the client used, for every rewritten request sent
    // on this leg: answers carry the upstream's name in their model_name. (Two public
    // names aliasing one upstream model on one stream: the latest wins.)
    std::map<std::string, std::string, std::less<>> renames;
    // The slots of requests written whose final answer has not come back, oldest first:
    // each gets its in-band error if the leg fails.
    std::deque<upstream::EndpointLease> outstanding;
  };
  using LegKey = const upstream::Endpoint*;

  UpstreamLeg& legFor(const Decision& d, const std::shared_ptr<upstream::Endpoint>& endpoint) {
    LegKey key = endpoint.get();
    auto it = legs_.find(key);
    if (it != legs_.end()) return it->second;
    upstream::GrpcCallOptions options;
    options.metadata = shared_->router->forwardedMetadata(context_->client_metadata(), true);
    if (strict_) options.metadata.emplace_back("triton_grpc_error", "true");
    if (context_->deadline() != std::chrono::system_clock::time_point::max()) {
      options.deadline = context_->deadline();
    }
    upstream::GrpcStreamCallbacks callbacks;
    callbacks.on_message = [this, key](ByteBuffer message) {
      loop_.post([this, key, message = std::move(message)]() mutable {
        onUpstreamMessage(key, std::move(message));
      });
    };
    callbacks.on_done = [this, key](::grpc::Status status) {
      loop_.post([this, key, status = std::move(status)] {
        onUpstreamDone(key, status);
        release();
      });
    };
    hold();
    auto& leg = legs_[key];
    leg.stream = endpoint->grpc()->stream(kStreamMethod, std::move(options), std::move(callbacks));
    leg.endpoint = endpoint;
    leg.decision = d;
    return leg;
  }

  void onUpstreamMessage(LegKey key, ByteBuffer message) {
    if (finish_called_ || abandoned_) return;
    auto it = legs_.find(key);
    bool counting = it != legs_.end() && !it->second.outstanding.empty();
    bool renaming = it != legs_.end() && !it->second.renames.empty();
    // One contiguous view of the answer serves both reads (joined only when multi-slice).
    codecs::StatusOr<codecs::Buffer> flat =
        counting || renaming ? codecs::fromByteBuffer(message) : codecs::Buffer();
    if (counting && flat.ok() && isFinalStreamAnswer(*flat)) {
      it->second.outstanding.front().finish(upstream::Outcome::kSuccess);
      it->second.outstanding.pop_front();
    }
    if (renaming) {
      std::optional<std::string> upstream_model = flat.ok() ? streamModelName(*flat) : std::nullopt;
      auto hit = upstream_model ? it->second.renames.find(*upstream_model) : it->second.renames.end();
      if (hit != it->second.renames.end()) {
        auto renamed = upstream::rewriteStreamModelFields(*flat, hit->second, std::nullopt);
        if (renamed.ok()) message = codecs::toByteBuffer(*renamed);
      }
    }
    out_.push_back(Outgoing{std::move(message), std::nullopt});
    pump();
  }

  // An upstream stream ended: after the client's half-close that is its normal end; any
  // other end is reported (in-band, or as the stream's status with triton_grpc_error).
  void onUpstreamDone(LegKey key, const ::grpc::Status& status) {
    auto it = legs_.find(key);
    if (it == legs_.end()) return pump();
    UpstreamLeg leg = std::move(it->second);
    legs_.erase(it);
    const size_t unanswered = leg.outstanding.size();
    for (upstream::EndpointLease& lease : leg.outstanding) {
      lease.finish(upstream::outcomeOfGrpc(status.error_code()));
    }
    if (finish_called_ || abandoned_) return pump();
    if (!status.ok()) {
      codecs::Status error =
          upstream::toUpstreamStatus(status, leg.decision.upstream->name(), leg.endpoint->key());
      if (strict_) {
        terminal_queued_ = true;
        out_.push_back(Outgoing{ByteBuffer(), publicGrpcStatus(error, leg.decision)});
      } else {
        // One in-band error per request the leg took and never finished answering.
        codecs::InferResponse response;
        auto chain = shared_->encoder.encodeStream(&response, codecs::messageOf(error));
        for (size_t i = 0; chain.ok() && i < unanswered; ++i) {
          out_.push_back(Outgoing{codecs::toByteBuffer(*chain), std::nullopt});
        }
      }
    }
    pump();
    maybeRead();
  }

  // An HTTP upstream answers each stream request as one /infer exchange.
  // A stream's requests reach Triton in order, and a sequence's state depends on it;
  // separate HTTP exchanges on a connection pool do not keep order. So requests carrying
  // a sequence_id go one at a time (per stream, in arrival order); the others at once.
  struct QueuedHttp {
    RequestTag tag;
    upstream::HttpUpstreamRequest out;
    Decision decision;
  };

  void sendOverHttp(const RequestTag& tag, codecs::InferRequest& request, const Decision& d) {
    auto out = httpInferRequest(*shared_, request, d, *d.upstream, *context_);
    if (!out.ok()) return onEmission(tag, Emission{out.status(), true, false, false});
    bool ordered = request.parameters.find(codecs::param::kSequenceId) != nullptr;
    if (ordered && sequence_busy_) {
      sequence_queue_.push_back(QueuedHttp{tag, std::move(*out), d});
      return;
    }
    startHttp(tag, std::move(*out), d, ordered);
  }

  void startHttp(const RequestTag& tag, upstream::HttpUpstreamRequest out, const Decision& d,
                 bool ordered) {
    if (ordered) sequence_busy_ = true;
    uint64_t id = next_http_id_++;
    upstream::HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [this, tag, id, d, ordered](codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      http_calls_.erase(id);
      if (ordered) {
        sequence_busy_ = false;
        if (!sequence_queue_.empty()) {
          QueuedHttp next = std::move(sequence_queue_.front());
          sequence_queue_.pop_front();
          startHttp(next.tag, std::move(next.out), next.decision, true);
        }
      }
      codecs::StatusOr<codecs::InferResponse> answer = httpInferAnswer(*shared_, r, d.upstream->name());
      if (answer.ok()) {
        answer->model_name = d.client_model;
        if (!d.client_version.empty()) answer->model_version = d.client_version;
        // Triton marks every streamed response of a model (PROTOCOL 9.5).
        answer->parameters.set(std::string(codecs::param::kFinalResponse), true);
      }
      onEmission(tag, Emission{std::move(answer), true, true, false});
    };
    http_calls_[id] = upstream::fleetHttp(d.upstream->fleet(), d.upstream->http(loop_), loop_,
                                          std::move(out), d.pick, std::move(callbacks));
  }

  void cancelUpstreams() {
    for (auto& [key, leg] : legs_) leg.stream->cancel();
    for (auto& [id, call] : http_calls_) call->cancel();
    http_calls_.clear();
    sequence_queue_.clear();
  }

  void onRequest(Incoming in) {
    if (finish_called_ || abandoned_ || terminal_queued_) return;  // the stream is ending
    if (in.decision && in.decision->upstream->protocol() == upstream::Upstream::Protocol::kGrpc) {
      // Placed without waiting: a stream's requests keep their order, so none may sit in
      // the fleet's queue while later ones go ahead. At the cap it is refused in-band.
      codecs::StatusOr<upstream::EndpointLease> lease =
          in.decision->upstream->fleet()->tryAcquire(in.decision->pick, nullptr);
      if (lease.ok()) {
        UpstreamLeg& leg = legFor(*in.decision, lease->sharedEndpoint());
        if (in.decision->rewrites()) {
          leg.renames[in.decision->upstream_model] = in.decision->client_model;
        }
        leg.outstanding.push_back(std::move(*lease));
        leg.stream->write(std::move(in.raw));
        maybeRead();
        return;
      }
      codecs::StatusOr<codecs::Buffer> flat = codecs::fromByteBuffer(in.raw);
      if (flat.ok()) in.id_on_error = peekRequestId(*flat);
      in.request = publicStatus(lease.status(), in.decision->upstream_model, in.decision->client_model);
    }
    ++in_flight_;
    RequestTag tag;
    bool decoupled = false;
    builtin::ModelRepository* repository =
        in.decision ? in.decision->upstream->repository().get() : nullptr;
    if (in.request.ok()) {
      tag.id = in.request->id;
      tag.model_name = in.decision->client_model;
      tag.model_version = in.decision->client_version;
      if (repository != nullptr) {
        auto model = repository->find(in.request->model_name, in.request->model_version);
        decoupled = model.ok() && (*model)->spec().decoupled;
      } else {
        decoupled = true;  // an HTTP upstream's answers go out as they come
      }
    } else {
      tag.id = std::move(in.id_on_error);
    }
    if (!decoupled) {
      tag.slot = next_slot_++;
      ordered_.push_back(Slot{*tag.slot, false, {}});
    }
    codecs::Status refused =
        in.request.ok() ? refuseSharedMemory(*in.request) : in.request.status();
    if (!refused.ok()) {
      onEmission(tag, Emission{std::move(refused), true, false, false});
    } else if (repository == nullptr) {
      sendOverHttp(tag, *in.request, *in.decision);
    } else {
      builtin::Execution execution = repository->infer(*in.request, /*streaming=*/true);
      runExecution(loop_, std::move(execution), cancelled_,
                   [this, tag](Emission emission) {
                     if (emission.response.ok()) emission.response->model_name = tag.model_name;
                     onEmission(tag, std::move(emission));
                   });
    }
    maybeRead();
  }

  void onEmission(const RequestTag& tag, Emission emission) {
    if (finish_called_ || abandoned_) return;
    std::optional<Outgoing> item = toOutgoing(tag, emission);
    if (emission.final && in_flight_ > 0) --in_flight_;
    if (tag.slot) {
      Slot& slot = ordered_[*tag.slot - ordered_.front().seq];
      if (item) slot.items.push_back(std::move(*item));
      slot.done = slot.done || emission.final;
      while (!ordered_.empty() && ordered_.front().done) {
        for (Outgoing& o : ordered_.front().items) out_.push_back(std::move(o));
        ordered_.pop_front();
      }
    } else if (item) {
      out_.push_back(std::move(*item));
    }
    pump();
    maybeRead();
  }

  // The message for one emission: a response, an in-band error, or (triton_grpc_error)
  // the status that ends the stream. A bare completion sends nothing.
  std::optional<Outgoing> toOutgoing(const RequestTag& tag, const Emission& emission) {
    if (emission.empty) return std::nullopt;
    codecs::Status error;
    if (emission.response.ok()) {
      auto chain = shared_->encoder.encodeStream(&*emission.response, "");
      if (chain.ok()) return Outgoing{codecs::toByteBuffer(*chain), std::nullopt};
      error = encodeFailure(chain.status());
    } else {
      error = emission.response.status();
    }
    if (strict_) {
      terminal_queued_ = true;
      return Outgoing{ByteBuffer(), grpcStatusFor(error)};
    }
    // In-band: infer_response carries the id; an error raised by the model also the
    // request's model name and version and triton_final_response (PROTOCOL 11.5).
    codecs::InferResponse response;
    response.id = tag.id;
    if (emission.from_model) {
      response.model_name = tag.model_name;
      response.model_version = tag.model_version;
      response.parameters.set(std::string(codecs::param::kFinalResponse), true);
    }
    std::string_view message = codecs::messageOf(error);
    auto chain =
        shared_->encoder.encodeStream(&response, message.empty() ? "unknown error" : message);
    if (!chain.ok()) return Outgoing{ByteBuffer(), grpcStatusFor(encodeFailure(chain.status()))};
    return Outgoing{codecs::toByteBuffer(*chain), std::nullopt};
  }

  // One write at a time; then, with nothing left to write, the end of the stream.
  void pump() {
    if (finish_called_ || writing_) return;
    if (!out_.empty()) {
      if (out_.front().terminal) return finish(*out_.front().terminal);
      write_buf_ = std::move(out_.front().message);
      out_.pop_front();
      writing_ = true;
      StartWrite(&write_buf_);
      return;
    }
    if (abandoned_) return finish(::grpc::Status(::grpc::StatusCode::CANCELLED, "cancelled"));
    if (half_closed_ && in_flight_ == 0 && ordered_.empty() && legs_.empty()) {
      finish(::grpc::Status::OK);
    }
  }

  void maybeRead() {
    if (reading_ || half_closed_ || finish_called_ || abandoned_ || terminal_queued_) return;
    if (in_flight_ >= shared_->options.max_stream_requests_in_flight) return;
    reading_ = true;
    StartRead(&read_buf_);
  }

  // Cancelled, or a write failed: nothing more will reach the client.
  void abandon() {
    abandoned_ = true;
    cancelled_->store(true);
    cancelUpstreams();
    out_.clear();
    ordered_.clear();
  }

  void finish(::grpc::Status status) {  // by value: it may come from out_, cleared here
    finish_called_ = true;
    cancelled_->store(true);  // stops the runners still playing
    cancelUpstreams();
    out_.clear();
    ordered_.clear();
    Finish(status);
  }

  struct Slot {
    uint64_t seq;
    bool done;
    std::vector<Outgoing> items;
  };

  static constexpr const char* kStreamMethod = "/inference.GRPCInferenceService/ModelStreamInfer";

  std::shared_ptr<Shared> shared_;
  http::EventLoop& loop_;
  ::grpc::CallbackServerContext* context_;  // grpc's, valid until OnDone
  Flag cancelled_ = std::make_shared<std::atomic<bool>>(false);
  bool strict_ = false;  // triton_grpc_error: true
  int refs_ = 1;         // grpc's (OnDone) + one per upstream stream not yet done; loop thread
  std::map<LegKey, UpstreamLeg> legs_;
  std::map<uint64_t, std::shared_ptr<upstream::HttpCallHandle>> http_calls_;
  uint64_t next_http_id_ = 0;
  bool sequence_busy_ = false;  // a sequence request is out to an HTTP upstream
  std::deque<QueuedHttp> sequence_queue_;

  ByteBuffer read_buf_;  // grpc thread between StartRead and OnReadDone, else the loop's
  ByteBuffer write_buf_;
  bool reading_ = true;  // a read is outstanding
  bool writing_ = false;
  bool half_closed_ = false;
  bool abandoned_ = false;
  bool terminal_queued_ = false;
  bool finish_called_ = false;
  size_t in_flight_ = 0;  // requests not yet complete
  uint64_t next_slot_ = 0;
  std::deque<Slot> ordered_;  // non-decoupled requests not yet flushed, in request order
  std::deque<Outgoing> out_;  // ready to write, in order
};

}  // namespace

::grpc::ServerUnaryReactor* InferenceService::ModelInfer(Ctx* context, const ByteBuffer* request,
                                                         ByteBuffer* response) {
  auto* reactor = new ModelInferReactor(shared_, context, response);
  reactor->start(*context, *request);
  return reactor;
}

::grpc::ServerBidiReactor<ByteBuffer, ByteBuffer>* InferenceService::ModelStreamInfer(
    Ctx* context) {
  return new StreamInferReactor(shared_, context);
}

}  // namespace infergate::gateway::frontends::grpc_detail
