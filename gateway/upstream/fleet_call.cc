#include "gateway/upstream/fleet_call.h"

#include <mutex>

#include "gateway/upstream/grpc_client_native.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway::upstream {
namespace {

using Clock = std::chrono::steady_clock;

// Whether one more attempt may go: retries left, no sequence, time left, and the budget
// (consumed here: call only with an attempt to make).
bool mayRetry(UpstreamFleet& fleet, const PickContext& context, uint32_t retries_done,
              const std::optional<std::chrono::system_clock::time_point>& deadline) {
  if (retries_done >= fleet.config().retry.max_retries) return false;
  if (context.sequence && context.sequence->present()) return false;
  if (deadline && std::chrono::system_clock::now() >= *deadline) return false;
  if (Clock::now() >= context.deadline) return false;
  bool allowed = fleet.retryBudget().tryRetry(Clock::now());
  if (!allowed) fleet.countRetry(false);
  return allowed;
}

// The next attempt's lease on another endpoint than `tried`, counted as a retry.
std::optional<EndpointLease> retryLease(UpstreamFleet& fleet, const PickContext& context,
                                        const Endpoint* tried) {
  codecs::StatusOr<EndpointLease> next = fleet.tryAcquire(context, tried);
  if (!next.ok()) return std::nullopt;
  fleet.countRetry(true);
  return std::move(*next);
}

// An attempt about to go to `endpoint` (the `n`th of its call): the first one ends the
// call's wait for a slot (the fleet's queue-wait histogram, and the call's stats); each
// names its endpoint in the stats. Returns the attempt's start.
Clock::time_point noteAttempt(UpstreamFleet& fleet, const PickContext& context,
                              const Endpoint& endpoint, Clock::time_point call_started,
                              uint64_t n, bool placed_at_start = false) {
  // A lease granted inside start() waited for nothing: no second clock read.
  Clock::time_point now = placed_at_start ? call_started : Clock::now();
  if (n == 1) fleet.observeQueueWait(now - call_started);
  if (telemetry::CallStats* stats = context.stats.get()) {
    if (n == 1) stats->queue_wait = now - call_started;
    stats->endpoint = endpoint.key();
    stats->attempts = static_cast<uint32_t>(n);
  }
  return now;
}

// ---- gRPC ----

class FleetUnaryCall final : public GrpcCallHandle,
                             public std::enable_shared_from_this<FleetUnaryCall> {
 public:
  FleetUnaryCall(std::shared_ptr<UpstreamFleet> fleet, std::string_view method,
                 codecs::MovableByteBuffer request, GrpcRequestFor build, GrpcCallOptions options,
                 PickContext context, FleetUnaryDone done)
      : fleet_(std::move(fleet)),
        method_(method),
        request_(std::move(request)),
        build_(std::move(build)),
        options_(std::move(options)),
        context_(std::move(context)),
        done_(std::move(done)) {}

  void start() {
    started_at_ = Clock::now();
    fleet_->retryBudget().recordRequest(started_at_);
    uint64_t waiter = fleet_->acquire(
        context_,
        [self = shared_from_this()](codecs::StatusOr<EndpointLease> lease) {
          if (!lease.ok()) return self->deliver(lease.status(), {});
          self->attempt(std::move(*lease));
        },
        started_at_);
    std::lock_guard<std::mutex> lock(mu_);
    waiter_ = waiter;
  }

  void cancel() override {
    std::shared_ptr<GrpcCallHandle> inner;
    uint64_t waiter;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      inner = inner_;
      waiter = waiter_;
    }
    if (inner) return inner->cancel();
    // Still waiting for a slot: leave the queue and answer now.
    if (waiter != 0 && fleet_->abandon(waiter)) {
      deliver(absl::CancelledError("the request was cancelled while waiting for a slot"), {});
    }
  }

