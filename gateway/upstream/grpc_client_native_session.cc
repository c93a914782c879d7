// GrpcLoopClient's connections (grpc_client_native_engine.h; how it all works: the top of
// grpc_client_native.cc): opening one, its HTTP/2 state and what that calls back,
// the output queue and its flush, a connection's failure and end, and the socket and
// timer events that drive them.

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
#include <optional>
#include <unordered_map>

#include "codecs/grpc_message_text.h"
#include "codecs/text.h"
#include "gateway/upstream/http_client.h"  // kRelayWindowBytes
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/upstream_status.h"


namespace infergate::gateway::upstream {
namespace {

using codecs::Status;
using codecs::strCat;
using native_grpc_detail::kMaxHeaderListBytes;
using native_grpc_detail::kMaxQueuedBytes;
using native_grpc_detail::kReadBufferBytes;
using native_grpc_detail::kWindow;
using http::toTimeval;
using http_client_detail::SocketAddress;

}  // namespace

// ---- connections ----

codecs::StatusOr<GrpcLoopClient::Engine::Connection*> GrpcLoopClient::Engine::open(const Call& call) {
  // A host name's address that refuses at once passes the connection on to the next.
  size_t start = call.address_start;
  for (size_t attempt = call.address_tries;; ++attempt) {
    codecs::StatusOr<http_client_detail::ConnectTarget> target = http_client_detail::connectTarget(
        call.address, options_.hosts.get(), attempt, start, options_.upstream_name);
    if (!target.ok()) {
      if (!absl::IsUnavailable(target.status())) return target.status();
      return markNotSent(unavailable(call, codecs::messageOf(target.status())));
    }
    start = target->start;
    const bool more = target->host != nullptr && attempt + 1 < target->count;
    codecs::StatusOr<Connection*> c = openTo(call, std::move(*target), attempt, more);
    if (c.ok() && *c == nullptr) continue;
    return c;
  }
}

codecs::StatusOr<GrpcLoopClient::Engine::Connection*> GrpcLoopClient::Engine::openTo(
    const Call& call, http_client_detail::ConnectTarget target, size_t attempt, bool more) {
  SocketAddress& address = target.address;
  const int family = address.storage.ss_family;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return markNotSent(unavailable(call, strCat("cannot open a socket: ", std::strerror(errno))));
  if (family != AF_UNIX) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  }
  auto owned = std::make_unique<Connection>();
  Connection& c = *owned;
  c.engine = this;
  c.key = call.key;
  c.authority = address.authority;
  // As grpc's target name override: the name the certificate holds is the call's authority.
  if (options_.tls != nullptr && !options_.tls->settings().config.server_name.empty()) {
    c.authority = options_.tls->settings().config.server_name;
  }
  c.fd = fd;
  c.readable = event_new(loop_.base(), fd, EV_READ | EV_PERSIST, &Engine::onReadable, &c);
  c.writable = event_new(loop_.base(), fd, EV_WRITE | EV_PERSIST, &Engine::onWritable, &c);
  if (options_.tls != nullptr) c.tls = std::make_unique<tls::ClientSession>(options_.tls, fd, call.address);
  connections_.emplace(&c, std::move(owned));
  if (c.readable == nullptr || c.writable == nullptr || !startSession(c) ||
      (c.tls != nullptr && !c.tls->error().empty())) {
    drop(c);
    return codecs::withOrigin(codecs::internalError("upstream '", options_.upstream_name, "' (", call.endpoint,
                                                    "): cannot set up a connection"),
                              codecs::ErrorOrigin::kInternal);
  }
  c.target = std::move(target);
  c.attempt = attempt;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&c.target.address.storage), c.target.address.length) != 0) {
    if (errno != EINPROGRESS) {
      const int err = errno;
      drop(c);
      if (more) return nullptr;
      return markNotSent(unavailable(call, strCat("cannot connect: ", std::strerror(err))));
    }
    c.connecting = true;
    event_add(c.writable, nullptr);
  } else {
    c.target.connected();
    event_add(c.readable, nullptr);
  }
  // Bounds the connect and the upstream's first SETTINGS (onFrameRecv ends it): a peer
  // that takes the connection and never speaks HTTP/2 fails the calls as unconnected.
  c.connect_timer = evtimer_new(loop_.base(), &Engine::onConnectTimeout, &c);
  if (c.connect_timer != nullptr) {
    timeval tv = toTimeval(options_.connect_timeout);
    evtimer_add(c.connect_timer, &tv);
  }
  c.keepalive_timer = evtimer_new(loop_.base(), &Engine::onKeepalive, &c);
  if (c.keepalive_timer != nullptr) {
    timeval tv = toTimeval(options_.keepalive_time);
    evtimer_add(c.keepalive_timer, &tv);
  }
  by_key_[c.key] = &c;
  return &c;
}

