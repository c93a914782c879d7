// The native server's calls (grpc_native_server_internal.h): a stream's request messages
// reassembled (and inflated), ModelInfer served on the connection's loop through
// ModelInferCall, every other method relayed to grpc++'s in-process channel (RelayCall),
// and the replies handed to the stream.

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>

#include <grpcpp/generic/generic_stub.h>

#include "codecs/buffer_pool.h"
#include "codecs/compression.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/frontends/grpc_native_server_internal.h"

namespace infergate::gateway::frontends::grpc_detail {
namespace native_server {
namespace {

using ::grpc::ByteBuffer;
using Fields = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kModelInferPath = "/inference.GRPCInferenceService/ModelInfer";

Fields fieldsOf(const std::multimap<::grpc::string_ref, ::grpc::string_ref>& metadata) {
  Fields out;
  out.reserve(metadata.size());
  for (const auto& [key, value] : metadata) {
    out.emplace_back(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
  }
  return out;
}

}  // namespace

// ---- ModelInfer, served on the connection's loop ----

class NativeModelInfer final : public ModelInferCall, public CallContext {
 public:
  NativeModelInfer(std::shared_ptr<Shared> shared, Stream& s)
      : ModelInferCall(std::move(shared), *s.connection->loop, *this),
        stream_(&s),
        fields_(std::move(s.metadata)),
        peer_(s.connection->peer),
        certificate_(peerCertificateOf(*s.connection)),
        deadline_(s.deadline) {
    for (const auto& [key, value] : fields_) {
      metadata_.emplace(::grpc::string_ref(key.data(), key.size()), ::grpc::string_ref(value.data(), value.size()));
    }
  }

  // The stream is gone (loop): no reply reaches it.
  void detach() { stream_ = nullptr; }

  const ClientMetadata& clientMetadata() const override { return metadata_; }
  std::chrono::system_clock::time_point deadline() const override { return deadline_; }
  std::string peer() const override { return peer_; }
  const tls::PeerIdentity* peerIdentity() const override { return certificate_ ? &certificate_->identity : nullptr; }

 private:
  void reply(Reply out) override {
    // The task runs before this call can be deleted: the delete is posted after the
    // reference that this reply comes under is released.
    loop().runInLoop([this, out = std::move(out)]() mutable {
      if (stream_ == nullptr) return;
      Stream& s = *stream_;
      if (s.finished) return;  // its deadline answered it
      s.initial_metadata = std::move(out.initial_metadata);
      const size_t limit = static_cast<size_t>(sharedOf(*s.connection).options.max_send_message_bytes);
      if (out.status.ok() && !out.sent_ahead && out.message.length() > limit) {
        out.status = ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                                    codecs::strCat("Sent message larger than max (", out.message.length(), " vs. ",
                                                   limit, ")"));
      }
      if (out.status.ok() && !out.sent_ahead) queueMessage(s, std::move(out.message));
      replyStatus(s, out.status, std::move(out.trailing_metadata));
    });
  }

  bool sendsAhead() const override { return true; }

  // The loop thread (the relay's, which is the stream's).
  void startAhead(std::vector<std::pair<std::string, std::string>> initial_metadata,
                  codecs::MovableByteBuffer message, std::shared_ptr<http::BodyArrival> arrival) override {
    if (stream_ == nullptr || stream_->finished) return;
    stream_->initial_metadata = std::move(initial_metadata);
    queueArrivingMessage(*stream_, std::move(message), std::move(arrival));
  }
  void startGrowing(std::vector<std::pair<std::string, std::string>> initial_metadata, size_t length) override {
    if (stream_ == nullptr || stream_->finished) return;
    stream_->initial_metadata = std::move(initial_metadata);
    queueGrowingMessage(*stream_, length);
  }
  void growAhead(codecs::Buffer piece) override {
    if (stream_ != nullptr) growMessage(*stream_, std::move(piece));
  }