  void refuseAnswer() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      refused_ = true;
    }
    cancel();
  }

 private:
  void attempt(EndpointLease lease) {
    // The worker's own client where the caller gave one and it reaches this endpoint; its
    // calls start on its loop (a slot freed on another thread hands the lease over there).
    // A body still arriving is the loop's to read, and only that client sends it as it
    // comes: any other waits until it is whole.
    const bool native = options_.on_loop && options_.on_loop->serves(lease.endpoint().address());
    const bool on_loop = native || (options_.arrival != nullptr && options_.on_loop);
    if (on_loop && !options_.on_loop->loop().inLoopThread()) {
      options_.on_loop->loop().post(
          [self = shared_from_this(), lease = std::make_shared<EndpointLease>(std::move(lease))]() mutable {
            self->attempt(std::move(*lease));
          });
      return;
    }
    if (!native && options_.arrival != nullptr && !options_.arrival->complete()) {
      if (options_.arrival->failed()) {
        lease.finish(Outcome::kNeutral);
        return deliver(http::BodyArrival::notArrived(), {});
      }
      options_.arrival->whenSettled(
          [self = shared_from_this(), lease = std::make_shared<EndpointLease>(std::move(lease))](bool) mutable {
            self->attempt(std::move(*lease));
          });
      return;
    }
    // grpc++'s client reads the request as a grpc::ByteBuffer, made from a chain the first
    // time it is asked for: made here, before the section below, which orders this
    // attempt before the next one for a thread sanitizer too.
    if (!native && !build_) (void)request_.grpc();
    uint64_t id;
    GrpcUpstreamClient* client = lease.endpoint().grpc();
    Endpoint* endpoint = &lease.endpoint();
    {
      // Under the mutex although attempts follow one another: the answer comes on a grpc
      // thread, ordered after this by grpc's own (uninstrumented) locks, which a thread
      // sanitizer cannot see.
      std::lock_guard<std::mutex> lock(mu_);
      id = ++attempts_;
      sent_at_ = noteAttempt(*fleet_, context_, *endpoint, started_at_, id);
      if (cancelled_) {
        id = 0;
      } else {
        lease_ = std::move(lease);
      }
    }
    if (id == 0) {
      lease.finish(Outcome::kNeutral);
      return deliver(absl::CancelledError("the request was cancelled"), {});
    }
    // The clients send from the message's slices: the request is lent, not copied, and
    // stays for a retry.
    const codecs::MovableByteBuffer* request = &request_;
    codecs::MovableByteBuffer built_request;
    if (build_) {
      // Outside the mutex: the build may copy tensors into a handoff pool.
      codecs::StatusOr<codecs::MovableByteBuffer> built = build_(*endpoint);
      if (!built.ok()) {
        EndpointLease taken;
        {
          std::lock_guard<std::mutex> lock(mu_);
          taken = std::move(lease_);
        }
        taken.finish(Outcome::kNeutral);
        return deliver(built.status(), {});
      }
      built_request = std::move(*built);
      request = &built_request;
    }
    std::shared_ptr<GrpcCallHandle> inner;
    if (native) {
      inner = options_.on_loop->unary(endpoint->address(), method_, *request, options_,
                                      [self = shared_from_this()](codecs::Status status,
                                                                  codecs::MovableByteBuffer answer) {
                                        const Outcome outcome = outcomeOf(status);
                                        self->settle(std::move(status), std::move(answer), outcome);
                                      });
    } else {
      // `endpoint` outlives the answer: the attempt's lease holds it until settle().
      inner = client->unary(method_, *request, options_,
                            [self = shared_from_this(), endpoint](grpc::Status status, grpc::ByteBuffer answer) {
                              self->onAnswer(std::move(status),
                                             codecs::MovableByteBuffer(std::move(answer)), *endpoint);
                            });
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (id != attempts_ || done_ == nullptr) return;  // already answered (and maybe retried)
    inner_ = inner;
    if (cancelled_) inner->cancel();
  }

  // grpc thread: the attempt is over. The grpc++ client's status in the gateway's form.
  void onAnswer(grpc::Status status, codecs::MovableByteBuffer answer, const Endpoint& endpoint) {
    const Outcome outcome = outcomeOfGrpc(status.error_code());
    if (status.ok()) return settle(absl::OkStatus(), std::move(answer), outcome);
    codecs::Status out = toUpstreamStatus(status, fleet_->name(), endpoint.key());
    settle(grpcNotSent(status) ? markNotSent(std::move(out)) : std::move(out), {}, outcome);
  }

  // The attempt is over (its lease is ours alone again): on a grpc thread, or on the loop
  // for the worker's own client. `status` is the gateway's, marked when nothing was sent;
  // `outcome` what it tells passive health.
  void settle(codecs::Status status, codecs::MovableByteBuffer answer, Outcome outcome) {
    EndpointLease lease;
    bool cancelled;
    const Clock::time_point now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      lease = std::move(lease_);
      inner_.reset();
      cancelled = cancelled_;
      if (refused_) outcome = Outcome::kFailure;  // its answer was garbage on the way
      if (context_.stats) context_.stats->upstream = now - sent_at_;
    }
    std::shared_ptr<Endpoint> endpoint = lease.sharedEndpoint();
    if (status.ok() && !answer.valid()) {
      // grpc 1.51 ends a call as OK when the answer held no whole message (none at all, a
      // broken frame, a length prefix past the data); the native client when the upstream
      // sent grpc-status 0 and no message. Never passed on: grpc aborts the process on
      // sending such a buffer to the client.
      lease.finish(Outcome::kFailure);
      return deliver(codecs::withOrigin(absl::InvalidArgumentError(codecs::strCat(
                                            "upstream '", fleet_->name(), "' (", endpoint->key(),
                                            ") ended the call without a response message")),
                                        codecs::ErrorOrigin::kUpstream),
                     {});
    }
    if (status.ok() && options_.answer_ok && !options_.answer_ok(answer)) outcome = Outcome::kFailure;
    lease.finish(outcome, now);
    const bool not_sent = wasNotSent(status);
    if (not_sent && !cancelled && mayRetry(*fleet_, context_, retries_, options_.deadline)) {
      if (std::optional<EndpointLease> next = retryLease(*fleet_, context_, endpoint.get())) {
        ++retries_;
        return attempt(std::move(*next));
      }
    }
    deliver(std::move(status), std::move(answer));
  }

  // The native client's status for passive health, as outcomeOfGrpc reads grpc's: a
  // failure where the upstream could not be reached or broke the protocol, nothing for a
  // call the gateway cancelled or that timed out, a success for an answer of the
  // upstream's own whatever its code.
  static Outcome outcomeOf(const codecs::Status& status) {
    if (status.ok()) return Outcome::kSuccess;
    if (status.code() == absl::StatusCode::kCancelled) return Outcome::kNeutral;
    if (codecs::originOf(status) == codecs::ErrorOrigin::kUpstream) return outcomeOfError(status);
    return Outcome::kSuccess;
  }

  void deliver(codecs::Status status, codecs::MovableByteBuffer answer) {
    FleetUnaryDone done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done = std::move(done_);
      done_ = nullptr;
    }
    if (done) done(std::move(status), std::move(answer));
  }

  std::shared_ptr<UpstreamFleet> fleet_;
  std::string method_;
  codecs::MovableByteBuffer request_;
  GrpcRequestFor build_;  // when set, the request of each attempt
  GrpcCallOptions options_;
  PickContext context_;
  FleetUnaryDone done_;
  uint32_t retries_ = 0;

  std::mutex mu_;
  EndpointLease lease_;  // the attempt in flight
  bool cancelled_ = false;
  bool refused_ = false;  // refuseAnswer(): the attempt in flight counts as a failure
  uint64_t waiter_ = 0;  // acquire()'s, while it may wait in the queue
  uint64_t attempts_ = 0;
  Clock::time_point started_at_, sent_at_;
  std::shared_ptr<GrpcCallHandle> inner_;
};

