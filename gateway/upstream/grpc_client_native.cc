// GrpcLoopClient (grpc_client_native.h): unary gRPC over h2c on a worker loop, HTTP/2 by
// the project's own http2::ClientConnection.
//
//   Engine       the loop's state: a connection per endpoint (by key), the receive buffer,
//                the endings waiting to be told.
//   Connection   a socket, its HTTP/2 state, the calls on it by stream id, and the
//                output queue (below). Lives in `connections_` from socket() to drop().
//   Call         one unary call: the request's slices and the cursor over them, the
//                answer as it is read, the deadline timer. Held (shared) by the caller's
//                handle, by its connection's stream map while its body may be framed, and
//                by the endings list until `done` has run.
//
// Output queue. The HTTP/2 connection frames through two handler calls: control frames and
// frame headers are copied into the queue (small), and each DATA frame's payload is queued
// as references into the request's slices (each reference keeps its slice alive), so a
// tensor travels from the client's buffer to the socket without a copy. flush() hands the
// queue to sendmsg in batches of iovecs. While more than kMaxQueuedBytes wait for the
// socket, canWrite() says no and the connection keeps the rest.
//
// Endings. A call ends (finish) inside the connection's callbacks, a timer, or cancel(); `done`
// runs later, from deliver(): at the end of the socket or timer handler that ended it, or
// from a task posted to the loop, so that no caller's code runs inside the connection or inside
// unary() / cancel(). Handlers that may run a caller's code hold the engine's `alive_`
// token: a callback may destroy the client (the last reference to an upstream set), and
// the handler then returns without touching it.
//
// Sent or not. Each call records where its HEADERS frame starts in the connection's byte
// stream; a connection that fails before its written bytes reach that point never sent the
// call: it is sent once more on a fresh connection, or (its resend used, or connecting
// failed) ended as not sent.

#include "gateway/upstream/grpc_client_native.h"
#include "gateway/upstream/grpc_client_native_engine.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <new>
#include <optional>
#include <unordered_map>

#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "codecs/buffer_pool.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/text.h"
#include "gateway/upstream/http_client.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/upstream_status.h"