  Stream* stream_;  // loop thread
  Fields fields_;   // what metadata_ refers to
  ClientMetadata metadata_;
  std::string peer_;
  std::shared_ptr<const PeerCertificate> certificate_;  // null: plaintext, or none sent
  std::chrono::system_clock::time_point deadline_;
};

// ---- every other method, relayed to grpc++ in process ----

class RelayCall final : public ::grpc::ClientBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  // Loop thread: the call toward grpc++ for the stream's method, started.
  static std::shared_ptr<RelayCall> start(Stream& s) {
    auto call = std::shared_ptr<RelayCall>(new RelayCall(s));
    call->self_ = call;
    ::grpc::ClientContext& context = call->context_;
    if (s.timeout) context.set_deadline(s.deadline);
    for (const auto& [key, value] : s.metadata) context.AddMetadata(key, value);
    context.AddMetadata(std::string(kNativePeerKey), s.connection->peer);
    if (const auto& certificate = peerCertificateOf(*s.connection)) {
      context.AddMetadata(std::string(kNativePeerCertificateKey), certificate->pem);
    }
    call->stub_.PrepareBidiStreamingCall(&context, s.path, ::grpc::StubOptions(), call.get());
    call->AddHold();  // writes may come from the loop until writesDone()
    call->StartRead(&call->read_);
    call->StartCall();
    return call;
  }

  // Loop thread.
  void write(codecs::MovableByteBuffer message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (half_closed_ || dropped_) return;
    backlog_.fetch_add(message.get().Length(), std::memory_order_relaxed);
    if (writing_) {
      queued_.push_back(std::move(message));
      return;
    }
    writing_ = true;
    current_ = std::move(message);
    StartWrite(&current_.get());
  }

  // Loop thread: the client ended its side.
  void writesDone() {
    std::lock_guard<std::mutex> lock(mu_);
    if (half_closed_ || dropped_) return;
    half_closed_ = true;
    if (!writing_) StartWritesDone();  // else once the last write is done
    releaseHoldLocked();
  }

  // Loop thread: the stream is gone; the call is cancelled unless grpc++ ended it.
  void detach() {
    stream_ = nullptr;
    if (read_paused_) {
      read_paused_ = false;
      RemoveHold();  // the paused read's: no more reads
    }
    context_.TryCancel();
    std::lock_guard<std::mutex> lock(mu_);
    dropped_ = true;
    queued_.clear();
    releaseHoldLocked();
  }

  void cancel() { context_.TryCancel(); }

  // Any thread: written and not yet taken by grpc++ reaches kRelayBacklogBytes.
  bool backlogged() const { return backlog_.load(std::memory_order_relaxed) >= kRelayBacklogBytes; }

  // Loop thread: the client took enough of the replies for the next to be read.
  void replyDrained(const Stream& s) {
    if (!read_paused_ || s.unpromised >= kRelayReplyBacklogBytes) return;
    read_paused_ = false;
    StartRead(&read_);
    RemoveHold();  // the read's own
  }

 private:
  explicit RelayCall(Stream& s)
      : live_(serverOf(*s.connection).liveRelays()), loop_(*s.connection->loop), stream_(&s),
        stub_(serverOf(*s.connection).fallback()) {}

  // Counts the call in its server's liveRelays() from its first member's construction to
  // its destruction, the last of any member's (NativeGrpcServer::awaitRelays).
  struct Counted {
    explicit Counted(std::atomic<size_t>& n) : n(n) { n.fetch_add(1); }
    ~Counted() { n.fetch_sub(1); }
    std::atomic<size_t>& n;
  };

  void releaseHoldLocked() {
    if (hold_released_) return;
    hold_released_ = true;
    RemoveHold();
  }

  // Messages grpc++ will never take (the call ended): out of the backlog. mu_ held.
  void dropQueuedLocked() {
    size_t dropped = 0;
    for (codecs::MovableByteBuffer& m : queued_) dropped += m.get().Length();
    queued_.clear();
    leaveBacklog(dropped);
  }

  // `bytes` left the backlog; the stream's held window goes back once it is under the limit.
  void leaveBacklog(size_t bytes) {
    if (bytes == 0) return;
    const size_t before = backlog_.fetch_sub(bytes, std::memory_order_relaxed);
    if (before < kRelayBacklogBytes || before - bytes >= kRelayBacklogBytes) return;
    loop_.post([self = self_] {  // before OnDone: self_ is set
      if (self->stream_ != nullptr && !self->backlogged()) releaseHeld(*self->stream_);
    });
  }