// ---- HTTP ----

class FleetHttpCall final : public HttpCallHandle,
                            public std::enable_shared_from_this<FleetHttpCall> {
 public:
  FleetHttpCall(std::shared_ptr<UpstreamFleet> fleet, std::shared_ptr<HttpUpstreamClient> client,
                http::EventLoop& loop, HttpUpstreamRequest request, HttpRequestFor build,
                PickContext context, HttpUpstreamCallbacks callbacks, HttpAnswerCheck answer_ok)
      : fleet_(std::move(fleet)),
        client_(std::move(client)),
        loop_(loop),
        request_(build ? nullptr : std::make_shared<const HttpUpstreamRequest>(std::move(request))),
        build_(std::move(build)),
        context_(std::move(context)),
        callbacks_(std::move(callbacks)),
        answer_ok_(std::move(answer_ok)) {}

  void start() {
    started_at_ = Clock::now();
    fleet_->retryBudget().recordRequest(started_at_);
    starting_.store(true);
    auto on_lease = [self = shared_from_this()](codecs::StatusOr<EndpointLease> lease) {
      if (self->starting_.load() && self->loop_.inLoopThread()) {
        return self->onLease(std::move(lease));
      }
      // Later, from another request's thread or the housekeeper: back to our loop.
      self->loop_.post([self, lease = std::make_shared<codecs::StatusOr<EndpointLease>>(
                                  std::move(lease))]() mutable { self->onLease(std::move(*lease)); });
    };
    waiter_ = fleet_->acquire(context_, std::move(on_lease), started_at_);
    starting_.store(false);
  }

  void cancel() override {
    if (cancelled_) return;
    cancelled_ = true;
    if (inner_) {
      inner_->cancel();  // no callback follows
      inner_.reset();
    } else if (waiter_ != 0) {
      fleet_->abandon(waiter_);  // still queued: leave; a lease already on its way is dropped
    }
    lease_.finish(Outcome::kNeutral);
    callbacks_ = {};
    answer_ok_ = nullptr;
  }

 private:
  void onLease(codecs::StatusOr<EndpointLease> lease) {
    if (cancelled_) return;  // a lease, if any, is finished as it goes
    if (!lease.ok()) return complete(lease.status());
    attempt(std::move(*lease));
  }

  void attempt(EndpointLease lease) {
    // A body still arriving goes only with the engine that sends it as it comes; for any
    // other, the attempt waits until it is whole (or gone).
    const http::BodyArrival* arrival = request_ ? request_->arrival.get() : nullptr;
    if (arrival != nullptr && !arrival->complete() && !client_->sendsAsArrives(lease.endpoint().address())) {
      if (arrival->failed()) {
        lease.finish(Outcome::kNeutral);
        return complete(http::BodyArrival::notArrived());
      }
      return request_->arrival->whenSettled(
          [self = shared_from_this(), lease = std::make_shared<EndpointLease>(std::move(lease))](bool) mutable {
            if (self->cancelled_) return lease->finish(Outcome::kNeutral);
            self->attempt(std::move(*lease));
          });
    }
    lease_ = std::move(lease);
    const bool placed_at_start = attempts_ == 0 && starting_.load();  // inside start()
    sent_at_ = noteAttempt(*fleet_, context_, lease_.endpoint(), started_at_, ++attempts_, placed_at_start);
    // Shared with the client, not copied: a retry sends the same request again.
    SharedHttpRequest request = request_;
    if (build_) {
      codecs::StatusOr<HttpUpstreamRequest> built = build_(lease_.endpoint());
      if (!built.ok()) {
        lease_.finish(Outcome::kNeutral);
        return complete(built.status());
      }
      request = std::make_shared<const HttpUpstreamRequest>(std::move(*built));
    }
    HttpUpstreamCallbacks callbacks;
    auto self = shared_from_this();
    if (callbacks_.on_head) {
      callbacks.on_head = [self](int status, const http::HeaderList& headers) {
        self->answered_ = true;
        if (self->callbacks_.on_head) self->callbacks_.on_head(status, headers);
      };
      callbacks.on_data = [self](codecs::Buffer piece) {
        if (self->callbacks_.on_data) self->callbacks_.on_data(std::move(piece));
      };
      callbacks.windowed_data = callbacks_.windowed_data;
    }
    // Passed on as it is: a relay's head comes only once the request was sent, after which
    // no failure is retried (wasNotSent), so the attempt needs no watch on it.
    callbacks.relay = callbacks_.relay;
    callbacks.on_complete = [self](codecs::StatusOr<HttpUpstreamResponse> response) {
      self->onComplete(std::move(response));
    };
    inner_ = client_->send(lease_.endpoint().address(), std::move(request), std::move(callbacks));
  }

  void onComplete(codecs::StatusOr<HttpUpstreamResponse> response) {
    inner_.reset();
    const Clock::time_point now = Clock::now();
    if (context_.stats) context_.stats->upstream = now - sent_at_;
    if (response.ok()) {
      Outcome outcome = outcomeOfHttpStatus(response->status);
      if (response->status == 200 && answer_ok_ && !answer_ok_(*response)) {
        outcome = Outcome::kFailure;
      }
      lease_.finish(outcome, now);
      return complete(std::move(response));
    }
    // Kept past finish() to be passed over by a retry.
    std::shared_ptr<Endpoint> endpoint = lease_.sharedEndpoint();
    lease_.finish(outcomeOfError(response.status()), now);
    if (wasNotSent(response.status()) && !answered_ && !cancelled_ &&
        mayRetry(*fleet_, context_, retries_, std::nullopt)) {
      if (std::optional<EndpointLease> next = retryLease(*fleet_, context_, endpoint.get())) {
        ++retries_;
        return attempt(std::move(*next));
      }
    }
    complete(std::move(response));
  }

  void complete(codecs::StatusOr<HttpUpstreamResponse> response) {
    auto on_complete = std::move(callbacks_.on_complete);
    callbacks_ = {};
    answer_ok_ = nullptr;
    if (on_complete) on_complete(std::move(response));
  }

  std::shared_ptr<UpstreamFleet> fleet_;
  std::shared_ptr<HttpUpstreamClient> client_;
  http::EventLoop& loop_;
  SharedHttpRequest request_;  // kept for a retry (unused when build_ is set)
  HttpRequestFor build_;         // when set, the request of each attempt
  PickContext context_;
  HttpUpstreamCallbacks callbacks_;
  HttpAnswerCheck answer_ok_;
  EndpointLease lease_;
  std::shared_ptr<HttpCallHandle> inner_;
  uint32_t retries_ = 0;
  uint32_t attempts_ = 0;
  Clock::time_point started_at_, sent_at_;
  uint64_t waiter_ = 0;  // acquire()'s, while it may wait in the queue
  std::atomic<bool> starting_{false};  // acquire() may answer inline
  bool cancelled_ = false;
  bool answered_ = false;
};

}  // namespace