namespace infergate::gateway::upstream {
namespace {

using codecs::Status;
using codecs::strCat;
using native_grpc_detail::kMaxMessageBytes;
using http::toTimeval;

// grpc-timeout (PROTOCOL.md: at most 8 digits, then a unit): the remaining time rounded up.
std::string grpcTimeout(std::chrono::system_clock::duration left) {
  int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
  if (us < 1) us = 1;
  if (us < 100000000) return strCat(us, "u");
  int64_t ms = (us + 999) / 1000;
  if (ms < 100000000) return strCat(ms, "m");
  int64_t s = (ms + 999) / 1000;
  if (s < 100000000) return strCat(s, "S");
  return strCat(std::min<int64_t>((s + 3599) / 3600, 99999999), "H");
}

// Headers the client writes itself, whatever the metadata says.
bool reservedHeader(std::string_view key) {
  for (std::string_view own : {"content-type", "user-agent", "te", "grpc-timeout", "grpc-encoding",
                               "grpc-accept-encoding", "grpc-status", "grpc-message", "host",
                               "connection"}) {
    if (key == own) return true;
  }
  return false;
}

}  // namespace

// ---- calls ----

std::shared_ptr<GrpcCallHandle> GrpcLoopClient::Engine::unary(const config::ListenAddress& endpoint,
                                              std::string_view method,
                                              const codecs::MovableByteBuffer& request,
                                              const GrpcCallOptions& options, Done done) {
  auto call = std::make_shared<Call>();
  call->loop = &loop_;
  call->owner = this;
  call->done = std::move(done);
  call->endpoint = http_client_detail::endpointText(endpoint);
  call->key = endpoint.kind == config::ListenAddress::Kind::kUnix
                  ? strCat("unix:", endpoint.path)
                  : strCat(endpoint.host, "|", endpoint.port);
  call->address = endpoint;
  call->method = std::string(method);
  call->deadline = options.deadline;
  call->progress = options.answer_progress;

  // The client's own headers are never taken from the metadata (an HTTP client's
  // content-type, say); binary values travel base64-encoded, as gRPC's wire format says.
  Status refused = forEachCallMetadata(
      options.metadata, options_.headers, options_.upstream_name,
      [&call](const std::string& key, const std::string& value) {
        if (reservedHeader(key)) return;
        call->metadata.emplace_back(key, key.ends_with("-bin") ? absl::Base64Escape(value) : value);
      });

  // The payload: prefix (uncompressed, big-endian length) and the request's own slices.
  call->payload = GrpcOutMessage(request);
  const size_t size = call->payload.length();
  if (options.arrival != nullptr && !options.arrival->complete()) {
    call->arrival = options.arrival;
    call->arrival_watch = call->arrival->watch([weak = std::weak_ptr<Call>(call)] {
      std::shared_ptr<Call> c = weak.lock();
      if (c != nullptr && c->owner != nullptr) c->owner->onArrival(*c);
    });
  }

  if (!refused.ok()) {
    finish(*call, std::move(refused));
  } else if (size > kMaxMessageBytes) {
    finish(*call, absl::ResourceExhaustedError(strCat("the request to upstream '", options_.upstream_name,
                                                      "' is larger than gRPC's 2 GiB message limit")));
  } else if (call->arrival != nullptr && call->arrival->failed()) {
    finish(*call, http::BodyArrival::notArrived());
  } else if (call->deadline && *call->deadline <= std::chrono::system_clock::now()) {
    finish(*call, toUpstreamStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"),
                                   options_.upstream_name, call->endpoint));
  } else {
    if (call->deadline) {
      call->deadline_timer = evtimer_new(loop_.base(), &Engine::onDeadline, call.get());
      if (call->deadline_timer != nullptr) {
        timeval tv = toTimeval(std::chrono::duration_cast<std::chrono::microseconds>(
            *call->deadline - std::chrono::system_clock::now()));
        evtimer_add(call->deadline_timer, &tv);
      }
    }
    codecs::StatusOr<Connection*> c = connectionFor(*call);
    if (!c.ok()) {
      finish(*call, c.status());
    } else {
      submit(**c, call);
      Connection* on = call->connection;  // submit() may have moved it to a fresh connection
      if (call->owner != nullptr && on != nullptr && !on->connecting) pump(*on);
    }
  }
  scheduleDelivery();  // what ended already is told from the loop, never inside unary()
  return call;
}

codecs::StatusOr<GrpcLoopClient::Engine::Connection*> GrpcLoopClient::Engine::connectionFor(const Call& call) {
  auto it = by_key_.find(call.key);
  if (it != by_key_.end() && !it->second->draining) return it->second;
  return open(call);
}

