// NativeGrpcServer (grpc_native_server.h): workers and their listening sockets, accepted
// connections, their HTTP/2 (http2::ServerConnection, whose handler a Connection is), the
// output queue, and shutdown. A stream's calls are in grpc_native_calls.cc.
//
// Output: HTTP/2 frames; HEADERS and control frames are copied into the connection's queue
// (upstream/socket_output.h, as the native gRPC client's), DATA frames go as their 9-byte
// header plus references into the reply's Buffers; one sendmsg writes the queue (over TLS,
// the session's writev, which encrypts the small pieces as one record). Past
// kMaxQueuedBytes unwritten, canWrite() says no and the writable event resumes.

#include "gateway/frontends/grpc_native_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <thread>

#include <absl/container/inlined_vector.h>

#include "codecs/base64.h"
#include "codecs/grpc_message_text.h"
#include "codecs/text.h"
#include "gateway/frontends/grpc_native_server_internal.h"
#include "gateway/http2/frame.h"
#include "gateway/http2/hpack.h"

namespace infergate::gateway::frontends::grpc_detail {

using namespace native_server;  // NOLINT(google-build-using-namespace): this file's own

struct NativeGrpcServer::Worker {
  NativeGrpcServer* server = nullptr;
  http::EventLoop* loop = nullptr;
  int listen_fd = -1;
  event* accept_event = nullptr;
  std::unordered_set<Connection*> connections;
  std::unique_ptr<uint8_t[]> read_buffer{new uint8_t[kReadBufferBytes]};
  bool stopping = false;
  std::atomic<size_t> open{0};  // connections; read by shutdown()
};

namespace native_server {
namespace {

void closeConnection(Connection& c);

// grpc's form of a peer: "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:".
std::string peerOf(const sockaddr_storage& peer) {
  if (peer.ss_family == AF_INET) return "ipv4:" + http::socketAddressText(peer);
  if (peer.ss_family == AF_INET6) return "ipv6:" + http::socketAddressText(peer);
  return "unix:";
}

Stream* streamOf(Connection& c, int32_t id) {
  auto it = c.streams.find(id);
  return it == c.streams.end() ? nullptr : it->second.get();
}

std::chrono::milliseconds idleTimeout(const Connection& c) {
  return std::chrono::milliseconds(std::max(1, sharedOf(c).options.idle_timeout_ms));
}

std::chrono::milliseconds sendTimeout(const Connection& c) {
  return std::chrono::milliseconds(std::max(1, sharedOf(c).options.send_timeout_ms));
}

void armTimer(Connection& c, std::chrono::milliseconds after) {
  timeval tv = http::toTimeval(after);
  evtimer_add(c.timer, &tv);
}

// After the handshake the timer watches three deadlines: the idle timeout (counted from the
// last call's end while there is none, else checked again a whole timeout later), the send
// timeout (counted from the last write the socket took, while output waits), and the next
// check of the streams' replies (every send timeout).
std::chrono::milliseconds untilNextCheck(const Connection& c, std::chrono::steady_clock::time_point now) {
  using std::chrono::milliseconds;
  // Rounded up: a timer a little early would only find its deadline not yet passed.
  auto left = [now](std::chrono::steady_clock::time_point since, milliseconds timeout) {
    return std::chrono::ceil<milliseconds>(timeout - (now - since));
  };
  milliseconds next = left(c.streams_checked, sendTimeout(c));
  // Once told to go away (idle, or shutdown) the connection closes when its streams end:
  // it has no idle deadline left.
  if (!c.going_away) next = std::min(next, c.streams.empty() ? left(c.last_active, idleTimeout(c)) : idleTimeout(c));
  if (c.output_stalled_since) next = std::min(next, left(*c.output_stalled_since, sendTimeout(c)));
  return std::max(next, milliseconds(1));
}

// The send timeout's clock: started when bytes begin to wait for the client, started again
// by each write the socket takes, stopped once nothing waits.
void watchOutput(Connection& c, bool waiting, bool wrote) {
  if (!waiting) {
    c.output_stalled_since.reset();
    return;
  }
  if (c.output_stalled_since && !wrote) return;
  const bool started = !c.output_stalled_since;
  const auto now = std::chrono::steady_clock::now();
  c.output_stalled_since = now;
  // Before the handshake's end the timer holds its deadline, which is shorter.
  if (started && c.spoke_http2) armTimer(c, untilNextCheck(c, now));
}

// How a reply's field enters HPACK: values unique to a call (its request id, trace
// context) never enter a table and are marked so; a grpc-message changes with each error;
// the rest (:status, content-type, grpc-status, metadata that repeats) is indexed.
http2::Connection::Field replyField(std::string_view name, std::string_view value) {
  using Indexing = http2::HpackEncoder::Indexing;
  if (name == "x-request-id" || name == "traceparent" || name == "tracestate") {
    return {name, value, Indexing::kNeverIndex};
  }
  return {name, value, name == "grpc-message" ? Indexing::kNoIndex : Indexing::kIndex};
}

// A grpc-timeout value: up to 8 digits and a unit (H M S m u n).
std::optional<std::chrono::nanoseconds> parseTimeout(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return std::nullopt;
  int64_t n = 0;
  for (char ch : v.substr(0, v.size() - 1)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + (ch - '0');
  }
  using namespace std::chrono;  // NOLINT(google-build-using-namespace)
  // Hours and minutes of 8 digits pass what nanoseconds hold: capped at 100 years.
  constexpr int64_t kMaxHours = 24 * 365 * 100;
  switch (v.back()) {
    case 'H': return duration_cast<nanoseconds>(hours(std::min(n, kMaxHours)));
    case 'M': return duration_cast<nanoseconds>(minutes(std::min(n, kMaxHours * 60)));
    case 'S': return duration_cast<nanoseconds>(seconds(n));
    case 'm': return duration_cast<nanoseconds>(milliseconds(n));
    case 'u': return duration_cast<nanoseconds>(microseconds(n));
    case 'n': return nanoseconds(n);
    default: return std::nullopt;
  }
}

}  // namespace

// ---- HTTP/2's handler ----
// h2 asks only of streams it holds, and a Stream lives as long as its h2 stream does
// (onStreamClose erases it; closeConnection drops both): streamOf() finds it for those.

bool Connection::canWrite() {
  if (out.unwritten() > kMaxQueuedBytes) {
    paused = true;
    return false;
  }
  return true;
}

void Connection::writeBytes(std::string_view bytes) {
  out.queueOwned(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// How much of the reply may be framed now: what is queued and not yet promised; at the
// end, the trailers follow (trailers()).
size_t Connection::bodyReady(int32_t stream, size_t max, bool& last) {
  Stream& s = *streamOf(*this, stream);
  size_t n = std::min(max, s.unpromised);
  // An arriving message is the stream's only one: `promised` is where it is framed up to.
  if (n > 0 && s.arrival != nullptr) n = std::min(n, s.out.front().arrivedFrom(s.promised, *s.arrival));
  s.unpromised -= n;
  s.promised += n;
  if (n > 0 && s.relay) replyDrained(s);
  last = s.unpromised == 0 && s.finished;
  return n;
}

void Connection::writeData(int32_t stream, const uint8_t* head, size_t length) {
  Stream& s = *streamOf(*this, stream);
  out.queueDataFrame(head, [&] {
    while (length > 0 && !s.out.empty()) {
      length -= s.out.front().queueInto(out, length);
      if (s.out.front().queuedAll()) s.out.pop_front();
    }
  });
}

void Connection::trailers(int32_t stream, std::vector<http2::Connection::Field>& fields) {
  for (const auto& [key, value] : streamOf(*this, stream)->trailers) fields.push_back(replyField(key, value));
}

void Connection::onRequestStart(int32_t id) {
  auto s = std::make_unique<Stream>();
  s->connection = this;
  s->id = id;
  streams.emplace(id, std::move(s));
}

void Connection::onField(int32_t id, std::string_view name, std::string_view value) {
  Stream& s = *streamOf(*this, id);
  s.metadata_bytes += name.size() + value.size() + 32;  // HTTP/2's accounting of a field
  if (s.metadata_bytes > static_cast<size_t>(sharedOf(*this).options.max_metadata_bytes)) {
    s.metadata_too_large = true;
    return;
  }
  if (name == ":method") {
    s.method = value;
  } else if (name == ":path") {
    s.path = value;
  } else if (name == "content-type") {
    s.content_type = value;
  } else if (name == "grpc-encoding") {
    s.encoding_name = value;
  } else if (name == "grpc-timeout") {
    s.timeout = parseTimeout(value);
    if (!s.timeout) s.bad_timeout = true;
  } else if (name.starts_with(':') || name.starts_with("grpc-") || name == "te" || name == "user-agent" ||
             name == "accept-encoding" || name == kNativePeerKey || name == kNativePeerCertificateKey) {
    // pseudo-headers and the transport's own fields are no metadata (as grpc++ keeps them
    // from client_metadata()); a client's own peer keys are dropped
  } else if (name.ends_with("-bin")) {
    std::optional<std::string> decoded = codecs::base64Decode(value);
    s.metadata.emplace_back(std::string(name), decoded ? std::move(*decoded) : std::string(value));
  } else {
    s.metadata.emplace_back(std::string(name), std::string(value));
  }
}

void Connection::onHeadersEnd(int32_t id, bool too_large) {
  Stream& s = *streamOf(*this, id);
  if (too_large) s.metadata_too_large = true;
  startCall(s);
}

// A stream's window is given back as its bytes arrive, unless its relay is backlogged
// (then when it is not: releaseHeld).
void Connection::onData(int32_t id, const uint8_t* data, size_t size) {
  // receiveData() cannot end the stream here (nothing is sent inside h2->receive()).
  Stream& s = *streamOf(*this, id);
  receiveData(s, data, size);
  if (!s.finished && relayBacklogged(s)) {
    s.held += size;
    return;
  }
  h2->consume(id, size);
}

void Connection::onRequestEnd(int32_t id) {
  endRequest(*streamOf(*this, id));
}

void Connection::onStreamClose(int32_t id, uint32_t, bool) {
  auto it = streams.find(id);
  if (it == streams.end()) return;
  std::unique_ptr<Stream> s = std::move(it->second);
  streams.erase(it);
  last_active = std::chrono::steady_clock::now();
  // Closed before its trailers went: the client reset it, or the connection broke.
  detachCall(*s, !(s->finished && s->out.empty()));
}

void Connection::onSettings() {
  spoke_http2 = true;  // the handshake is done: the timer watches idleness (and output) from now
  last_active = std::chrono::steady_clock::now();
  streams_checked = last_active;
  // Over TLS, output may already wait (the SETTINGS sent before the handshake ended).
  armTimer(*this, untilNextCheck(*this, last_active));
}

namespace {

// ---- socket and timer events ----


void goAway(Connection& c) {
  if (c.going_away) return;
  c.going_away = true;
  c.h2->goAway();
}

// The socket's bytes (plaintext), or the TLS session's: as recv / writev would answer.
ssize_t readSocket(Connection& c, uint8_t* buffer, size_t size) {
  return c.tls ? c.tls->read(buffer, size) : ::recv(c.fd, buffer, size, 0);
}

// Reads what has arrived and feeds it to HTTP/2, then writes what that produced.
void readAndPump(Connection& c) {
  uint8_t* buffer = c.worker->read_buffer.get();
  // Over TLS one read is one record (16 KiB at most): as many reads as one plaintext read.
  const int max_reads = c.tls ? 256 : 16;
  for (int reads = 0; reads < max_reads; ++reads) {
    const ssize_t n = readSocket(c, buffer, kReadBufferBytes);
    if (n == 0) return closeConnection(c);  // the client closed: its calls are cancelled
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return closeConnection(c);  // a TLS failure too
      // The handshake or a key update waits to write: the writable event reads again.
      if (c.tls && c.tls->wantsWritable() && !c.read_wants_write) {
        c.read_wants_write = true;
        event_add(c.writable, nullptr);
      }
      break;
    }
    c.in_callback = true;
    const bool ok = c.h2->receive(buffer, static_cast<size_t>(n));
    c.in_callback = false;
    if (!ok) {
      // Not HTTP/2 (a bad preface), a broken frame, or streams reset too fast: the GOAWAY
      // naming it is queued.
      if (c.h2->resetFlooded()) serverOf(c).caps().countResetFlood();
      c.going_away = true;
      c.terminated = true;
      break;
    }
    // A short read drained the socket; over TLS it is one record, and more may wait
    // decrypted inside the session.
    if (static_cast<size_t>(n) < kReadBufferBytes && !(c.tls && c.tls->hasBufferedInput())) break;
  }
  // Plaintext the session already holds raises no socket event: come back for it.
  if (c.tls && !c.terminated && c.tls->hasBufferedInput()) event_active(c.readable, EV_READ, 0);
  pump(c);
}

void onReadable(evutil_socket_t, short, void* arg) { readAndPump(*static_cast<Connection*>(arg)); }

void onWritable(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  if (c.read_wants_write) {  // the read that waited for this goes first; it pumps
    c.read_wants_write = false;
    return readAndPump(c);
  }
  pump(c);
}

// Resets the streams whose replies waited for flow-control window at the last check and at
// this one (at least a send timeout apart), without a byte promised between: their client
// reads the socket (or the connection's own send timeout would end it) but gives them no
// window. Each has waited at least one send timeout and at most two. Their calls are
// cancelled; the connection serves on. True when it reset any.
bool resetStalledStreams(Connection& c) {
  if (c.h2->terminated()) return false;  // its GOAWAY is the last frame: closing anyway
  absl::InlinedVector<int32_t, 4> stalled;
  for (auto& [id, s] : c.streams) {
    // Waiting for the client's window, not for its turn or for a busy socket (a stream being
    // reset has no window to wait for, and is not counted twice).
    const bool waiting = s->unpromised > 0 && c.h2->windowShut(id);
    if (waiting && s->waited_at_check && s->promised == s->promised_at_check) stalled.push_back(id);
    s->waited_at_check = waiting;
    s->promised_at_check = s->promised;
  }
  for (int32_t id : stalled) {
    serverOf(c).caps().countSendTimeout();
    c.h2->resetStream(id, http2::kCancel);
  }
  return !stalled.empty();
}

// The handshake's deadline, then three checks: a connection whose client has taken none of
// the bytes waiting for it for the send timeout is closed (its calls cancelled: a GOAWAY
// could not reach it either); a stream whose reply gets no window for as long is reset;
// a connection without calls for the idle timeout (counted from its last call's end) is
// told to go away.
void onTimer(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  if (!c.spoke_http2) return closeConnection(c);
  const auto now = std::chrono::steady_clock::now();
  if (c.output_stalled_since && now - *c.output_stalled_since >= sendTimeout(c)) {
    serverOf(c).caps().countSendTimeout();
    return closeConnection(c);
  }
  if (now - c.streams_checked >= sendTimeout(c)) {
    c.streams_checked = now;
    if (resetStalledStreams(c)) {
      armTimer(c, untilNextCheck(c, now));  // before the pump, which may close `c`
      pump(c);
      return;
    }
  }
  if (c.streams.empty() && now - c.last_active >= idleTimeout(c) && !c.going_away) {
    goAway(c);
    // Armed before the pump (which may close `c`): a GOAWAY the client does not read
    // leaves the connection open until the send timeout.
    armTimer(c, untilNextCheck(c, now));
    pump(c);
    return;
  }
  armTimer(c, untilNextCheck(c, now));
}

void onAccept(evutil_socket_t listen_fd, short, void* arg) {
  auto& w = *static_cast<NativeGrpcServer::Worker*>(arg);
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error (EMFILE...): the next event retries
    // Over a cap: refused at once rather than starving the connections open.
    std::string client;
    if (!w.server->caps().admit(peer.ss_family == AF_UNIX ? nullptr : &peer, &client)) {
      ::close(fd);
      continue;
    }
    if (peer.ss_family != AF_UNIX) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    w.server->dealConnection(w, fd, peerOf(peer), std::move(client));
  }
}

void adopt(NativeGrpcServer::Worker& w, int fd, std::string peer, std::string client) {
  if (w.stopping) {
    ::close(fd);
    w.server->caps().release(client);
    return;
  }
  auto* c = new Connection();
  c->worker = &w;
  c->loop = w.loop;
  c->fd = fd;
  c->peer = std::move(peer);
  c->client = std::move(client);
  const Shared& shared = *w.server->shared();
  if (shared.options.tls) c->tls = std::make_unique<tls::ServerSession>(shared.options.tls->current(), fd);
  c->readable = event_new(w.loop->base(), fd, EV_READ | EV_PERSIST, &onReadable, c);
  c->writable = event_new(w.loop->base(), fd, EV_WRITE | EV_PERSIST, &onWritable, c);
  c->timer = evtimer_new(w.loop->base(), &onTimer, c);
  http2::ServerConnection::Options h2;
  h2.max_concurrent_streams = kMaxConcurrentStreams;
  h2.stream_window = static_cast<uint32_t>(kStreamWindow);
  // The decoder's limit: at least HPACK's usual 64 KiB, so a call whose metadata passes the
  // frontend's own (smaller) limit is refused alone, RESOURCE_EXHAUSTED, in startCall().
  h2.max_header_list_bytes = static_cast<uint32_t>(std::max(shared.options.max_metadata_bytes, 65536));
  h2.reset_burst = shared.options.reset_burst;
  h2.resets_per_second = shared.options.resets_per_second;
  c->h2 = std::make_unique<http2::ServerConnection>(*c, h2);
  w.connections.insert(c);
  w.open.fetch_add(1);
  if (c->readable == nullptr || c->writable == nullptr || c->timer == nullptr) return closeConnection(*c);
  event_add(c->readable, nullptr);
  armTimer(*c, std::chrono::milliseconds(std::max(1, shared.options.handshake_timeout_ms)));
  pump(*c);
}

void closeConnection(Connection& c) {
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams = std::move(c.streams);
  c.streams.clear();
  for (auto& [id, s] : streams) detachCall(*s, true);
  streams.clear();
  if (c.readable != nullptr) event_free(c.readable);
  if (c.writable != nullptr) event_free(c.writable);
  if (c.timer != nullptr) event_free(c.timer);
  c.h2.reset();
  if (c.tls) {
    c.tls->shutdown();  // close_notify, best effort
    c.tls.reset();      // before its socket
  }
  if (c.fd >= 0) ::close(c.fd);
  NativeGrpcServer::Worker& w = *c.worker;
  w.server->caps().release(c.client);
  w.connections.erase(&c);
  delete &c;
  w.open.fetch_sub(1);
}

// Writes what the queue holds. Over TLS, bytes the session took wait in it after the queue
// is empty until the socket takes them. False: the connection failed.
bool flushOutput(Connection& c) {
  if (!c.tls) return c.out.flush(c.fd);
  if (!c.tls->handshakeDone()) return true;  // nothing of ours goes before the handshake ends
  if (c.out.empty()) {
    if (!c.tls->hasBufferedOutput()) return true;
    const ssize_t n = c.tls->writev(nullptr, 0);
    return n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
  return c.out.flushWith([&c](const iovec* iov, int count) { return c.tls->writev(iov, count); });
}

}  // namespace

const std::shared_ptr<const PeerCertificate>& peerCertificateOf(Connection& c) {
  if (!c.peer_certificate_read && c.tls && c.tls->handshakeDone()) {
    c.peer_certificate_read = true;
    if (const tls::PeerIdentity* identity = c.tls->peer()) {
      c.peer_certificate = std::make_shared<const PeerCertificate>(PeerCertificate{*identity, c.tls->peerPem()});
    }
  }
  return c.peer_certificate;
}

void pump(Connection& c) {
  if (c.in_callback) return;
  for (;;) {
    c.paused = false;
    c.h2->send();
    const uint64_t written = c.out.written();
    const bool tls_held = c.tls && c.tls->hasBufferedOutput();
    if (!flushOutput(c)) return closeConnection(c);
    const bool tls_holds = c.tls && c.tls->hasBufferedOutput();
    const bool waiting = !c.out.empty() || tls_holds;
    watchOutput(c, waiting, c.out.written() != written || (tls_held && !tls_holds));
    if (waiting) {
      // Over TLS before the handshake is done (or when the session must read before it can
      // write), the output waits for the client's bytes, which the readable event brings.
      if (c.tls && (!c.tls->handshakeDone() || c.tls->wantsReadable())) {
        // One told to go away (shutdown) before its handshake ended has nothing to finish.
        if (c.going_away && c.streams.empty() && !c.tls->handshakeDone()) return closeConnection(c);
        if (!c.read_wants_write) event_del(c.writable);
      } else {
        event_add(c.writable, nullptr);
      }
      return;
    }
    if (!c.paused || !c.h2->wantsWrite()) break;
  }
  if (!c.read_wants_write) event_del(c.writable);
  if (c.h2->done() || (c.going_away && c.streams.empty())) return closeConnection(c);
}

void queueMessage(Stream& s, codecs::MovableByteBuffer message) {
  s.out.emplace_back(std::move(message));
  s.unpromised += s.out.back().size();
}

void queueArrivingMessage(Stream& s, codecs::MovableByteBuffer message, std::shared_ptr<http::BodyArrival> arrival) {
  queueMessage(s, std::move(message));
  s.arrival = std::move(arrival);
  // Unwatched by the stream's end (~Stream) or its status (replyStatus), whichever is first.
  s.arrival_watch = s.arrival->watch([&s] {
    if (!s.finished) submitReply(s);
  });
  submitReply(s);
}

void queueGrowingMessage(Stream& s, size_t length) {
  s.out.push_back(upstream::GrpcOutMessage::growing(length));
  s.unpromised += 5;  // the prefix; the rest as it comes
  s.growing = true;
  submitReply(s);
}

void growMessage(Stream& s, codecs::Buffer piece) {
  if (!s.growing || s.finished || s.out.empty()) return;  // cut short meanwhile: dropped
  s.unpromised += piece.size();
  s.out.back().append(std::move(piece));
  submitReply(s);
}

void submitReply(Stream& s) {
  Connection& c = *s.connection;
  if (!s.headers_sent) {
    s.headers_sent = true;
    const bool trailers_only = s.finished && s.out.empty();
    // The fields point into the stream's own strings (encoded before this returns).
    absl::InlinedVector<http2::Connection::Field, 8> fields;
    fields.push_back(replyField(":status", "200"));
    fields.push_back(replyField("content-type", "application/grpc"));
    for (auto& [key, value] : s.initial_metadata) {
      if (key.ends_with("-bin")) value = codecs::base64Encode(value);
      fields.push_back(replyField(key, value));
    }
    if (trailers_only) {
      for (const auto& [key, value] : s.trailers) fields.push_back(replyField(key, value));
    }
    c.h2->submitResponse(s.id, fields, trailers_only);
  } else {
    c.h2->resumeData(s.id);
  }
  pump(c);
}

void replyStatus(Stream& s, const ::grpc::Status& status, std::vector<std::pair<std::string, std::string>> trailing) {
  if (s.finished) return;
  s.finished = true;
  if (s.arrival != nullptr) {
    if (!s.arrival->complete()) s.unpromised = 0;  // never sent: the message stays short
    s.arrival->unwatch(s.arrival_watch);
  }
  if (s.growing && !s.out.empty() && !s.out.back().appendedAll()) s.unpromised = 0;  // likewise
  s.trailers.clear();
  s.trailers.emplace_back("grpc-status", std::to_string(static_cast<int>(status.error_code())));
  if (!status.error_message().empty()) {
    s.trailers.emplace_back("grpc-message", codecs::grpcMessageEncoded(status.error_message()));
  }
  if (!status.error_details().empty()) {
    s.trailers.emplace_back("grpc-status-details-bin", codecs::base64Encode(status.error_details()));
  }
  for (auto& [key, value] : trailing) {
    s.trailers.emplace_back(key, key.ends_with("-bin") ? codecs::base64Encode(value) : std::move(value));
  }
  if (s.deadline_timer != nullptr) evtimer_del(s.deadline_timer);
  submitReply(s);
}

Stream::~Stream() {
  releaseAhead(*this);
  if (deadline_timer != nullptr) event_free(deadline_timer);
  if (arrival != nullptr) arrival->unwatch(arrival_watch);
}

}  // namespace native_server

NativeGrpcServer::NativeGrpcServer(std::shared_ptr<Shared> shared, std::shared_ptr<::grpc::Channel> fallback)
    : shared_(std::move(shared)),
      fallback_(std::move(fallback)),
      caps_(shared_->options.max_connections, shared_->options.max_connections_per_client) {}

NativeGrpcServer::~NativeGrpcServer() { shutdown(std::chrono::milliseconds(0)); }

namespace {

// Runs `fn(i)` on loop i for every worker, and waits until each has.
template <typename Fn>
void onEveryLoop(std::vector<std::unique_ptr<NativeGrpcServer::Worker>>& workers, Fn fn) {
  std::vector<std::promise<void>> done(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    workers[i]->loop->post([&, i] {
      fn(*workers[i]);
      done[i].set_value();
    });
  }
  for (auto& d : done) d.get_future().wait();
}

}  // namespace

codecs::StatusOr<std::string> NativeGrpcServer::start(const http::ListenSpec& spec) {
  if (started_) return absl::FailedPreconditionError("the gRPC frontend is already started");
  http::WorkerPool& pool = shared_->pool;
  INFERGATE_ASSIGN_OR_RETURN(http::BoundSockets bound, http::bindListener(spec, pool.size()));
  for (size_t i = 0; i < pool.size(); ++i) {
    auto w = std::make_unique<Worker>();
    w->server = this;
    w->loop = &pool.loop(i);
    if (i < bound.fds.size()) w->listen_fd = bound.fds[i];
    workers_.push_back(std::move(w));
  }
  onEveryLoop(workers_, [](Worker& w) {
    if (w.listen_fd < 0) return;
    w.accept_event = event_new(w.loop->base(), w.listen_fd, EV_READ | EV_PERSIST, &native_server::onAccept, &w);
    if (w.accept_event != nullptr) event_add(w.accept_event, nullptr);
  });
  started_ = true;
  deal_ = bound.fds.size() < workers_.size();
  port_ = bound.port;
  return bound.address;
}

void NativeGrpcServer::dealConnection(Worker& from, int fd, std::string peer, std::string client) {
  // TCP: the kernel spread the connections over the loops' sockets; unix: one socket, so
  // they are dealt round robin.
  if (!deal_) return native_server::adopt(from, fd, std::move(peer), std::move(client));
  Worker& to = *workers_[next_worker_.fetch_add(1, std::memory_order_relaxed) % workers_.size()];
  if (&to == &from) return native_server::adopt(from, fd, std::move(peer), std::move(client));
  to.loop->post([&to, fd, peer = std::move(peer), client = std::move(client)]() mutable {
    native_server::adopt(to, fd, std::move(peer), std::move(client));
  });
}

void NativeGrpcServer::shutdown(std::chrono::milliseconds grace) {
  if (!started_ || stopped_) return;
  stopped_ = true;
  // No new connection; every connection told to go away (its calls go on).
  onEveryLoop(workers_, [](Worker& w) {
    w.stopping = true;
    if (w.accept_event != nullptr) event_free(w.accept_event);
    w.accept_event = nullptr;
    if (w.listen_fd >= 0) ::close(w.listen_fd);
    w.listen_fd = -1;
    std::vector<native_server::Connection*> connections(w.connections.begin(), w.connections.end());
    for (native_server::Connection* c : connections) {
      native_server::goAway(*c);
      native_server::pump(*c);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto open = [&] {
    size_t n = 0;
    for (auto& w : workers_) n += w->open.load();
    return n;
  };
  while (open() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The rest are cancelled and closed.
  onEveryLoop(workers_, [](Worker& w) {
    std::vector<native_server::Connection*> connections(w.connections.begin(), w.connections.end());
    for (native_server::Connection* c : connections) native_server::closeConnection(*c);
  });
}

void NativeGrpcServer::awaitRelays() {
  while (live_relays_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

namespace native_server {

NativeGrpcServer& serverOf(const Connection& c) { return *c.worker->server; }

void releaseHeld(Stream& s) {
  if (s.held == 0) return;
  Connection& c = *s.connection;
  const size_t held = s.held;
  s.held = 0;
  c.h2->consume(s.id, held);
  pump(c);
}

}  // namespace native_server

}  // namespace infergate::gateway::frontends::grpc_detail