bool grpcNotSent(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string message = status.error_message();
  // grpc's pick_first, when no connection could be made; and this client's own refusal
  // after shutdown.
  return message.find("failed to connect to all addresses") != std::string::npos ||
         message.ends_with("is shut down");
}

std::shared_ptr<GrpcCallHandle> fleetUnary(const std::shared_ptr<UpstreamFleet>& fleet,
                                           std::string_view method, codecs::MovableByteBuffer request,
                                           GrpcCallOptions options, PickContext context,
                                           FleetUnaryDone done) {
  auto call = std::make_shared<FleetUnaryCall>(fleet, method, std::move(request), nullptr,
                                               std::move(options), std::move(context),
                                               std::move(done));
  call->start();
  return call;
}

std::shared_ptr<GrpcCallHandle> fleetUnaryFor(const std::shared_ptr<UpstreamFleet>& fleet,
                                              std::string_view method, GrpcRequestFor build,
                                              GrpcCallOptions options, PickContext context,
                                              FleetUnaryDone done) {
  auto call = std::make_shared<FleetUnaryCall>(fleet, method, codecs::MovableByteBuffer(), std::move(build),
                                               std::move(options), std::move(context),
                                               std::move(done));
  call->start();
  return call;
}

std::shared_ptr<HttpCallHandle> fleetHttp(const std::shared_ptr<UpstreamFleet>& fleet,
                                          std::shared_ptr<HttpUpstreamClient> client,
                                          http::EventLoop& loop,
                                          HttpUpstreamRequest request, PickContext context,
                                          HttpUpstreamCallbacks callbacks, HttpAnswerCheck answer_ok) {
  auto call = std::make_shared<FleetHttpCall>(fleet, std::move(client), loop, std::move(request),
                                              nullptr, std::move(context), std::move(callbacks),
                                              std::move(answer_ok));
  call->start();
  return call;
}

std::shared_ptr<HttpCallHandle> fleetHttpFor(const std::shared_ptr<UpstreamFleet>& fleet,
                                             std::shared_ptr<HttpUpstreamClient> client,
                                             http::EventLoop& loop, HttpRequestFor build,
                                             PickContext context, HttpUpstreamCallbacks callbacks,
                                             HttpAnswerCheck answer_ok) {
  auto call = std::make_shared<FleetHttpCall>(fleet, std::move(client), loop, HttpUpstreamRequest(),
                                              std::move(build), std::move(context),
                                              std::move(callbacks), std::move(answer_ok));
  call->start();
  return call;
}

}  // namespace infergate::gateway::upstream