void GrpcLoopClient::Engine::submit(Connection& c, const std::shared_ptr<Call>& call) {
  using Indexing = http2::HpackEncoder::Indexing;
  call->address_tries = 0;  // open() used it; a connection that fails later counts its own
  absl::InlinedVector<http2::ClientConnection::Field, 16> fields;  // a call's usual fields, on the stack
  std::string timeout;
  fields.push_back({":method", "POST"});
  fields.push_back({":scheme", "http"});
  fields.push_back({":path", call->method});
  fields.push_back({":authority", c.authority});
  fields.push_back({"te", "trailers"});
  fields.push_back({"content-type", "application/grpc"});
  fields.push_back({"user-agent", "infergate"});
  if (call->deadline) {
    timeout = grpcTimeout(*call->deadline - std::chrono::system_clock::now());
    fields.push_back({"grpc-timeout", timeout, Indexing::kNoIndex});
  }
  // Forwarded metadata changes from call to call (ids, traces): it stays out of the table,
  // and credentials are marked never to enter one.
  for (const auto& [key, value] : call->metadata) {
    fields.push_back({key, value, key == "authorization" || key == "cookie" ? Indexing::kNeverIndex : Indexing::kNoIndex});
  }

  call->promised = 0;
  call->deferred = false;
  call->payload.rewind();
  call->headers_at = UINT64_MAX;
  const int32_t id = c.h2->submitRequest(fields, true);
  if (id == 0 && !c.draining) {
    // The connection opens no more streams (its 2^31 ids used up): it serves what it has,
    // and the call goes on a fresh one.
    c.draining = true;
    if (auto it = by_key_.find(c.key); it != by_key_.end() && it->second == &c) by_key_.erase(it);
    codecs::StatusOr<Connection*> next = connectionFor(*call);
    if (!next.ok()) return finish(*call, next.status());
    return submit(**next, call);
  }
  if (id == 0) {
    finish(*call, markNotSent(unavailable(*call, "cannot start an HTTP/2 stream on a connection going away")));
    return;
  }
  call->connection = &c;
  call->stream_id = id;
  c.streams.emplace(id, call);
  if (call->progress != nullptr) {
    c.h2->ownWindow(id);  // before any of its DATA: the frames come from a later read
    call->owns_window = true;
  }
}

void GrpcLoopClient::Engine::cancel(Call& call) {
  std::shared_ptr<Call> keep = call.shared_from_this();
  call.handed.clear();  // not told: the caller wants nothing more
  Connection* c = call.connection;
  if (c != nullptr && call.stream_id > 0) c->h2->resetStream(call.stream_id, http2::kCancel);
  finish(call, absl::CancelledError("the request was cancelled"));
  if (c != nullptr && !c->connecting && pump(*c)) maybeClose(*c);  // the RST_STREAM
  scheduleDelivery();
}

void GrpcLoopClient::Engine::onArrival(Call& call) {
  if (call.arrival->failed()) return cancel(call);
  Connection* c = call.connection;
  if (!call.deferred || c == nullptr || call.stream_id <= 0) return;
  if (call.payload.arrivedFrom(call.promised, *call.arrival) == 0) return;  // not its bytes yet
  call.deferred = false;
  c->h2->resumeData(call.stream_id);
  if (!c->connecting) pump(*c);
  scheduleDelivery();  // what the pump ended
}

void GrpcLoopClient::Engine::finish(Call& call, Status status, codecs::MovableByteBuffer answer) {
  if (call.owner == nullptr) return;
  call.owner = nullptr;
  // The arrival stays (the connection may still frame the payload) but is no longer watched.
  if (call.arrival != nullptr) call.arrival->unwatch(call.arrival_watch);
  if (call.deadline_timer != nullptr) {
    event_free(call.deadline_timer);
    call.deadline_timer = nullptr;
  }
  // The connection keeps the call (it may still frame its payload) until the stream
  // closes; what arrives for it meanwhile is ignored.
  // Blocks not told yet go before `done`, with the ending.
  endings_.push_back(Ending{call.shared_from_this(), std::move(status), std::move(answer), std::move(call.handed)});
  call.handed.clear();
}

void GrpcLoopClient::Engine::breakAnswer(Call& call, std::string_view why) {
  if (call.broken) return;
  call.broken = brokeGrpc(call, why);
  if (call.connection != nullptr && call.stream_id > 0) call.connection->h2->resetStream(call.stream_id, http2::kCancel);
}