bool GrpcLoopClient::Engine::startSession(Connection& c) {
  http2::ClientConnection::Options options;
  options.max_header_list_bytes = kMaxHeaderListBytes;
  // Each stream may run a relay's window ahead (AnswerProgress::onBlock), given back at
  // half; the connection's own window stays HTTP/2's largest.
  options.stream_window = kRelayWindowBytes;
  c.h2 = std::make_unique<http2::ClientConnection>(c, options);
  return true;
}

bool GrpcLoopClient::Engine::connected(Connection& c) {
  c.connecting = false;
  c.target.connected();
  event_del(c.writable);
  event_add(c.readable, nullptr);  // the connect timer runs on until the upstream's SETTINGS
  return pump(c);
}

bool GrpcLoopClient::Engine::pump(Connection& c) {
  for (;;) {
    c.paused = false;
    c.h2->send();
    if (!flush(c)) return false;
    if (hasOutput(c)) {
      // A TLS handshake that waits for the upstream's answer: the read brings it and
      // pumps again (a writable socket would only spin).
      if (c.tls != nullptr && c.tls->wantsReadable() && !c.read_wants_write) {
        event_del(c.writable);
      } else {
        event_add(c.writable, nullptr);
      }
      return true;
    }
    // Paused by the queue's cap (even before queueing anything, when the queue was full on
    // entry), which the socket has now drained: frame the rest. Not paused: the connection
    // has nothing it may send (done, or waiting for the upstream's WINDOW_UPDATE, which a
    // read brings, and the read pumps again).
    if (!c.paused || !c.h2->wantsWrite()) break;
  }
  if (!c.read_wants_write) event_del(c.writable);
  return true;
}

bool GrpcLoopClient::Engine::flush(Connection& c) {
  if (c.tls == nullptr) {
    if (c.out.flush(c.fd)) return true;
    fail(c, strCat("the connection failed: ", std::strerror(errno)), Failure::kClosed);
    return false;
  }
  tls::ClientSession& session = *c.tls;
  bool ok = c.out.flushWith([&session](const iovec* iov, int count) { return session.writev(iov, count); });
  // Bytes the session took stay staged until the socket takes them.
  if (ok && c.out.empty() && session.hasBufferedOutput() && session.writev(nullptr, 0) < 0) {
    ok = errno == EAGAIN;
  }
  if (ok) return checkHandshake(c);
  if (handshaking(c)) {
    fail(c, strCat("the TLS handshake failed: ", session.error()), Failure::kConnect);
  } else {
    fail(c, strCat("the connection failed: ", session.error().empty() ? std::strerror(errno) : session.error()),
         Failure::kClosed);
  }
  return false;
}

bool GrpcLoopClient::Engine::checkHandshake(Connection& c) {
  if (c.tls == nullptr || c.tls_established || !c.tls->handshakeDone()) return true;
  c.tls_established = true;
  const std::string alpn = c.tls->alpn();
  if (alpn.empty() || alpn == "h2") return true;  // no ALPN at all: HTTP/2 is tried
  fail(c, strCat("the upstream's TLS agreed on '", alpn, "', not HTTP/2 ('h2')"), Failure::kConnect);
  return false;
}

