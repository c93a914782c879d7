// GrpcUpstreamClient: raw-byte calls toward one gRPC upstream (grpc_client.h).
//
//   channels_      config.channels per endpoint, each with its own subchannel pool so
//                  that it really is one more HTTP/2 connection; calls take them round
//                  robin. Reconnect backoff is short (100 ms - 1 s) so that an upstream
//                  coming back is used again within a probe interval, and a call on a
//                  channel whose connection failed fails at once (wait_for_ready off)
//                  instead of waiting for the next attempt.
//   UnaryCall      GenericStub::UnaryCall (callback API); owns its ClientContext and the
//                  response ByteBuffer until grpc reports the end.
//   StreamCall     a ClientBidiReactor: one StartWrite at a time from a queue (write()
//                  from any thread), StartWritesDone after the queue drains once
//                  writesDone() was asked, a read always outstanding; frees itself in
//                  OnDone after on_done ran. A hold (AddHold) keeps grpc from ending the
//                  reactor while writes may still be started; it is removed once, when
//                  the writing side is over (half-closed, broken, cancelled, or the read
//                  side ended). Start* and RemoveHold run under a recursive mutex, so a
//                  reaction grpc runs inline re-enters safely and no Start* can follow
//                  the removal.
//   live_          every call not yet ended, so that shutdown() can cancel them and wait.
//
// Ownership: a call is kept alive by grpc (until its completion runs) and by the
// handles given out; the client's registry holds plain pointers, removed under the
// mutex before a call is freed.

#include "gateway/upstream/grpc_client.h"

#include <climits>
#include <condition_variable>
#include <deque>
#include <unordered_set>

#include "codecs/text.h"

namespace infergate::gateway::upstream {

namespace {

std::string targetOf(const config::ListenAddress& endpoint) {
  if (endpoint.kind == config::ListenAddress::Kind::kUnix) return "unix:" + endpoint.path;
  if (endpoint.host.find(':') != std::string::npos) {
    return codecs::strCat("ipv6:[", endpoint.host, "]:", endpoint.port);
  }
  return codecs::strCat(endpoint.host, ":", endpoint.port);
}

// The upstream's configured headers replace forwarded entries of the same key.
void applyMetadata(grpc::ClientContext& context, const GrpcCallOptions& options,
                   const std::vector<config::HeaderValue>& configured) {
  for (const auto& [key, value] : options.metadata) {
    bool replaced = false;
    for (const config::HeaderValue& h : configured) replaced = replaced || h.name == key;
    if (!replaced) context.AddMetadata(key, value);
  }
  for (const config::HeaderValue& h : configured) context.AddMetadata(h.name, h.value);
  if (options.deadline) context.set_deadline(*options.deadline);
  context.set_wait_for_ready(false);
}

}  // namespace

// A call the registry can cancel.
class LiveCall {
 public:
  virtual ~LiveCall() = default;
  virtual void cancelCall() = 0;
};

// What the client and its calls share (calls may outlive the client object briefly).
struct ClientState {
  std::string name;
  std::vector<config::HeaderValue> headers;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::atomic<size_t> next{0};

  std::mutex mu;
  std::condition_variable drained;
  std::unordered_set<LiveCall*> live;
  bool closed = false;

  grpc::GenericStub& stub() {
    return *stubs[next.fetch_add(1, std::memory_order_relaxed) % stubs.size()];
  }

  // False once shut down: the call must fail at once instead.
  bool enter(LiveCall* call) {
    std::lock_guard<std::mutex> lock(mu);
    if (closed) return false;
    live.insert(call);
    return true;
  }
  void leave(LiveCall* call) {
    std::lock_guard<std::mutex> lock(mu);
    live.erase(call);
    if (live.empty()) drained.notify_all();
  }
};

namespace {

class UnaryCall final : public GrpcCallHandle, public LiveCall {
 public:
  UnaryCall(std::shared_ptr<ClientState> impl, GrpcUpstreamClient::UnaryDone done)
      : impl_(std::move(impl)), done_(std::move(done)) {}

  void start(std::shared_ptr<UnaryCall> self, std::string_view method,
             const grpc::ByteBuffer& request, const GrpcCallOptions& options) {
    applyMetadata(context_, options, impl_->headers);
    if (!impl_->enter(this)) {
      done_(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                         codecs::strCat("upstream '", impl_->name, "' is shut down")),
            grpc::ByteBuffer());
      return;
    }
    request_ = request;
    impl_->stub().UnaryCall(&context_, std::string(method), grpc::StubOptions(), &request_,
                            &response_, [self = std::move(self)](grpc::Status status) {
                              self->impl_->leave(self.get());
                              auto done = std::move(self->done_);
                              done(std::move(status), std::move(self->response_));
                            });
  }

  void cancel() override { context_.TryCancel(); }
  void cancelCall() override { context_.TryCancel(); }

 private:
  std::shared_ptr<ClientState> impl_;
  GrpcUpstreamClient::UnaryDone done_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

class StreamCall final : public GrpcStream,
                         public LiveCall,
                         public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamCall(std::shared_ptr<ClientState> impl, GrpcStreamCallbacks callbacks)
      : impl_(std::move(impl)), callbacks_(std::move(callbacks)) {}