Status GrpcLoopClient::Engine::outcome(Call& call, uint32_t error_code) const {
  if (call.broken) return *call.broken;
  const std::string& name = options_.upstream_name;
  if (call.grpc_status) {
    if (call.http_status == 0) return brokeHttp2(call);
    if (call.http_status != 200) return brokeGrpc(call, strCat("answered HTTP status ", call.http_status));
    const int code = *call.grpc_status;
    if (code == 0 && call.frame_head_have > 0) {
      return brokeGrpc(call, "the answer's data does not end where its message's length prefix says");
    }
    if (code == 0) return absl::OkStatus();
    const auto grpc_code = code > 0 && code <= 16 ? static_cast<grpc::StatusCode>(code)
                                                   : grpc::StatusCode::UNKNOWN;
    return toUpstreamStatus(grpc::Status(grpc_code, call.grpc_message), name, call.endpoint);
  }
  // Refused, by an RST_STREAM or by a GOAWAY that did not cover it (the connection then
  // closes the streams past its last id, and the requests still queued): never processed.
  if (error_code == http2::kRefusedStream) {
    return markNotSent(unavailable(call, "the upstream refused the stream before reading it"));
  }
  if (error_code != http2::kNoError && !call.reset_by_upstream) {
    return brokeHttp2(call);  // the stream was reset on a protocol error of the upstream's
  }
  if (error_code != http2::kNoError) {
    const grpc::StatusCode code =
        error_code == http2::kCancel ? grpc::StatusCode::CANCELLED : grpc::StatusCode::INTERNAL;
    return toUpstreamStatus(grpc::Status(code, strCat("Received RST_STREAM with error code ", error_code)),
                            name, call.endpoint);
  }
  // No :status at all: HTTP/2 itself was broken.
  if (call.http_status == 0) return brokeHttp2(call);
  if (call.http_status != 200) return brokeGrpc(call, strCat("answered HTTP status ", call.http_status));
  if (!call.content_type_grpc) {
    return brokeGrpc(call, strCat("answered content-type '", call.content_type, "'"));
  }
  return brokeGrpc(call, "the call ended without a grpc-status");
}

codecs::MovableByteBuffer GrpcLoopClient::Engine::takeAnswer(Call& call) const {
  if (call.messages == 0) return {};
  // In blocks, the message went to the progress: an empty one (a message, not none).
  if (call.blocks) return codecs::MovableByteBuffer(codecs::BufferChain());
  // An empty message is an empty chain: BufferChain drops an empty Buffer.
  return codecs::MovableByteBuffer(codecs::BufferChain(std::move(call.message).freeze(call.message_size)));
}