void GrpcLoopClient::Engine::fail(Connection& c, std::string_view why_text, Failure kind) {
  const std::string why(why_text);
  const bool connect_failed = kind == Failure::kConnect;
  // A host name's address that refused the connection (or never took it): its calls go on
  // to the next address, until each was tried once.
  const bool next_address = connect_failed && c.connecting && c.target.host != nullptr &&
                            c.attempt + 1 < c.target.count;
  const size_t next_attempt = c.attempt + 1;
  const size_t start = c.target.start;
  std::unordered_map<int32_t, std::shared_ptr<Call>> streams = std::move(c.streams);
  c.streams.clear();
  // Bytes a TLS session took before its handshake ended reached no upstream.
  const uint64_t written = handshaking(c) ? 0 : c.out.written();
  drop(c);
  std::vector<Connection*> resent_on;
  for (auto& [id, call] : streams) {
    call->connection = nullptr;
    call->stream_id = -1;
    if (call->owner == nullptr) continue;
    if (call->broken) {  // what broke first is what the call is told
      finish(*call, *call->broken);
      continue;
    }
    const bool unsent = call->headers_at == UINT64_MAX || written <= call->headers_at;
    if (unsent && (next_address || (!connect_failed && !call->resent))) {
      if (next_address) {
        call->address_tries = next_attempt;
        call->address_start = start;
      } else {
        call->resent = true;  // as the HTTP client: a dead kept-alive connection costs one resend
      }
      codecs::StatusOr<Connection*> next = connectionFor(*call);
      if (!next.ok()) {
        finish(*call, next.status());
        continue;
      }
      submit(**next, call);
      Connection* on = call->connection;  // submit() may have moved it on
      if (on != nullptr && std::find(resent_on.begin(), resent_on.end(), on) == resent_on.end()) {
        resent_on.push_back(on);
      }
      continue;
    }
    // However a broken connection ended (a GOAWAY, a failed read, streams closed one by
    // one), the call is told the same whatever it was.
    Status cause = kind == Failure::kBroken ? brokeHttp2(*call) : unavailable(*call, why);
    finish(*call, unsent ? markNotSent(std::move(cause)) : std::move(cause));
  }
  for (Connection* next : resent_on) {
    if (connections_.count(next) != 0 && !next->connecting) pump(*next);
  }
}

void GrpcLoopClient::Engine::drop(Connection& c) {
  for (auto& [id, call] : c.streams) {
    call->connection = nullptr;
    call->stream_id = -1;
  }
  c.streams.clear();
  if (c.readable != nullptr) event_free(c.readable);
  if (c.writable != nullptr) event_free(c.writable);
  if (c.connect_timer != nullptr) event_free(c.connect_timer);
  if (c.keepalive_timer != nullptr) event_free(c.keepalive_timer);
  c.h2.reset();
  if (c.tls != nullptr) c.tls->shutdown();
  c.tls.reset();
  if (c.fd >= 0) ::close(c.fd);
  auto it = by_key_.find(c.key);
  if (it != by_key_.end() && it->second == &c) by_key_.erase(it);
  connections_.erase(&c);  // `c` is gone
}


void GrpcLoopClient::Engine::maybeClose(Connection& c) {
  const bool finished = c.h2->terminated();
  if (finished || (c.draining && c.streams.empty())) {
    if (c.streams.empty()) return drop(c);
    // Only a GOAWAY of the gateway's own ends a session under open streams: the upstream
    // broke HTTP/2's rules (or does not speak it).
    fail(c, "the session ended on a protocol error", Failure::kBroken);
  }
}

// ---- the HTTP/2 connection's handler ----

bool GrpcLoopClient::Engine::Connection::canWrite() {
  if (out.unwritten() <= kMaxQueuedBytes) return true;
  paused = true;
  return false;
}