  // grpc's threads from here on.
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    leaveBacklog(current_.get().Length());
    if (!ok || dropped_) dropQueuedLocked();
    if (!queued_.empty()) {
      current_ = std::move(queued_.front());
      queued_.pop_front();
      StartWrite(&current_.get());
      return;
    }
    writing_ = false;
    if (half_closed_ && ok && !dropped_) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // grpc++ ended the call (its status follows in OnDone, which the hold would keep
      // back): what the client still writes goes nowhere.
      std::lock_guard<std::mutex> lock(mu_);
      dropped_ = true;
      if (!writing_) dropQueuedLocked();
      releaseHoldLocked();
      return;
    }
    Fields initial;
    if (!initial_read_) {
      initial_read_ = true;
      initial = fieldsOf(context_.GetServerInitialMetadata());
    }
    // The next read is started on the loop, once the client has room for this reply. A
    // hold keeps the call (and OnDone) until then: a read may only start on a live call.
    AddHold();
    loop_.post([self = self_, message = codecs::MovableByteBuffer(std::move(read_)),
                initial = std::move(initial)]() mutable {
      self->read_ = ByteBuffer();
      self->replied(std::move(message), std::move(initial));
    });
  }

  // Loop thread: a reply read from grpc++ (under the hold OnReadDone added).
  void replied(codecs::MovableByteBuffer message, Fields initial) {
    if (stream_ == nullptr || stream_->finished) return RemoveHold();  // cancelled: no more reads
    Stream& s = *stream_;
    if (!s.headers_sent && !initial.empty()) s.initial_metadata = std::move(initial);
    queueMessage(s, std::move(message));
    submitReply(s);  // may end the stream (detach: stream_ null)
    if (stream_ == nullptr) return RemoveHold();
    if (stream_->unpromised >= kRelayReplyBacklogBytes) {
      read_paused_ = true;  // replyDrained() reads on, or detach() lets the hold go
      return;
    }
    StartRead(&read_);
    RemoveHold();
  }

  void OnDone(const ::grpc::Status& status) override {
    Fields initial = initial_read_ ? Fields() : fieldsOf(context_.GetServerInitialMetadata());
    Fields trailing = fieldsOf(context_.GetServerTrailingMetadata());
    std::shared_ptr<RelayCall> self = std::move(self_);
    loop_.post([self, status, initial = std::move(initial), trailing = std::move(trailing)]() mutable {
      if (self->stream_ == nullptr) return;
      Stream& s = *self->stream_;
      if (!s.headers_sent && !initial.empty()) s.initial_metadata = std::move(initial);
      replyStatus(s, status, std::move(trailing));
    });
  }

  Counted live_;  // first: destroyed last
  http::EventLoop& loop_;
  Stream* stream_;  // loop thread
  ::grpc::ClientContext context_;
  ::grpc::GenericStub stub_;
  ByteBuffer read_;
  bool initial_read_ = false;  // grpc's threads, one reaction at a time
  std::mutex mu_;
  codecs::MovableByteBuffer current_;
  std::deque<codecs::MovableByteBuffer> queued_;
  std::atomic<size_t> backlog_{0};  // bytes write() took that grpc++ has not (current_ and queued_)
  bool read_paused_ = false;        // loop: no read of grpc++'s replies until replyDrained()
  bool writing_ = false;
  bool half_closed_ = false;  // the client ended its side
  bool dropped_ = false;      // the stream is gone, or grpc++ ended the call
  bool hold_released_ = false;
  std::shared_ptr<RelayCall> self_;  // until OnDone
};

namespace {

bool isModelInfer(const Stream& s) { return s.path == kModelInferPath; }

// One-block reservations past kMaxReservedMessageBytes whose bytes have not all arrived,
// across the process (receiveData): past kMaxReservedAheadBytes, a message is reserved in
// chunks instead, so that announcements alone cannot map more than that.
std::atomic<uint64_t> g_reserved_ahead{0};

bool reserveAhead(Stream& s) {
  uint64_t now = g_reserved_ahead.load(std::memory_order_relaxed);
  do {
    if (now + s.message_size > kMaxReservedAheadBytes) return false;
  } while (!g_reserved_ahead.compare_exchange_weak(now, now + s.message_size, std::memory_order_relaxed));
  s.reserved_ahead = s.message_size;
  return true;
}

// The message's next chunk (the rest, up to kMaxReservedMessageBytes); false once the
// stream is answered RESOURCE_EXHAUSTED because there is no memory for it.
bool allocateChunk(Stream& s) {
  try {
    s.chunk = codecs::BufferPool::shared().allocate(std::min(s.message_size - s.message_have, kMaxReservedMessageBytes));
    return true;
  } catch (const std::bad_alloc&) {
    replyStatus(s, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  codecs::strCat("no memory for a message of ", s.message_size, " bytes")));
    return false;
  }
}