size_t GrpcLoopClient::Engine::receiveData(Call& call, const uint8_t* data, size_t size) {
  size_t held = 0;
  while (size > 0 && !call.broken) {
    if (call.frame_head_have < 5) {
      const size_t n = std::min(size, 5 - call.frame_head_have);
      std::memcpy(call.frame_head + call.frame_head_have, data, n);
      call.frame_head_have += n;
      data += n;
      size -= n;
      if (call.frame_head_have < 5) return held;
      if (call.messages > 0) {
        breakAnswer(call, "a second message in a unary call's answer");
        return held;
      }
      if (call.frame_head[0] != 0) {
        breakAnswer(call, "a compressed message, with no grpc-encoding agreed");
        return held;
      }
      const size_t length = (size_t{call.frame_head[1]} << 24) | (size_t{call.frame_head[2]} << 16) |
                            (size_t{call.frame_head[3]} << 8) | size_t{call.frame_head[4]};
      if (length > kMaxMessageBytes) {
        breakAnswer(call, strCat("a message of ", length, " bytes, over gRPC's 2 GiB limit"));
        return held;
      }
      call.message_size = length;
      call.message_have = 0;
      // A progress taking blocks gets the message a block at a time, each block's bytes
      // held against the stream's window until it lets go of them.
      call.blocks = call.owns_window && length > kRelayStepBytes && call.progress->takesBlocks(length);
      if (call.blocks && call.window == nullptr) {
        call.window = std::make_shared<AnswerWindow>(AnswerWindow{call.weak_from_this()});
      }
      // Otherwise the whole message at once, so that it is never copied to grow (a 64 MiB
      // tensor's answer is a little over 64 MiB). The kernel backs a fresh block page by
      // page as the bytes are written; a block from the pool is memory already held.
      try {
        if (length > 0 && !call.blocks) call.message = codecs::BufferPool::shared().allocate(length);
      } catch (const std::bad_alloc&) {
        breakAnswer(call, "no memory for the answer");
        return held;
      }
      if (length == 0) {
        call.messages = 1;
        call.frame_head_have = 0;
      }
      continue;
    }
    size_t n = 0;
    if (call.blocks) {
      if (call.filling == nullptr) {
        try {
          call.filling = std::make_shared<AnswerBlock>(
              codecs::BufferPool::shared().allocate(std::min(kRelayBlockBytes, call.message_size - call.message_have)),
              0, call.window);
        } catch (const std::bad_alloc&) {
          breakAnswer(call, "no memory for a block of the answer");
          return held;
        }
        call.block_used = call.block_told = 0;
      }
      codecs::MutableBuffer& block = call.filling->block;
      n = std::min(size, block.size() - call.block_used);
      std::memcpy(block.data() + call.block_used, data, n);
      call.block_used += n;
      call.filling->bytes = call.block_used;
      held += n;
      // A block goes on once full (the last one is sized to fit), and its part written so
      // far every kRelayStepBytes: a slow upstream's bytes do not wait for a whole block.
      const bool full = call.block_used == block.size();
      if (full || call.block_used - call.block_told >= kRelayStepBytes) handOnBlock(call, full);
    } else {
      n = std::min(size, call.message_size - call.message_have);
      std::memcpy(call.message.data() + call.message_have, data, n);
    }
    call.message_have += n;
    data += n;
    size -= n;
    if (call.message_have == call.message_size) {
      call.messages = 1;
      call.frame_head_have = 0;  // what follows starts another message's prefix
    } else if (call.progress != nullptr && !call.blocks && !call.progress_due &&
               call.message_have - call.progress_told >= kRelayStepBytes) {
      call.progress_due = true;  // told from deliver(), outside the connection
      progressed_.push_back(call.shared_from_this());
    }
  }
  return held;
}

void GrpcLoopClient::Engine::handOnBlock(Call& call, bool full) {
  // A slice of the block, which its owner keeps (and its bytes against the window) until
  // every slice of it is let go of and the block is full.
  call.handed.emplace_back(call.filling, call.filling->block.data() + call.block_told, call.block_used - call.block_told);
  call.block_told = call.block_used;
  if (full) call.filling.reset();
  if (!call.progress_due) {
    call.progress_due = true;  // told from deliver(), outside the connection
    progressed_.push_back(call.shared_from_this());
  }
}

void GrpcLoopClient::Engine::AnswerWindow::release(size_t bytes) {
  std::shared_ptr<Call> c = call.lock();
  if (c == nullptr || c->connection == nullptr || c->stream_id <= 0) return;
  Connection& on = *c->connection;
  on.h2->freeWindow(c->stream_id, bytes);
  // Whatever WINDOW_UPDATE that queued goes out from the writable handler's pump, outside
  // whatever let go of the block (which may be inside this connection's own read).
  event_active(on.writable, EV_WRITE, 0);
}

// ---- endings ----

void GrpcLoopClient::Engine::resendRefused() {
  std::vector<std::shared_ptr<Call>> calls = std::move(refused_);
  refused_.clear();
  for (const std::shared_ptr<Call>& call : calls) {
    if (call->owner == nullptr) continue;
    codecs::StatusOr<Connection*> c = connectionFor(*call);
    if (!c.ok()) {
      finish(*call, c.status());
      continue;
    }
    submit(**c, call);
    Connection* on = call->connection;
    if (call->owner != nullptr && on != nullptr && !on->connecting) pump(*on);
  }
}