  // Returns false (and reports on_done) when the client is shut down.
  bool start(std::shared_ptr<StreamCall> self, std::string_view method,
             const GrpcCallOptions& options) {
    applyMetadata(context_, options, impl_->headers);
    if (!impl_->enter(this)) {
      callbacks_.on_done(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                      codecs::strCat("upstream '", impl_->name, "' is shut down")));
      return false;
    }
    self_ = std::move(self);  // until OnDone
    impl_->stub().PrepareBidiStreamingCall(&context_, std::string(method), grpc::StubOptions(),
                                           this);
    AddHold();  // the writing side; see releaseHoldLocked()
    StartRead(&read_buf_);
    StartCall();
    return true;
  }

  void write(grpc::ByteBuffer message) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (hold_released_ || half_closing_) return;
    queue_.push_back(std::move(message));
    pumpLocked();
  }

  void writesDone() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (hold_released_ || half_closing_) return;
    half_closing_ = true;
    pumpLocked();
  }

  void cancel() override {
    context_.TryCancel();
    std::lock_guard<std::recursive_mutex> lock(mu_);
    releaseHoldLocked();
  }
  void cancelCall() override { cancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the stream is ending: nothing written now would be read
      std::lock_guard<std::recursive_mutex> lock(mu_);
      queue_.clear();
      releaseHoldLocked();
      return;
    }
    callbacks_.on_message(std::move(read_buf_));
    read_buf_.Clear();
    StartRead(&read_buf_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    writing_ = false;
    if (!ok) {  // the stream broke; OnDone reports how
      queue_.clear();
      releaseHoldLocked();
      return;
    }
    pumpLocked();
  }

  void OnWritesDoneDone(bool) override {}

  void OnDone(const grpc::Status& status) override {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      hold_released_ = true;
      queue_.clear();
    }
    impl_->leave(this);
    auto on_done = std::move(callbacks_.on_done);
    callbacks_ = {};
    on_done(status);
    self_.reset();  // may free this
  }

 private:
  // One write in flight; the half-close after the last queued message.
  void pumpLocked() {
    if (writing_ || hold_released_) return;
    if (!queue_.empty()) {
      write_buf_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      StartWrite(&write_buf_);
    } else if (half_closing_) {
      StartWritesDone();
      releaseHoldLocked();
    }
  }

  // Once: no Start* may follow, and grpc may now end the reactor.
  void releaseHoldLocked() {
    if (hold_released_) return;
    hold_released_ = true;
    RemoveHold();
  }

  std::shared_ptr<ClientState> impl_;
  GrpcStreamCallbacks callbacks_;
  grpc::ClientContext context_;
  std::shared_ptr<StreamCall> self_;
  grpc::ByteBuffer read_buf_;
  std::recursive_mutex mu_;
  std::deque<grpc::ByteBuffer> queue_;
  grpc::ByteBuffer write_buf_;
  bool writing_ = false;
  bool half_closing_ = false;
  bool hold_released_ = false;
};

}  // namespace

struct GrpcUpstreamClient::Impl : ClientState {};

GrpcUpstreamClient::GrpcUpstreamClient(const config::UpstreamConfig& config)
    : name_(config.name), impl_(std::make_shared<Impl>()) {
  impl_->name = config.name;
  impl_->headers = config.headers;
  uint32_t per_endpoint = std::max<uint32_t>(config.channels, 1);
  for (const config::ListenAddress& endpoint : config.endpoints) {
    for (uint32_t i = 0; i < per_endpoint; ++i) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(INT_MAX);
      args.SetMaxSendMessageSize(INT_MAX);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
      // Distinct channel arguments keep grpc from sharing one connection between them.
      args.SetInt("infergate.channel_index", static_cast<int>(i));
      auto channel = grpc::CreateCustomChannel(targetOf(endpoint),
                                               grpc::InsecureChannelCredentials(), args);
      impl_->stubs.push_back(std::make_unique<grpc::GenericStub>(channel));
      impl_->channels.push_back(std::move(channel));
    }
  }
}

GrpcUpstreamClient::~GrpcUpstreamClient() { shutdown(); }

std::shared_ptr<GrpcCallHandle> GrpcUpstreamClient::unary(std::string_view method,
                                                          const grpc::ByteBuffer& request,
                                                          GrpcCallOptions options, UnaryDone done) {
  auto call = std::make_shared<UnaryCall>(impl_, std::move(done));
  call->start(call, method, request, options);
  return call;
}

std::shared_ptr<GrpcStream> GrpcUpstreamClient::stream(std::string_view method,
                                                       GrpcCallOptions options,
                                                       GrpcStreamCallbacks callbacks) {
  auto call = std::make_shared<StreamCall>(impl_, std::move(callbacks));
  call->start(call, method, options);
  return call;
}

void GrpcUpstreamClient::shutdown() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->closed = true;
  for (LiveCall* call : impl_->live) call->cancelCall();
  impl_->drained.wait(lock, [this] { return impl_->live.empty(); });
}

codecs::Status toUpstreamStatus(const grpc::Status& status, std::string_view upstream) {
  const std::string message = status.error_message();  // returned by value
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
      return codecs::withOrigin(
          absl::UnavailableError(codecs::strCat("upstream '", upstream, "' is unavailable: ", message)),
          codecs::ErrorOrigin::kUpstream);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return codecs::withOrigin(
          absl::DeadlineExceededError(codecs::strCat("upstream '", upstream, "' timed out: ", message)),
          codecs::ErrorOrigin::kUpstream);
    default:
      // The upstream's own answer: clients match on its code and text.
      return codecs::Status(static_cast<absl::StatusCode>(status.error_code()),
                            std::string(message));
  }
}

}  // namespace infergate::gateway::upstream