// ---- messages handed over early ----
//
// A large ModelInfer message (kEarlyMessageBytes and more, uncompressed, reserved in one
// chunk of its size) goes to its call once its head is in: every field before the first
// raw_input_contents, within kMaxEarlyHeadBytes (codecs::findModelInferHead). The call
// routes on the head and, toward an upstream that takes it (`stream_requests`), sends the
// bytes on while the client still sends them (ModelInferCall::startArriving):
//
//   head in      the call starts on a view of the whole chunk, `request_arrival` at the
//                bytes in so far
//   more bytes   the arrival is told every kArrivalStepBytes
//   last byte    the whole message is peeked again before its last bytes are told: where
//                it routes as its head did, the arrival is complete. Where it does not (a
//                model name, version, sequence or region after the tensors, which protobuf
//                lets win; or a message the peek refuses), the early call is cancelled
//                (the upstream never has the message whole) and the message starts over
//                as one read whole, at END_STREAM: answered as it would have been
//   gone wrong   a second message, the stream ending inside this one, or the client's
//                reset: the call is cancelled and the arrival failed (the upstream's
//                stream is reset)

// The stream answers `status` itself: its early-started call is cancelled, and whatever
// waits for the message's bytes learns they will not come. Inside h2->receive() only.
void refuseEarlyCall(Stream& s, const ::grpc::Status& status) {
  std::shared_ptr<http::BodyArrival> arrival = std::move(s.request_arrival);
  if (s.infer != nullptr) {
    s.infer->detach();
    s.infer->cancel();
  }
  replyStatus(s, status);
  if (arrival) arrival->fail();
}

// Hands the message over once its head is in, or gives up on handing it over early.
void tryHandOverEarly(Stream& s) {
  const std::span<const uint8_t> in(s.chunk.data(), s.chunk_have);
  // Resumed where the last walk stopped: a head in many small pieces is walked once.
  EarlyHead& early = *s.early_head;
  const codecs::ModelInferHead head = codecs::findModelInferHead(in, s.message_size, early.scanned);
  if (head.state == codecs::ModelInferHead::State::kNeedMore && s.chunk_have < kMaxEarlyHeadBytes) {
    early.scanned = head.length;
    return;
  }
  std::optional<codecs::StatusOr<codecs::ModelRef>> ref;
  if (head.state == codecs::ModelInferHead::State::kFound) ref = codecs::peekModelInferRequest(in.first(head.length));
  if (!ref || !ref->ok() || (*ref)->model_name.empty()) {  // read whole: its decode says what is wrong
    s.early_head.reset();
    return;
  }
  early.ref = codecs::OwnedModelRef{std::string((*ref)->model_name), std::string((*ref)->model_version),
                                    std::move((*ref)->sequence), (*ref)->shared_memory};
  s.request_arrival = std::make_shared<http::BodyArrival>(s.chunk.data(), s.message_size);
  s.request_arrival->advance(s.chunk_have);
  ++s.messages;
  early.metadata = s.metadata;  // the call takes s.metadata
  codecs::Buffer whole = s.chunk.shareWritten(0, s.message_size);
  codecs::Buffer head_bytes = whole.slice(0, head.length);
  const std::span<const uint8_t> unread = whole.span();
  codecs::MovableByteBuffer request(codecs::BufferChain(std::move(whole)), unread);
  auto* call = new NativeModelInfer(serverOf(*s.connection).shared(), s);
  s.infer = call;
  call->startArriving(std::move(request), std::move(head_bytes), s.request_arrival);
}

