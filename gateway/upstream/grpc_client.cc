// GrpcUpstreamClient (grpc_client.h): raw grpc::ByteBuffer calls toward one gRPC upstream
// on the grpc++ callback API.
//
//   ClientCore    the stubs (which own the channels), the configured headers and the
//                 registry of calls in flight; the client's Impl.
//   channels      `channels` per endpoint, ordered channel-major (e0c0 e1c0 e0c1 e1c1) so
//                 that consecutive picks of the round robin alternate endpoints. Each has
//                 its own subchannel pool: grpc would otherwise share one connection
//                 between channels of identical arguments, and `channels` would mean
//                 nothing.
//   UnaryCall     GenericStub::UnaryCall. Owns the ClientContext, the request (a reference
//                 on its slices), the response and `done`; deleted by its own completion.
//   StreamCall    a ClientBidiReactor (below, "Writing side"); deleted in OnDone.
//   handles       what unary() / stream() return: small objects that reach the call while
//                 it exists (under their own mutex) and do nothing after. They own no grpc
//                 object, so a caller may keep or drop one anywhere, even past the client.
//
// Ownership and the last channel reference. A ClientContext holds a reference on its
// channel. In grpc 1.51 the callback API of this poller runs on one process-wide queue
// whose threads are stopped, and joined, when the last channel or server using it goes:
// dropping that last reference on one of those threads makes it join itself and free the
// queue under its own feet (a double free inside grpc_cq_internal_unref). So a call's grpc
// objects die on grpc's thread only while the client still holds its channels: a call
// leaves the registry after it is destroyed, and shutdown() (the destructor) waits for the
// registry to empty, so the channels go last, on the thread that destroys the client.
// Calls refer to the core by plain reference for the same reason.
//
// Connecting (why these channel arguments):
//   - wait_for_ready is off: a call on a channel whose connect attempt failed fails at once
//     with UNAVAILABLE rather than waiting for the next attempt. A refused connection
//     (nothing listening) therefore fails the call within a round trip.
//   - grpc's GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is, in grpc core, the minimum time given
//     to a connect attempt (subchannel.cc: deadline = max(next backoff, now + min)). It
//     is set to the upstream's connect_timeout_ms: a connection that neither succeeds nor
//     fails (a blackholed address) fails the call after connect_timeout_ms when its own
//     deadline is not earlier. A call without a deadline gets none imposed.
//   - The backoff between attempts is 100 ms growing to 1 s (grpc's default: 1 s growing
//     to 120 s). During a backoff every call fails at once, so the default would keep an
//     upstream that restarted out of use for up to two minutes; with 1 s it is back
//     within a second. An attempt toward a port nothing listens on costs one refused SYN.
//   - No HTTP proxy from the environment (as the HTTP client): a sidecar talks to its
//     upstreams directly.
//   - Keepalive pings every 6 minutes while calls are open, 20 s to answer: it finds a
//     connection that died silently (NAT, a vanished host) under a long stream. Triton's
//     server counts a ping sooner than 5 minutes after the previous one as a strike
//     (min_recv_ping_interval_without_data 300000, max_ping_strikes 2, PROTOCOL.md 1)
//     and answers GOAWAY too_many_pings; 6 minutes stays clear of that.
//
// TLS. With the upstream's `tls`, every channel takes the credentials tls/client_credentials.h
// builds (the files are read when the client is made: the gateway reads them again on a
// reload, and a change makes new clients), and server_name as the target name override:
// grpc then sends it as SNI, verifies it in the certificate, and sends it as :authority.
// A handshake that fails (untrusted chain, name not in the certificate, no client
// certificate where one is required) is a failed connect: calls fail with UNAVAILABLE and
// grpc's reason. A client whose files no longer load (replaced since the configuration was
// checked) never falls back to plaintext: its calls are refused with that error.
//
// Writing side of a stream. write() queues; one thread at a time owns the right to call
// StartWrite / StartWritesDone (`writing_`), taken under the mutex, used outside it. The
// owner is whoever found the writer idle: a caller of write() / writesDone(), or
// OnWriteDone passing it on to the next queued message. A hold (AddHold) stops grpc from
// ending the reactor while a Start* may still come from outside a reaction; it is removed
// once, when the writer is idle and can never start again: after the half-close completed,
// a write failed, or the read side ended (the read side ends only when the call is over:
// status received or cancelled). cancel() only calls TryCancel: the read and any write
// in flight then fail, and those reactions release the hold.
//
// Refused calls. After shutdown(), and for metadata grpc cannot carry (grpc aborts the
// process on an illegal key or value), a call still goes through the normal path, with its
// context cancelled before the call is created: grpc ends it at once without touching the
// network, and on its own thread, so `done` / `on_done` never run inside unary() or
// stream() (callers there may hold locks, or not yet have stored the handle). Its status is
// then replaced by the refusal.
//
// shutdown() marks the core closed, TryCancels every registered call and waits until the
// registry is empty. A call leaves the registry once its callback has returned and the
// call, with the caller's closures, is destroyed: nothing of the caller's runs or remains
// once shutdown() returns. Hence neither shutdown() nor the destructor may run inside a
// callback of this client's calls (it would wait for itself), nor on another grpc
// callback thread (see "Ownership").

