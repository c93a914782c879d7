#include "gateway/decoded_forward.h"

#include <mutex>
#include <optional>
#include <utility>

#include "codecs/grpc_byte_buffer.h"
#include "codecs/protobuf_request_encoder.h"
#include "codecs/protobuf_response_decoder.h"
#include "codecs/sequence_peek.h"
#include "gateway/http_upstream_infer.h"
#include "gateway/upstream/fleet_call.h"

namespace infergate::gateway {
namespace {

constexpr std::string_view kModelInfer = "/inference.GRPCInferenceService/ModelInfer";

class Call final : public DecodedCall, public std::enable_shared_from_this<Call> {
 public:
  Call(const Decision& d, std::shared_ptr<HandoffRequest> request, DecodedForwardOptions options,
       DecodedDone done)
      : decision_(d), request_(std::move(request)), options_(std::move(options)), done_(std::move(done)) {}

  void start() {
    upstream::PickContext pick = decision_.pick;
    if (codecs::SequenceRef s = codecs::sequenceOf(request_->request().parameters); s.present()) {
      pick.sequence = std::move(s);
    }
    if (decision_.upstream->protocol() == upstream::Upstream::Protocol::kGrpc) {
      startGrpc(std::move(pick));
    } else {
      startHttp(std::move(pick));
    }
  }

  void cancel() override { stop(false); }
  void refuseAnswer() override { stop(true); }

 private:
  void stop(bool refused) {
    std::shared_ptr<upstream::GrpcCallHandle> grpc;
    std::shared_ptr<upstream::HttpCallHandle> http;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      refused_ = refused_ || refused;
      grpc = grpc_;
      http = std::move(http_);
    }
    if (grpc) stopGrpc(*grpc, refused);
    if (http) http->cancel();  // no callback follows; no relay toward HTTP cuts on garbage
  }

  // An attempt's request is built (the upstream side's encode, and its handoff): its time
  // counts as transcoding, and whether it uses shared memory is the request's.
  static void noteBuilt(telemetry::CallStats* stats, const HandoffRequest& request,
                        telemetry::Clock::time_point started) {
    if (stats == nullptr) return;
    stats->transcode += telemetry::Clock::now() - started;
    stats->shm_handoff = stats->shm_handoff || request.attemptUsesSharedMemory();
  }

  void startGrpc(upstream::PickContext pick) {
    upstream::GrpcCallOptions options;
    options.deadline = options_.deadline;
    options.metadata = options_.metadata;
    // The loop's own gRPC client (the call moves to the loop when started elsewhere).
    if (options_.loop != nullptr) options.on_loop = decision_.upstream->grpcOnLoop(*options_.loop);
    options.arrival = options_.arrival;
    options.answer_progress = options_.answer_progress;
    auto self = shared_from_this();
    // The answer is decoded before passive health hears of the attempt, so that garbage
    // behind a grpc-status 0 counts against its endpoint; onGrpc takes the result. Both
    // run on the thread that settles the attempt, one after the other (fleet_call.h), and
    // the fleet call holds this through `build`: two plain pointers, which std::function
    // keeps without an allocation.
    options.answer_ok = [this, stats = pick.stats.get()](const codecs::MovableByteBuffer& answer) {
      return read_.emplace(readAnswer(answer, stats)).ok();
    };
    auto build = [self, stats = pick.stats](
                     upstream::Endpoint& e) -> codecs::StatusOr<codecs::MovableByteBuffer> {
      const auto started = telemetry::Clock::now();
      INFERGATE_ASSIGN_OR_RETURN(codecs::InferRequest * r, self->request_->forEndpoint(e));
      INFERGATE_ASSIGN_OR_RETURN(codecs::BufferChain message, codecs::ProtobufRequestEncoder().encode(*r));
      noteBuilt(stats.get(), *self->request_, started);
      // Bytes of a body still arriving are referenced, never copied (even the few of a
      // small tensor), should grpc's slices be made of them: they are read when sent.
      const http::BodyArrival* arrival = self->options_.arrival.get();
      if (arrival != nullptr && !arrival->complete()) {
        return codecs::MovableByteBuffer(std::move(message), {arrival->data(), static_cast<size_t>(arrival->size())});
      }
      return codecs::MovableByteBuffer(std::move(message));
    };
    uint64_t attempt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      attempt = ++attempts_;
    }
    auto call = upstream::fleetUnaryFor(
        decision_.upstream->fleet(), kModelInfer, std::move(build), std::move(options), pick,
        [self, pick, attempt](codecs::Status status, codecs::MovableByteBuffer answer) {
          self->onGrpc(std::move(status), answer, pick, attempt);
        });
    std::lock_guard<std::mutex> lock(mu_);
    if (answered_ >= attempt) return;  // answered already (a refusal comes back at once)
    grpc_ = std::move(call);
    if (cancelled_) stopGrpc(*grpc_, refused_);
  }