bool GrpcLoopClient::Engine::tellProgress() {
  std::weak_ptr<bool> alive = alive_;
  std::vector<std::shared_ptr<Call>> now = std::move(progressed_);
  progressed_.clear();
  for (const std::shared_ptr<Call>& call : now) {
    call->progress_due = false;
    if (call->owner == nullptr) continue;  // ended: its blocks go with its ending
    if (call->blocks) {
      std::vector<codecs::Buffer> blocks = std::move(call->handed);
      call->handed.clear();
      std::shared_ptr<AnswerProgress> progress = call->progress;  // the callee may cancel the call
      for (codecs::Buffer& block : blocks) {
        progress->onBlock(std::move(block));
        if (alive.expired()) return false;  // it destroyed the client
        if (call->owner == nullptr) break;  // it cancelled the call
      }
      continue;
    }
    // Whole: the message comes with `done`.
    if (call->messages > 0) continue;
    call->progress_told = call->message_have;
    std::shared_ptr<AnswerProgress> progress = call->progress;  // the callee may cancel the call
    progress->onProgress(call->message, call->message_have, call->message_size);
    if (alive.expired()) return false;  // it destroyed the client
  }
  return true;
}

void GrpcLoopClient::Engine::deliver() {
  resendRefused();
  if (!progressed_.empty() && !tellProgress()) return;
  std::weak_ptr<bool> alive = alive_;
  while (!endings_.empty()) {
    std::vector<Ending> now = std::move(endings_);
    endings_.clear();
    for (size_t i = 0; i < now.size(); ++i) {
      {
        // In its own block: the callback's captures die before `alive` is read (dropping
        // them may destroy the client too).
        Done done = std::move(now[i].call->done);
        now[i].call->done = nullptr;
        if (done && !now[i].blocks.empty()) {
          std::shared_ptr<AnswerProgress> progress = now[i].call->progress;
          for (codecs::Buffer& block : now[i].blocks) progress->onBlock(std::move(block));
          now[i].blocks.clear();
        }
        if (done) done(std::move(now[i].status), std::move(now[i].answer));
      }
      if (alive.expired()) return;  // a callback destroyed the client: the rest is dropped
    }
  }
}

void GrpcLoopClient::Engine::scheduleDelivery() {
  if ((endings_.empty() && refused_.empty()) || delivery_posted_) return;
  delivery_posted_ = true;
  loop_.post([this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    delivery_posted_ = false;
    deliver();
  });
}

void GrpcLoopClient::Engine::abandonAll() {
  progressed_.clear();
  for (Ending& e : endings_) e.call->done = nullptr;
  endings_.clear();
  for (const std::shared_ptr<Call>& call : refused_) {
    call->owner = nullptr;
    call->done = nullptr;
    if (call->deadline_timer != nullptr) {
      event_free(call->deadline_timer);
      call->deadline_timer = nullptr;
    }
  }
  refused_.clear();
  while (!connections_.empty()) {
    Connection& c = *connections_.begin()->first;
    for (auto& [id, call] : c.streams) {
      if (call->owner == nullptr) continue;
      call->owner = nullptr;
      call->done = nullptr;
      if (call->deadline_timer != nullptr) {
        event_free(call->deadline_timer);
        call->deadline_timer = nullptr;
      }
    }
    drop(c);
  }
}

// ---- GrpcLoopClient ----

GrpcLoopClient::GrpcLoopClient(http::EventLoop& loop, GrpcLoopClientOptions options)
    : loop_(loop), engine_(std::make_unique<Engine>(loop, std::move(options))) {}

GrpcLoopClient::~GrpcLoopClient() = default;

bool GrpcLoopClient::serves(const config::ListenAddress& endpoint) const {
  return http_client_detail::nativeReaches(endpoint, engine_->hosts());
}

std::shared_ptr<GrpcCallHandle> GrpcLoopClient::unary(const config::ListenAddress& endpoint,
                                                      std::string_view method,
                                                      const codecs::MovableByteBuffer& request,
                                                      const GrpcCallOptions& options, Done done) {
  return engine_->unary(endpoint, method, request, options, std::move(done));
}

void GrpcLoopClient::abandonAll() { engine_->abandonAll(); }

}  // namespace infergate::gateway::upstream