#include "gateway/upstream/grpc_client.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <deque>
#include <unordered_map>

#include "config/listen_address.h"
#include "tls/client_credentials.h"

namespace infergate::gateway::upstream {
namespace {

constexpr int kInitialReconnectBackoffMs = 100;
constexpr int kMaxReconnectBackoffMs = 1000;
constexpr int kKeepaliveTimeMs = 360000;
constexpr int kKeepaliveTimeoutMs = 20000;
constexpr int kMaxUpstreamMetadataBytes = 1 << 20;

grpc::ChannelArguments channelArguments(const config::UpstreamConfig& config) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);  // Triton: INT32_MAX both ways
  args.SetMaxSendMessageSize(INT_MAX);
  // An upstream's answer may carry a long message in its trailers (Triton names the model
  // the client asked for, which the client may have made long): grpc's default 8 KiB
  // would turn that NOT_FOUND into RESOURCE_EXHAUSTED. The client's own metadata is
  // bounded at the frontend (limits.max_header_bytes).
  args.SetInt(GRPC_ARG_MAX_METADATA_SIZE, kMaxUpstreamMetadataBytes);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // grpc ignores values below 100 ms; the config allows 1 ms and up.
  const uint64_t connect_ms = std::clamp<uint64_t>(config.connect_timeout_ms, 100, INT_MAX);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(connect_ms));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  return args;
}

// grpc aborts the process on a send of an uninitialised ByteBuffer; an empty message is
// a valid one.
grpc::ByteBuffer sendable(grpc::ByteBuffer message) {
  return message.Valid() ? message : grpc::ByteBuffer(nullptr, 0);
}

grpc::Slice unownedSlice(const std::string& s) {
  return grpc::Slice(s.data(), s.size(), grpc::Slice::STATIC_SLICE);
}


class ClientCore {
 public:
  explicit ClientCore(const config::UpstreamConfig& config) : name_(config.name) {
    for (const config::HeaderValue& h : config.headers) headers_.emplace_back(h.name, h.value);
    grpc::ChannelArguments args = channelArguments(config);
    std::shared_ptr<grpc::ChannelCredentials> credentials = credentialsFor(config, args);
    const uint32_t per_endpoint = std::max<uint32_t>(config.channels, 1);
    for (uint32_t i = 0; i < per_endpoint; ++i) {
      for (const config::ListenAddress& endpoint : config.endpoints) {
        channels_.push_back(
            grpc::CreateCustomChannel(config::formatAddress(endpoint), credentials, args));
        stubs_.push_back(std::make_unique<grpc::GenericStub>(channels_.back()));
      }
    }
  }

  // Every channel in reconnect backoff tries to connect again now.
  void resetConnectBackoff() {
    for (const auto& channel : channels_) grpc::experimental::ChannelResetConnectionBackoff(channel.get());
  }

  const std::string& name() const { return name_; }

  grpc::GenericStub& nextStub() {
    return *stubs_[next_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  }

  // Registers a call by its handle, until leave(*id), and sets up its context. Returns OK,
  // or the status the call must end with instead of running (see "Refused calls").
  grpc::Status begin(std::shared_ptr<GrpcCallHandle> handle, grpc::ClientContext& context,
                     const GrpcCallOptions& options, uint64_t* id) {
    grpc::Status status = setUp(context, options);
    std::lock_guard<std::mutex> lock(mu_);
    *id = next_id_++;
    live_.emplace(*id, std::move(handle));
    if (closed_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          codecs::strCat("upstream '", name_, "' is shut down"));
    }
    if (!tls_error_.ok()) return tls_error_;
    return status;
  }

  // The call is gone: its callback ran and its grpc objects are destroyed.
  void leave(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(id);
    if (live_.empty()) drained_.notify_all();
  }