  static void stopGrpc(upstream::GrpcCallHandle& call, bool refused) {
    if (refused) {
      call.refuseAnswer();
    } else {
      call.cancel();
    }
  }

  // grpc thread (or the loop's, by its own client). The fleet call holds `build`, which holds this: dropped here, or neither
  // would ever be freed.
  void onGrpc(codecs::Status status, const codecs::MovableByteBuffer& answer, const upstream::PickContext& pick,
              uint64_t attempt) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      grpc_.reset();
      answered_ = attempt;
    }
    if (!status.ok()) {
      if (!isCancelled() && request_->retryInline(status)) return startGrpc(pick);
      return deliver(std::move(status));
    }
    // Read in place (answer_ok read it already, unless the call had no fleet check): the
    // response moves once, into the delivery.
    if (!read_) read_.emplace(readAnswer(answer, pick.stats.get()));
    if (!read_->ok()) {
      codecs::Status error = upstreamGarbage(decision_.upstream->name(), "ModelInfer response", read_->status());
      read_.reset();
      return deliver(std::move(error));
    }
    finishAndDeliver(std::move(**read_));
    read_.reset();
  }

  // The upstream's ModelInferResponse decoded, its time counted as transcoding.
  codecs::StatusOr<codecs::InferResponse> readAnswer(const codecs::MovableByteBuffer& answer,
                                                     telemetry::CallStats* stats) const {
    const auto decode_start = telemetry::Clock::now();
    codecs::StatusOr<codecs::Buffer> flat = codecs::fromByteBuffer(answer);
    codecs::StatusOr<codecs::InferResponse> response =
        flat.ok() ? codecs::ProtobufResponseDecoder(options_.limits).decode(*flat) : flat.status();
    if (stats != nullptr) stats->transcode += telemetry::Clock::now() - decode_start;
    return response;
  }

  void startHttp(upstream::PickContext pick) {
    if (options_.arrival != nullptr && !options_.arrival->complete()) {
      // The HTTP clients send whole bodies: this one waits for the rest of its own.
      return options_.arrival->whenSettled([self = shared_from_this(), pick](bool whole) mutable {
        if (!whole) return self->deliver(http::BodyArrival::notArrived());
        self->startHttp(std::move(pick));
      });
    }
    http::EventLoop& loop = *options_.loop;
    auto self = shared_from_this();
    auto build = [self, stats = pick.stats](upstream::Endpoint& e) -> codecs::StatusOr<upstream::HttpUpstreamRequest> {
      const auto started = telemetry::Clock::now();
      INFERGATE_ASSIGN_OR_RETURN(codecs::InferRequest * r, self->request_->forEndpoint(e));
      codecs::StatusOr<upstream::HttpUpstreamRequest> out = httpUpstreamInfer(
          *r, self->decision_, *self->decision_.upstream, self->options_.metadata,
          self->options_.deadline);
      noteBuilt(stats.get(), *self->request_, started);
      return out;
    };
    uint64_t attempt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      attempt = ++attempts_;
    }
    upstream::HttpUpstreamCallbacks callbacks;
    callbacks.relay = options_.http_relay;
    // As for gRPC (startGrpc): a 200 is read before passive health hears of the attempt,
    // and onHttp, which follows at once on the loop thread, takes what was read.
    upstream::HttpAnswerCheck answer_ok = [this, stats = pick.stats.get()](
                                              const upstream::HttpUpstreamResponse& answer) {
      const DecodedAnswerRelay* relay = options_.http_relay.get();
      if (relay != nullptr && relay->sentOn()) return true;  // checked as it went on
      return read_.emplace(readHttpAnswer(answer, stats)).ok();
    };
    callbacks.on_complete = [self, pick, attempt](codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      self->onHttp(r, pick, attempt);
    };
    auto call = upstream::fleetHttpFor(decision_.upstream->fleet(), decision_.upstream->http(loop),
                                       loop, std::move(build), pick, std::move(callbacks), std::move(answer_ok));
    std::lock_guard<std::mutex> lock(mu_);
    if (answered_ >= attempt) return;  // answered already (a refusal comes back at once)
    http_ = std::move(call);
  }

  // The loop thread.
  void onHttp(const codecs::StatusOr<upstream::HttpUpstreamResponse>& r,
              const upstream::PickContext& pick, uint64_t attempt) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      http_.reset();
      answered_ = attempt;
    }
    const DecodedAnswerRelay* relay = options_.http_relay.get();
    if (relay != nullptr && relay->sentOn()) {
      if (!r.ok()) return deliver(r.status());
      return deliver(codecs::InferResponse{});  // the client's side has the answer already
    }
    if (r.ok() && !read_) read_.emplace(readHttpAnswer(*r, pick.stats.get()));
    if (!r.ok() || !read_->ok()) {
      codecs::Status error = r.ok() ? read_->status() : r.status();
      read_.reset();
      if (!isCancelled() && request_->retryInline(error)) return startHttp(pick);
      return deliver(std::move(error));
    }
    finishAndDeliver(std::move(**read_));  // in place, as onGrpc
    read_.reset();
  }

  // The upstream's answer (or error) read as the client's, from the body a relay gathered
  // when it took one; its time counted as transcoding.
  codecs::StatusOr<codecs::InferResponse> readHttpAnswer(const upstream::HttpUpstreamResponse& r,
                                                         telemetry::CallStats* stats) const {
    const auto decode_start = telemetry::Clock::now();
    std::optional<upstream::HttpUpstreamResponse> gathered;
    if (const DecodedAnswerRelay* relay = options_.http_relay.get(); relay != nullptr) {
      if (std::optional<codecs::Buffer> body = relay->body()) {
        gathered.emplace(r);
        gathered->body = std::move(*body);
      }
    }
    codecs::StatusOr<codecs::InferResponse> response =
        httpUpstreamInferAnswer(options_.limits, gathered ? *gathered : r, decision_.upstream->name());
    if (stats != nullptr) stats->transcode += telemetry::Clock::now() - decode_start;
    return response;
  }

  void finishAndDeliver(codecs::InferResponse response) {
    if (codecs::Status finished = request_->finish(response); !finished.ok()) {
      return deliver(std::move(finished));
    }
    deliver(std::move(response));
  }

  bool isCancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }

  void deliver(codecs::StatusOr<codecs::InferResponse> response) {
    DecodedDone done = std::move(done_);
    done_ = nullptr;
    options_.answer_progress.reset();  // no attempt follows; they may hold the client's side
    options_.http_relay.reset();
    if (done) done(std::move(response));
  }

  Decision decision_;
  std::shared_ptr<HandoffRequest> request_;
  DecodedForwardOptions options_;
  DecodedDone done_;
  std::mutex mu_;
  bool cancelled_ = false;
  bool refused_ = false;  // refuseAnswer(): a gRPC call started after it is refused too
  uint64_t attempts_ = 0;  // fleet calls started (a second one sends everything inline)
  uint64_t answered_ = 0;  // the last of them answered
  std::shared_ptr<upstream::GrpcCallHandle> grpc_;
  std::shared_ptr<upstream::HttpCallHandle> http_;
  // The answer of the attempt that ended OK (gRPC) or with a 200 (HTTP), read for passive
  // health (answer_ok) until onGrpc or onHttp takes it: the attempt's settling thread only.
  std::optional<codecs::StatusOr<codecs::InferResponse>> read_;
};

}  // namespace

std::shared_ptr<DecodedCall> forwardDecoded(const Decision& d, std::shared_ptr<HandoffRequest> request,
                                            DecodedForwardOptions options, DecodedDone done) {
  auto call = std::make_shared<Call>(d, std::move(request), std::move(options), std::move(done));
  call->start();
  return call;
}

}  // namespace infergate::gateway