void GrpcLoopClient::Engine::Connection::writeBytes(std::string_view bytes) {
  out.queueOwned(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

void GrpcLoopClient::Engine::Connection::beforeHeaders(int32_t stream) {
  Call* call = callOf(stream);
  if (call != nullptr && call->headers_at == UINT64_MAX) call->headers_at = out.queued();  // its first byte is next
}

size_t GrpcLoopClient::Engine::Connection::bodyReady(int32_t stream, size_t max, bool& last) {
  Call* call = callOf(stream);
  if (call == nullptr) {  // not the connection's to frame any more
    last = true;
    return 0;
  }
  const size_t ready = call->arrival != nullptr ? call->payload.arrivedFrom(call->promised, *call->arrival)
                                                : call->payload.size() - call->promised;
  const size_t n = std::min(max, ready);
  if (n == 0 && call->promised < call->payload.size()) {  // the client's body has not come this far
    call->deferred = true;
    last = false;
    return 0;
  }
  call->promised += n;
  last = call->promised == call->payload.size();
  return n;
}

void GrpcLoopClient::Engine::Connection::writeData(int32_t stream, const uint8_t* head, size_t length) {
  Call* call = callOf(stream);
  out.queueDataFrame(head, [&] {
    if (call != nullptr) call->payload.queueInto(out, length);
  });
}

void GrpcLoopClient::Engine::Connection::onField(int32_t stream, std::string_view name, std::string_view value) {
  Call* call = callOf(stream);
  if (call == nullptr || call->owner == nullptr) return;
  auto number = [](std::string_view v) -> int {
    if (v.empty() || v.size() > 9) return -1;
    int n = 0;
    for (char ch : v) {
      if (ch < '0' || ch > '9') return -1;
      n = n * 10 + (ch - '0');
    }
    return n;
  };
  if (name == ":status") {
    call->block.http_status = number(value);
  } else if (name == "content-type") {
    call->block.content_type_seen = true;
    call->block.content_type_grpc = value.starts_with("application/grpc");
    if (!call->block.content_type_grpc) call->block.content_type = std::string(value);
  } else if (name == "grpc-status") {
    const int code = number(value);
    call->block.grpc_status = code < 0 ? static_cast<int>(grpc::StatusCode::UNKNOWN) : code;
  } else if (name == "grpc-message") {
    call->block.grpc_message = codecs::grpcMessageDecoded(value);
  }
}

void GrpcLoopClient::Engine::Connection::onHeadersEnd(int32_t stream, bool) {
  Call* call = callOf(stream);  // the whole block arrived: its fields count
  if (call == nullptr) return;
  Call::Fields& b = call->block;
  if (b.http_status != 0) call->http_status = b.http_status;
  if (b.content_type_seen) {
    call->content_type = std::move(b.content_type);
    call->content_type_grpc = b.content_type_grpc;
  }
  if (b.grpc_status) call->grpc_status = b.grpc_status;
  if (!b.grpc_message.empty()) call->grpc_message = std::move(b.grpc_message);
  b = Call::Fields();
}

void GrpcLoopClient::Engine::Connection::onData(int32_t stream, const uint8_t* data, size_t size) {
  Call* call = callOf(stream);
  size_t held = 0;
  // Not a gRPC answer: its body is not read (outcome() names why); a call ended: ignored.
  if (call != nullptr && call->owner != nullptr && call->http_status == 200 && call->content_type_grpc) {
    held = engine->receiveData(*call, data, size);
  }
  // A window the call owns: what went into no block is free at once.
  if (call != nullptr && call->owns_window && held < size) h2->freeWindow(stream, size - held);
}

void GrpcLoopClient::Engine::Connection::onStreamClose(int32_t stream, uint32_t error_code, bool reset_by_peer) {
  auto it = streams.find(stream);
  if (it == streams.end()) return;
  std::shared_ptr<Call> call = std::move(it->second);
  streams.erase(it);
  call->connection = nullptr;
  call->stream_id = -1;
  if (reset_by_peer && error_code != http2::kRefusedStream) call->reset_by_upstream = true;
  if (call->owner == nullptr) return;
  Engine& e = *engine;
  if (error_code == http2::kRefusedStream && call->http_status == 0 && !call->broken && !call->resent) {
    call->resent = true;  // never processed: once more, outside the connection (resendRefused),
    e.refused_.push_back(std::move(call));
    // on a fresh connection: one that refuses streams is going away (or overloaded)
    draining = true;
    auto by = e.by_key_.find(key);
    if (by != e.by_key_.end() && by->second == this) e.by_key_.erase(by);
    return;
  }
  Status status = e.outcome(*call, error_code);
  codecs::MovableByteBuffer answer = status.ok() ? e.takeAnswer(*call) : codecs::MovableByteBuffer();
  e.finish(*call, std::move(status), std::move(answer));
}

void GrpcLoopClient::Engine::Connection::onSettings() {
  if (connect_timer != nullptr) {
    event_free(connect_timer);  // the upstream speaks HTTP/2: connected
    connect_timer = nullptr;
  }
}

void GrpcLoopClient::Engine::Connection::onPingAck() {
  if (ping_outstanding && keepalive_timer != nullptr) {
    ping_outstanding = false;
    timeval tv = toTimeval(engine->options_.keepalive_time);
    evtimer_add(keepalive_timer, &tv);
  }
}

void GrpcLoopClient::Engine::Connection::onGoaway(uint32_t) {
  draining = true;  // the calls it covers go on; the next call opens a new connection
  auto it = engine->by_key_.find(key);
  if (it != engine->by_key_.end() && it->second == this) engine->by_key_.erase(it);
}

// ---- libevent callbacks ----

void GrpcLoopClient::Engine::onReadable(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine& e = *c.engine;
  if (!e.readInput(c)) return e.deliver();
  if (e.pump(c)) e.maybeClose(c);  // WINDOW_UPDATE, SETTINGS ACK, RST_STREAM
  e.deliver();
}

bool GrpcLoopClient::Engine::readInput(Connection& c) {
  // Up to 4 MiB per event, then the loop's other events get their turn: plaintext in
  // reads of the whole buffer, TLS a record (16 KiB at most) per read.
  size_t taken = 0;
  while (taken < 16 * kReadBufferBytes) {
    ssize_t n;
    if (c.tls != nullptr) {
      c.read_wants_write = false;
      n = c.tls->read(read_buffer_.get(), kReadBufferBytes);
    } else {
      n = ::recv(c.fd, read_buffer_.get(), kReadBufferBytes, 0);
    }
    if (n > 0) {
      taken += static_cast<size_t>(n);
      if (!c.h2->receive(read_buffer_.get(), static_cast<size_t>(n))) {
        const std::string why = c.h2->error();
        // The GOAWAY naming the fault, best effort, when nothing else waits before it (a
        // call's bytes flushed now would count as sent).
        if (c.out.empty() && c.tls == nullptr) {
          c.h2->send();
          (void)c.out.flush(c.fd);
        }
        fail(c, why, Failure::kBroken);
        return false;
      }
      if (c.tls == nullptr && static_cast<size_t>(n) < kReadBufferBytes) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (c.tls != nullptr && c.tls->wantsWritable()) {
        c.read_wants_write = true;  // onWritable reads again
        event_add(c.writable, nullptr);
      }
      break;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 && handshaking(c) && !c.tls->handshakeDone()) {
      // A close or a reset during the handshake reads as the end of the stream.
      fail(c, strCat("the TLS handshake failed: ", n < 0 ? c.tls->error() : "the upstream closed the connection"),
           Failure::kConnect);
      return false;
    }
    const std::string why =
        n == 0 ? std::string("the connection closed before the answer")
               : strCat("the connection failed: ",
                        c.tls != nullptr && !c.tls->error().empty() ? c.tls->error() : std::strerror(errno));
    fail(c, why, Failure::kClosed);
    return false;
  }
  // Whole records read ahead wait in the session, where the socket's readiness does not
  // tell of them: this event runs again.
  if (c.tls != nullptr && c.tls->hasBufferedInput()) event_active(c.readable, EV_READ, 0);
  return checkHandshake(c);
}

void GrpcLoopClient::Engine::onWritable(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine& e = *c.engine;
  if (c.connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == EINPROGRESS) return;
    if (err != 0) {
      e.fail(c, strCat("cannot connect: ", std::strerror(err)), Failure::kConnect);
      return e.deliver();
    }
    if (e.connected(c)) e.maybeClose(c);
    return e.deliver();
  }
  if (c.read_wants_write && !e.readInput(c)) return e.deliver();
  if (e.pump(c)) e.maybeClose(c);
  e.deliver();
}

void GrpcLoopClient::Engine::onConnectTimeout(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine& e = *c.engine;
  e.fail(c,
         c.connecting ? strCat("cannot connect within ", e.options_.connect_timeout.count(), " ms")
         : handshaking(c)
             ? strCat("the TLS handshake did not finish within ", e.options_.connect_timeout.count(),
                      " ms of connecting")
             : strCat("no HTTP/2 SETTINGS from the upstream within ", e.options_.connect_timeout.count(),
                      " ms of connecting"),
         Failure::kConnect);
  e.deliver();
}

void GrpcLoopClient::Engine::onKeepalive(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine& e = *c.engine;
  if (c.ping_outstanding) {
    e.fail(c,
           strCat("no answer to a keepalive PING within ", e.options_.keepalive_timeout.count(), " ms"),
           Failure::kClosed);
    return e.deliver();
  }
  timeval tv = toTimeval(e.options_.keepalive_time);
  if (!c.streams.empty() && !c.connecting) {
    c.h2->ping();
    c.ping_outstanding = true;
    tv = toTimeval(e.options_.keepalive_timeout);
  }
  evtimer_add(c.keepalive_timer, &tv);
  if (c.ping_outstanding && e.pump(c)) e.maybeClose(c);
  e.deliver();
}

void GrpcLoopClient::Engine::onDeadline(evutil_socket_t, short, void* arg) {
  auto& call = *static_cast<Call*>(arg);
  Engine& e = *call.owner;  // set: the timer is freed whenever the call ends
  std::shared_ptr<Call> keep = call.shared_from_this();
  Connection* c = call.connection;
  if (c != nullptr && call.stream_id > 0) c->h2->resetStream(call.stream_id, http2::kCancel);
  e.finish(call, toUpstreamStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"),
                                  e.options_.upstream_name, call.endpoint));
  if (c != nullptr && !c->connecting && e.pump(*c)) e.maybeClose(*c);
  e.deliver();
}

}  // namespace infergate::gateway::upstream