  void shutdown() {
    std::vector<std::shared_ptr<GrpcCallHandle>> calls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      calls.reserve(live_.size());
      for (const auto& [id, handle] : live_) calls.push_back(handle);
    }
    // Outside the mutex: a call that ends meanwhile takes it in leave().
    for (const auto& call : calls) call->cancel();
    calls.clear();
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait(lock, [this] { return live_.empty(); });
  }

 private:
  // The call's metadata (the configured headers replacing forwarded entries of the same
  // key), deadline and wait_for_ready. Nothing is added when an entry is illegal.
  grpc::Status setUp(grpc::ClientContext& context, const GrpcCallOptions& options) const {
    codecs::Status refused = forEachCallMetadata(
        options.metadata, headers_, name_,
        [&context](const std::string& key, const std::string& value) { context.AddMetadata(key, value); });
    if (!refused.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(codecs::messageOf(refused)));
    }
    if (options.deadline) context.set_deadline(*options.deadline);
    context.set_wait_for_ready(options.wait_for_ready);
    return grpc::Status::OK;
  }

  // Plaintext, or TLS from the upstream's `tls` (see "TLS"); target name override into
  // `args`. Files that no longer load leave TLS credentials that verify against the
  // system's roots, and tls_error_ refuses every call.
  std::shared_ptr<grpc::ChannelCredentials> credentialsFor(const config::UpstreamConfig& config,
                                                           grpc::ChannelArguments& args) {
    if (!config.tls) return grpc::InsecureChannelCredentials();
    codecs::Status status;
    if (auto loaded = tls::loadClientTls(config.name, *config.tls); loaded.ok()) {
      auto credentials = tls::channelCredentials(**loaded);
      if (credentials.ok()) {
        tls::setChannelArguments(**loaded, args);
        return *std::move(credentials);
      }
      status = credentials.status();
    } else {
      status = loaded.status();
    }
    tls_error_ = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              codecs::strCat("upstream '", name_, "': TLS is not set up: ",
                                             codecs::messageOf(status)));
    return grpc::SslCredentials(grpc::SslCredentialsOptions());
  }

  const std::string name_;
  grpc::Status tls_error_;  // set once, in the constructor
  std::vector<std::pair<std::string, std::string>> headers_;  // configured, lowercase keys
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;     // they hold the channels too
  std::atomic<uint64_t> next_{0};

  std::mutex mu_;
  std::condition_variable drained_;
  bool closed_ = false;
  uint64_t next_id_ = 0;
  // Every call from begin() until it is destroyed, by id (an address could be reused by
  // the next call before leave() runs), with its handle for cancel().
  std::unordered_map<uint64_t, std::shared_ptr<GrpcCallHandle>> live_;
};

// ---- unary calls ----

// The caller's side of a unary call: cancel() reaches the context while the call exists,
// and does nothing after. It owns no grpc object, so it may be kept, or dropped, anywhere.
class UnaryHandle final : public GrpcCallHandle {
 public:
  explicit UnaryHandle(grpc::ClientContext* context) : context_(context) {}

  void cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
  void detach() {
    std::lock_guard<std::mutex> lock(mu_);
    context_ = nullptr;
  }

 private:
  std::mutex mu_;
  grpc::ClientContext* context_;  // the call's, null once the call is gone
};

// Lives from unary() until grpc's completion, which runs `done` and deletes it.
class UnaryCall {
 public:
  UnaryCall(ClientCore& core, std::string_view method, const grpc::ByteBuffer& request,
            GrpcUpstreamClient::UnaryDone done)
      : core_(core),
        method_(method),
        request_(sendable(request)),
        done_(std::move(done)),
        handle_(std::make_shared<UnaryHandle>(&context_)) {}

  // Nothing may touch the call after this: it can be gone before UnaryCall() returns.
  static std::shared_ptr<GrpcCallHandle> start(UnaryCall* call, const GrpcCallOptions& options) {
    std::shared_ptr<GrpcCallHandle> handle = call->handle_;
    call->refusal_ = call->core_.begin(handle, call->context_, options, &call->id_);
    if (!call->refusal_.ok()) call->context_.TryCancel();  // before the call exists: ends at once
    call->core_.nextStub().UnaryCall(
        &call->context_, call->method_, grpc::StubOptions(), &call->request_, &call->response_,
        [call](grpc::Status status) { complete(call, std::move(status)); });
    return handle;
  }

  ~UnaryCall() { handle_->detach(); }