// The early-handed message is whole: told complete when it routes as its head did, else
// started over (see the top of this section).
void completeEarly(Stream& s) {
  std::shared_ptr<http::BodyArrival> arrival = std::move(s.request_arrival);
  codecs::StatusOr<codecs::ModelRef> whole =
      codecs::peekModelInferRequest(std::span<const uint8_t>(s.chunk.data(), s.message_size));
  const codecs::OwnedModelRef& head = s.early_head->ref;
  if (whole.ok() && whole->model_name == head.model_name && whole->model_version == head.model_version &&
      whole->sequence == head.sequence && whole->shared_memory == head.shared_memory) {
    s.chunk = codecs::MutableBuffer();  // the call's view keeps the bytes
    s.early_head.reset();
    arrival->advance(s.message_size);
    return;
  }
  NativeModelInfer* early = std::exchange(s.infer, nullptr);
  early->detach();
  early->cancel();
  early->engineDone();
  arrival->fail();
  s.metadata = std::move(s.early_head->metadata);
  s.early_head.reset();
  s.unary_request = codecs::MovableByteBuffer(codecs::BufferChain(std::move(s.chunk).freeze(s.message_size)));
}

void onMessage(Stream& s, codecs::BufferChain message) {
  const Shared& shared = sharedOf(*s.connection);
  ++s.messages;
  if (!s.relay && s.messages > 1) {
    return refuseEarlyCall(s, ::grpc::Status(::grpc::StatusCode::INTERNAL,
                                             "ModelInfer is unary: the request carried a second message"));
  }
  codecs::MovableByteBuffer buffer;
  if (s.compressed) {
    // grpc's answers: a compressed message without an encoding, or one that does not
    // inflate, is INTERNAL; past the limit once inflated, RESOURCE_EXHAUSTED.
    if (s.encoding == codecs::ContentEncoding::kIdentity) {
      return replyStatus(s, ::grpc::Status(::grpc::StatusCode::INTERNAL,
                                           "a compressed message with grpc-encoding 'identity'"));
    }
    codecs::StatusOr<codecs::Buffer> bytes =
        codecs::decompress(s.encoding, message, static_cast<uint64_t>(shared.options.max_receive_message_bytes));
    if (!bytes.ok() && bytes.status().code() != absl::StatusCode::kResourceExhausted) {
      return replyStatus(s, ::grpc::Status(::grpc::StatusCode::INTERNAL, std::string(codecs::messageOf(bytes.status()))));
    }
    if (!bytes.ok()) return replyStatus(s, grpcStatusFor(bytes.status()));
    buffer = codecs::MovableByteBuffer(codecs::BufferChain(std::move(*bytes)));
  } else {
    buffer = codecs::MovableByteBuffer(std::move(message));  // grpc's slices made only for a relay
  }
  if (s.relay) return s.relay->write(std::move(buffer));
  s.unary_request = std::move(buffer);
}

}  // namespace

void startCall(Stream& s) {
  const Shared& shared = sharedOf(*s.connection);
  using Code = ::grpc::StatusCode;
  if (s.metadata_too_large) {
    return replyStatus(s, ::grpc::Status(Code::RESOURCE_EXHAUSTED,
                                         codecs::strCat("the call's metadata is larger than ",
                                                        shared.options.max_metadata_bytes, " bytes")));
  }
  if (s.method != "POST") {
    return replyStatus(s, ::grpc::Status(Code::UNIMPLEMENTED, codecs::strCat("method ", s.method, " is not POST")));
  }
  if (!s.content_type.starts_with("application/grpc") ||
      (s.content_type.size() > 16 && s.content_type[16] != '+' && s.content_type[16] != ';')) {
    return replyStatus(s, ::grpc::Status(Code::INTERNAL, codecs::strCat("content-type '", s.content_type,
                                                                        "' is not application/grpc")));
  }
  if (s.bad_timeout) return replyStatus(s, ::grpc::Status(Code::INTERNAL, "the grpc-timeout header is malformed"));
  // HTTP/2 carries keys and values grpc cannot (and grpc++ aborts on relaying them).
  for (const auto& [key, value] : s.metadata) {
    if (const char* problem = upstream::grpcMetadataProblem(key, value)) {
      return replyStatus(s, ::grpc::Status(Code::INVALID_ARGUMENT,
                                           codecs::strCat("metadata '", key, "' is not valid gRPC metadata: ", problem)));
    }
  }
  codecs::StatusOr<codecs::ContentEncoding> encoding = codecs::parseContentEncoding(s.encoding_name);
  if (!encoding.ok()) {
    return replyStatus(s,
                       ::grpc::Status(Code::UNIMPLEMENTED,
                                      codecs::strCat("grpc-encoding '", s.encoding_name, "' is not supported")),
                       {{"grpc-accept-encoding", "identity,deflate,gzip"}});
  }
  s.encoding = *encoding;
  if (s.timeout) {
    s.deadline = std::chrono::system_clock::now() +
                 std::chrono::duration_cast<std::chrono::system_clock::duration>(*s.timeout);
    s.deadline_timer = evtimer_new(
        s.connection->loop->base(), [](evutil_socket_t, short, void* arg) { expireCall(*static_cast<Stream*>(arg)); },
        &s);
    if (s.deadline_timer != nullptr) {
      timeval tv = http::toTimeval(std::chrono::duration_cast<std::chrono::microseconds>(*s.timeout));
      evtimer_add(s.deadline_timer, &tv);
    }
  }
  if (!isModelInfer(s)) s.relay = RelayCall::start(s);
}