 private:
  // grpc's thread, once. The context goes with the call, here, while the client still
  // holds its channels: the last reference on a channel must never drop on grpc's thread
  // (grpc 1.51 then joins that very thread from ~Channel).
  static void complete(UnaryCall* call, grpc::Status status) {
    if (!call->refusal_.ok()) status = call->refusal_;
    if (call->done_) call->done_(std::move(status), std::move(call->response_));
    ClientCore& core = call->core_;
    const uint64_t id = call->id_;
    delete call;  // with it the caller's closure, before shutdown() can return
    core.leave(id);
  }

  ClientCore& core_;
  const std::string method_;
  const grpc::ByteBuffer request_;  // shares the caller's slices (no bytes copied)
  GrpcUpstreamClient::UnaryDone done_;
  grpc::ClientContext context_;
  grpc::ByteBuffer response_;
  grpc::Status refusal_;
  uint64_t id_ = 0;
  const std::shared_ptr<UnaryHandle> handle_;
};

// ---- streams ----

class StreamCall;

// The caller's side of a stream: forwards to the reactor while it exists.
class StreamHandle final : public GrpcStream {
 public:
  explicit StreamHandle(StreamCall* call) : call_(call) {}
  void write(grpc::ByteBuffer message) override;
  void writesDone() override;
  void cancel() override;
  size_t unwrittenBytes() const override;
  void setReadPaused(bool paused) override;
  void detach() {
    std::lock_guard<std::mutex> lock(mu_);
    call_ = nullptr;
  }

 private:
  mutable std::mutex mu_;  // held across the forwarded call: the reactor cannot go meanwhile
  StreamCall* call_;
};

// Lives from stream() until OnDone, which runs on_done and deletes it.
class StreamCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamCall(ClientCore& core, std::string_view method, GrpcStreamCallbacks callbacks)
      : core_(core),
        method_(method),
        callbacks_(std::move(callbacks)),
        handle_(std::make_shared<StreamHandle>(this)) {}

  // Nothing may touch the call after this: it can be gone before StartCall() returns.
  static std::shared_ptr<GrpcStream> start(StreamCall* call, const GrpcCallOptions& options) {
    std::shared_ptr<GrpcStream> handle = call->handle_;
    call->refusal_ = call->core_.begin(handle, call->context_, options, &call->id_);
    if (!call->refusal_.ok()) call->context_.TryCancel();
    call->core_.nextStub().PrepareBidiStreamingCall(&call->context_, call->method_,
                                                    grpc::StubOptions(), call);
    call->AddHold();  // the writing side (see the top of the file)
    call->StartRead(&call->read_buf_);
    call->StartCall();
    return handle;
  }

  ~StreamCall() override { handle_->detach(); }

  void write(grpc::ByteBuffer message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writer_closed_ || half_close_asked_ || read_ended_) return;  // nothing would read it
      unwritten_ += message.Length();
      if (writing_) {
        queue_.push_back(sendable(std::move(message)));
        return;
      }
      writing_ = true;
      write_len_ = message.Length();
      write_buf_ = sendable(std::move(message));
    }
    StartWrite(&write_buf_);
  }

  size_t unwrittenBytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return unwritten_;
  }

  void writesDone() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writer_closed_ || half_close_asked_) return;
      half_close_asked_ = true;
      if (writing_) return;  // OnWriteDone half-closes once the queue is empty
      writing_ = true;
    }
    StartWritesDone();
  }

  void cancel() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;  // no pause from now on: the call must be able to end
    }
    context_.TryCancel();
    setReadPaused(false);  // a stalled read must run to let the call end
  }

  // A read stalled by the pause holds the call (AddHold in OnReadDone) until it starts.
  void setReadPaused(bool paused) {
    bool start = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_paused_ = paused && !cancelled_;
      if (!read_paused_ && read_stalled_) {
        read_stalled_ = false;
        start = true;
      }
    }
    if (start) {
      StartRead(&read_buf_);
      RemoveHold();
    }
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      if (callbacks_.on_message) callbacks_.on_message(std::move(read_buf_));
      read_buf_ = grpc::ByteBuffer();
      const bool keep = !callbacks_.keep_reading || callbacks_.keep_reading();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (read_paused_ || (!keep && !cancelled_)) {
          read_stalled_ = true;
          AddHold();  // inside a reaction: the call cannot be done yet
          return;
        }
      }
      StartRead(&read_buf_);
      return;
    }
    // The call is over: whatever is queued would never be read.
    bool release;
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_ended_ = true;
      dropQueueLocked();
      release = closeWriterLocked();
    }
    if (release) RemoveHold();
  }

  void OnWriteDone(bool ok) override {
    enum { kWrite, kHalfClose, kIdle } next = kIdle;
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      unwritten_ -= std::min(unwritten_, write_len_);
      write_len_ = 0;
      if (!ok || read_ended_) {
        dropQueueLocked();
        writing_ = false;
        release = closeWriterLocked();
      } else if (!queue_.empty()) {
        write_len_ = queue_.front().Length();
        write_buf_ = std::move(queue_.front());
        queue_.pop_front();
        next = kWrite;
      } else if (half_close_asked_) {
        next = kHalfClose;
      } else {
        writing_ = false;
      }
    }
    // A reaction: these may follow without the hold, which is still held anyway.
    if (next == kWrite) StartWrite(&write_buf_);
    if (next == kHalfClose) StartWritesDone();
    if (callbacks_.on_written) callbacks_.on_written();
    if (release) RemoveHold();
  }

  void OnWritesDoneDone(bool) override {
    bool release;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      release = closeWriterLocked();
    }
    if (release) RemoveHold();
  }

  // The last reaction. As for unary calls, the context (and with it the caller's
  // closures) goes here, before leave().
  void OnDone(const grpc::Status& status) override {
    if (callbacks_.on_done) callbacks_.on_done(refusal_.ok() ? status : refusal_);
    ClientCore& core = core_;
    const uint64_t id = id_;
    delete this;
    core.leave(id);
  }

 private:
  // The queued messages will never be written (the call is over). mu_ held.
  void dropQueueLocked() {
    for (const grpc::ByteBuffer& m : queue_) unwritten_ -= std::min(unwritten_, m.Length());
    queue_.clear();
  }

  // True once: the writer is idle for good, and the hold is to be removed.
  bool closeWriterLocked() {
    if (writer_closed_ || writing_) return false;
    writer_closed_ = true;
    return true;
  }

  ClientCore& core_;
  const std::string method_;
  GrpcStreamCallbacks callbacks_;  // grpc's threads, one reaction at a time
  grpc::ClientContext context_;
  grpc::Status refusal_;
  uint64_t id_ = 0;
  grpc::ByteBuffer read_buf_;  // the read reactions'
  const std::shared_ptr<StreamHandle> handle_;

  std::mutex mu_;
  std::deque<grpc::ByteBuffer> queue_;
  grpc::ByteBuffer write_buf_;     // the owner of `writing_`'s
  bool writing_ = false;           // someone owns StartWrite / StartWritesDone
  bool half_close_asked_ = false;  // writesDone() was called
  bool read_ended_ = false;        // the call is over
  bool writer_closed_ = false;     // the hold is gone: no Start* any more
  bool read_paused_ = false;       // setReadPaused(true): no next read
  bool read_stalled_ = false;      // a read is owed (and a hold held) until resumed
  bool cancelled_ = false;         // cancel() was called: never paused again
  size_t write_len_ = 0;           // write_buf_'s bytes while it is being written
  size_t unwritten_ = 0;           // those and queue_'s
};

void StreamHandle::write(grpc::ByteBuffer message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (call_ != nullptr) call_->write(std::move(message));
}

void StreamHandle::writesDone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (call_ != nullptr) call_->writesDone();
}

void StreamHandle::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (call_ != nullptr) call_->cancel();
}

void StreamHandle::setReadPaused(bool paused) {
  std::lock_guard<std::mutex> lock(mu_);
  if (call_ != nullptr) call_->setReadPaused(paused);
}

size_t StreamHandle::unwrittenBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return call_ != nullptr ? call_->unwrittenBytes() : 0;
}

}  // namespace

struct GrpcUpstreamClient::Impl final : ClientCore {
  using ClientCore::ClientCore;
};

GrpcUpstreamClient::GrpcUpstreamClient(const config::UpstreamConfig& config)
    : name_(config.name), impl_(std::make_shared<Impl>(config)) {}

GrpcUpstreamClient::~GrpcUpstreamClient() { shutdown(); }

std::shared_ptr<GrpcCallHandle> GrpcUpstreamClient::unary(std::string_view method,
                                                          const grpc::ByteBuffer& request,
                                                          GrpcCallOptions options, UnaryDone done) {
  return UnaryCall::start(new UnaryCall(*impl_, method, request, std::move(done)), options);
}