void receiveData(Stream& s, const uint8_t* data, size_t size) {
  if (s.finished) return;  // answered (an error): the rest is dropped
  const size_t limit = static_cast<size_t>(sharedOf(*s.connection).options.max_receive_message_bytes);
  while (size > 0) {
    if (s.head_have < 5) {
      const size_t n = std::min(size, 5 - s.head_have);
      std::memcpy(s.head + s.head_have, data, n);
      s.head_have += n;
      data += n;
      size -= n;
      if (s.head_have < 5) return;
      if ((s.head[0] & ~1u) != 0) {
        return replyStatus(s, ::grpc::Status(::grpc::StatusCode::INTERNAL, "a message's flags byte is not 0 or 1"));
      }
      s.compressed = (s.head[0] & 1u) != 0;
      s.message_size = (size_t{s.head[1]} << 24) | (size_t{s.head[2]} << 16) | (size_t{s.head[3]} << 8) | s.head[4];
      if (s.message_size > limit) {
        return replyStatus(s, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                                             codecs::strCat("Received message larger than max (", s.message_size,
                                                            " vs. ", limit, ")")));
      }
      // ModelInfer's one message is reassembled whole whatever the window: one larger than
      // the stream's window gets a larger one at once instead of WINDOW_UPDATEs on the way.
      if (!s.relay && s.message_size + 5 > static_cast<size_t>(kStreamWindow)) {
        s.connection->h2->setStreamWindow(s.id, kRaisedStreamWindow);
      }
      s.parts = codecs::BufferChain();
      // Past kMaxReservedMessageBytes a message is reserved whole only in a block the pool
      // already holds (the last large message's, usually): one block, nothing to join
      // before it is decoded. Except ModelInfer's uncompressed one, which always lands in
      // one block of its size: it may be handed over early, as one span its BodyArrival
      // follows. Neither costs memory on an announcement alone: a fresh block that large
      // is a mapping of its own whose pages are touched only as the bytes land, and such
      // blocks whose bytes are not all in map at most kMaxReservedAheadBytes across the
      // process. Past that, or where the mapping fails, chunks; where even a chunk cannot
      // be had, RESOURCE_EXHAUSTED.
      codecs::BufferPool& pool = codecs::BufferPool::shared();
      s.chunk = codecs::MutableBuffer();
      s.chunk_have = 0;
      s.message_have = 0;
      if (s.message_size > kMaxReservedMessageBytes) {
        if (!s.relay && !s.compressed && reserveAhead(s)) {
          try {
            s.chunk = pool.allocate(s.message_size);
          } catch (const std::bad_alloc&) {
            releaseAhead(s);
          }
        }
        if (s.chunk.size() == 0) s.chunk = pool.takeFree(s.message_size);
      }
      if (s.chunk.size() == 0 && !allocateChunk(s)) return;
      if (!s.relay && !s.compressed && s.messages == 0 && s.message_size >= kEarlyMessageBytes &&
          s.chunk.size() == s.message_size) {
        s.early_head = std::make_unique<EarlyHead>();
      }
    }
    if (s.chunk_have == s.chunk.size() && s.message_have < s.message_size) {
      s.parts.append(std::move(s.chunk).freeze());
      if (!allocateChunk(s)) return;
      s.chunk_have = 0;
    }
    const size_t n = std::min(size, s.chunk.size() - s.chunk_have);
    if (n > 0) std::memcpy(s.chunk.data() + s.chunk_have, data, n);
    s.chunk_have += n;
    s.message_have += n;
    data += n;
    size -= n;
    if (s.message_have < s.message_size) {
      if (s.request_arrival) {  // handed over: told in steps
        if (s.chunk_have - s.request_arrival->received() >= kArrivalStepBytes) {
          std::shared_ptr<http::BodyArrival> arrival = s.request_arrival;
          arrival->advance(s.chunk_have);  // its senders may answer the call
        }
      } else if (s.early_head) {
        tryHandOverEarly(s);
      }
      if (s.finished) return;
      continue;
    }
    s.head_have = 0;
    releaseAhead(s);
    if (s.request_arrival) {
      completeEarly(s);
      if (s.finished) return;
      continue;
    }
    s.early_head.reset();  // whole before its head was found
    if (s.chunk_have > 0 || s.parts.segments().empty()) s.parts.append(std::move(s.chunk).freeze(s.chunk_have));
    onMessage(s, std::move(s.parts));
    if (s.finished) return;
  }
}