std::shared_ptr<GrpcStream> GrpcUpstreamClient::stream(std::string_view method,
                                                       GrpcCallOptions options,
                                                       GrpcStreamCallbacks callbacks) {
  return StreamCall::start(new StreamCall(*impl_, method, std::move(callbacks)), options);
}

void GrpcUpstreamClient::shutdown() { impl_->shutdown(); }

void GrpcUpstreamClient::resetConnectBackoff() { impl_->resetConnectBackoff(); }
const char* grpcMetadataProblem(const std::string& key, const std::string& value) {
  grpc::Slice k = unownedSlice(key);
  if (key.empty() || !grpc_header_key_is_legal(k.c_slice())) {
    return "the key is not a valid gRPC metadata key (lowercase a-z 0-9 - _ .)";
  }
  if (!grpc_is_binary_header(k.c_slice()) &&
      !grpc_header_nonbin_value_is_legal(unownedSlice(value).c_slice())) {
    return "the value has characters outside printable ASCII";
  }
  return nullptr;
}

codecs::Status forEachCallMetadata(
    const GrpcMetadata& forwarded, const GrpcMetadata& configured, std::string_view upstream,
    const std::function<void(const std::string& key, const std::string& value)>& add) {
  for (const GrpcMetadata* list : {&forwarded, &configured}) {
    for (const auto& [key, value] : *list) {
      if (const char* problem = grpcMetadataProblem(key, value)) {
        return absl::InvalidArgumentError(
            codecs::strCat("cannot send metadata '", key, "' to upstream '", upstream, "': ", problem));
      }
    }
  }
  auto replaced = [&configured](const std::string& key) {
    return std::any_of(configured.begin(), configured.end(), [&key](const auto& h) { return h.first == key; });
  };
  for (const auto& [key, value] : forwarded) {
    if (!replaced(key)) add(key, value);
  }
  for (const auto& [key, value] : configured) add(key, value);
  return absl::OkStatus();
}

codecs::Status toUpstreamStatus(const grpc::Status& status, std::string_view upstream,
                                std::string_view endpoint) {
  const std::string& message = status.error_message();
  const std::string own = codecs::strCat("upstream '", upstream, "'");
  const std::string named =
      endpoint.empty() ? own : codecs::strCat(own, " (", endpoint, ")");
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE: {
      // The client's own refusal ("upstream 'x' is shut down") names the upstream already.
      return codecs::withOrigin(
          absl::UnavailableError(message.starts_with(own)
                                     ? message
                                     : codecs::strCat(named, " is unavailable: ", message)),
          codecs::ErrorOrigin::kUpstream);
    }
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return codecs::withOrigin(
          absl::DeadlineExceededError(codecs::strCat(named, " timed out",
                                                     message.empty() ? "" : ": ", message)),
          codecs::ErrorOrigin::kUpstream);
    case grpc::StatusCode::CANCELLED:
      // The gateway cancels a call only for a client that went away, who reads no answer;
      // a CANCELLED that reaches a client came from the upstream (a server shutting down
      // cancels the calls it has not answered): unavailable, not the client's doing.
      return codecs::withOrigin(
          absl::UnavailableError(codecs::strCat(named, " cancelled the call",
                                                message.empty() ? "" : ": ", message)),
          codecs::ErrorOrigin::kUpstream);
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
      // grpc's own words for a call the upstream broke rather than answered: the stream
      // reset (503, as a reset HTTP connection), or ended without a gRPC status, or
      // answered by something that is not gRPC (502). An upstream's own INTERNAL or
      // UNKNOWN (a failed model) carries its message and passes on below.
      if (message.starts_with("Received RST_STREAM")) {
        return codecs::withOrigin(
            absl::UnavailableError(codecs::strCat(named, " reset the call: ", message)),
            codecs::ErrorOrigin::kUpstream);
      }
      if (message == "Stream removed" || message.starts_with("Received http2 header with status") ||
          message.starts_with("Received unexpected EOS")) {
        return codecs::withOrigin(
            absl::InvalidArgumentError(codecs::strCat(named, " broke the gRPC protocol: ", message)),
            codecs::ErrorOrigin::kUpstream);
      }
      [[fallthrough]];
    default:
      // The upstream's own answer: Triton clients match on its code and
      // text. Not stamped kUpstream: an upstream's INVALID_ARGUMENT names the client's
      // mistake (400), not garbage from the upstream (502).
      return codecs::Status(static_cast<absl::StatusCode>(status.error_code()), message);
  }
}

}  // namespace infergate::gateway::upstream