void endRequest(Stream& s) {
  if (s.request_ended) return;
  s.request_ended = true;
  if (s.finished) return;
  // A stream ends with its complete messages (a partial one is dropped); a unary call
  // without its one whole message has no request.
  if (s.relay) return s.relay->writesDone();
  if (s.head_have != 0) {  // a message handed over early has its call cancelled as well
    return refuseEarlyCall(s, ::grpc::Status(::grpc::StatusCode::INTERNAL, "the request ended inside a message"));
  }
  if (s.infer != nullptr) return;  // handed over early, and whole
  if (!s.unary_request) {
    return replyStatus(s, ::grpc::Status(::grpc::StatusCode::INTERNAL, "ModelInfer without a request message"));
  }
  auto* call = new NativeModelInfer(serverOf(*s.connection).shared(), s);
  s.infer = call;
  codecs::MovableByteBuffer request = std::move(*s.unary_request);
  s.unary_request.reset();
  call->start(std::move(request));
}

bool relayBacklogged(const Stream& s) { return s.relay && s.relay->backlogged(); }

void releaseAhead(Stream& s) {
  if (s.reserved_ahead == 0) return;
  g_reserved_ahead.fetch_sub(std::exchange(s.reserved_ahead, 0), std::memory_order_relaxed);
}

void replyDrained(Stream& s) { s.relay->replyDrained(s); }

void detachCall(Stream& s, bool cancelled) {
  // A message handed over early that never came whole (the client reset the stream, or
  // the connection went): its upstream call is cancelled with it.
  std::shared_ptr<http::BodyArrival> arrival = std::move(s.request_arrival);
  if (s.infer != nullptr) {
    NativeModelInfer* call = s.infer;
    s.infer = nullptr;
    call->detach();
    if (cancelled || arrival) call->cancel();
    call->engineDone();
  }
  if (arrival) arrival->fail();
  if (s.relay) {
    // Cancelled whether or not the client saw a status: one the server made itself (a
    // refused message) leaves grpc++'s side waiting for what will not come. Once grpc++
    // ended the call, the cancel does nothing.
    std::shared_ptr<RelayCall> relay = std::move(s.relay);
    relay->detach();
  }
}

void expireCall(Stream& s) {
  // The calls first, told that the stream answers for itself (a cancel may answer at once,
  // on this thread); then the reply, which may end the stream (and its connection): the
  // stream is not touched after it.
  if (s.infer != nullptr) {
    s.infer->detach();
    s.infer->cancel();
  }
  if (s.relay) s.relay->cancel();
  replyStatus(s, ::grpc::Status(::grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
}


}  // namespace native_server
}  // namespace infergate::gateway::frontends::grpc_detail
