// NativeGrpcServer (grpc_native_server.h): workers and their listening sockets, accepted
// connections, the nghttp2 server session and its callbacks, the output queue, and
// shutdown. A stream's calls are in grpc_native_calls.cc.
//
// Output: nghttp2 serializes frames; HEADERS and control frames are copied into the
// connection's queue (upstream/socket_output.h, as the native gRPC client's), DATA frames
// go as their 9-byte header plus references into the reply's slices
// (NGHTTP2_DATA_FLAG_NO_COPY); one sendmsg writes the queue (over TLS, the session's
// writev, which encrypts the small pieces as one record). Past kMaxQueuedBytes unwritten,
// the send callback answers WOULDBLOCK and the writable event resumes.

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

void armTimer(Connection& c, std::chrono::milliseconds after) {
  timeval tv = http::toTimeval(after);
  evtimer_add(c.timer, &tv);
}

// ---- nghttp2's callbacks ----

ssize_t onSend(nghttp2_session*, const uint8_t* data, size_t length, int, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (c.out.unwritten() > kMaxQueuedBytes) {
    c.paused = true;
    return NGHTTP2_ERR_WOULDBLOCK;
  }
  c.out.queueOwned(data, length);
  return static_cast<ssize_t>(length);
}

int onSendData(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
               nghttp2_data_source* source, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (c.out.unwritten() > kMaxQueuedBytes) {
    c.paused = true;
    return NGHTTP2_ERR_WOULDBLOCK;
  }
  auto& s = *static_cast<Stream*>(source->ptr);
  c.out.queueDataFrame(framehd, frame->data.padlen, [&] {
    while (length > 0 && !s.out.empty()) {
      length -= s.out.front().queueInto(c.out, length);
      if (s.out.front().queuedAll()) s.out.pop_front();
    }
  });
  return 0;
}

// How much of the reply nghttp2 may frame now: what is queued and not yet promised; at
// the end, the trailers.
ssize_t onReadReply(nghttp2_session* session, int32_t stream_id, uint8_t*, size_t length, uint32_t* flags,
                    nghttp2_data_source* source, void*) {
  auto& s = *static_cast<Stream*>(source->ptr);
  const size_t n = std::min(length, s.unpromised);
  s.unpromised -= n;
  if (n > 0 && s.relay) replyDrained(s);
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  if (s.unpromised == 0 && s.finished) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    std::vector<nghttp2_nv> nva;
    nva.reserve(s.trailers.size());
    for (auto& [key, value] : s.trailers) nva.push_back(upstream::http2Field(key, value));
    if (nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size()) != 0) {
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    s.deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

int onBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_unique<Stream>();
  s->connection = &c;
  s->id = frame->hd.stream_id;
  c.decoding_stream = s->id;
  c.streams.emplace(s->id, std::move(s));
  return 0;
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

int onHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_bytes, size_t namelen,
             const uint8_t* value_bytes, size_t valuelen, uint8_t, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  Stream* s = streamOf(c, frame->hd.stream_id);
  if (s == nullptr) return 0;
  const std::string_view name(reinterpret_cast<const char*>(name_bytes), namelen);
  const std::string_view value(reinterpret_cast<const char*>(value_bytes), valuelen);
  s->metadata_bytes += namelen + valuelen + 32;  // HTTP/2's accounting of a field
  if (s->metadata_bytes > static_cast<size_t>(sharedOf(c).options.max_metadata_bytes)) {
    s->metadata_too_large = true;
    return 0;
  }
  if (name == ":method") {
    s->method = value;
  } else if (name == ":path") {
    s->path = value;
  } else if (name == "content-type") {
    s->content_type = value;
  } else if (name == "grpc-encoding") {
    s->encoding_name = value;
  } else if (name == "grpc-timeout") {
    s->timeout = parseTimeout(value);
    if (!s->timeout) s->bad_timeout = true;
  } else if (name.starts_with(':') || name.starts_with("grpc-") || name == "te" || name == "user-agent" ||
             name == "accept-encoding" || name == kNativePeerKey || name == kNativePeerCertificateKey) {
    // pseudo-headers and the transport's own fields are no metadata (as grpc++ keeps them
    // from client_metadata()); a client's own peer keys are dropped
  } else if (name.ends_with("-bin")) {
    std::optional<std::string> decoded = codecs::base64Decode(value);
    s->metadata.emplace_back(std::string(name), decoded ? std::move(*decoded) : std::string(value));
  } else {
    s->metadata.emplace_back(std::string(name), std::string(value));
  }
  return 0;
}

int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& c = *static_cast<Connection*>(user);
  switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
      if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 && !c.spoke_http2) {
        c.spoke_http2 = true;  // the handshake is done: the timer watches idleness from now
        c.last_active = std::chrono::steady_clock::now();
        armTimer(c, idleTimeout(c));
      }
      return 0;
    case NGHTTP2_HEADERS: {
      if (c.decoding_stream == frame->hd.stream_id) c.decoding_stream = 0;
      Stream* s = streamOf(c, frame->hd.stream_id);
      if (s == nullptr) return 0;
      if (frame->headers.cat == NGHTTP2_HCAT_REQUEST && !s->started) {
        s->started = true;
        startCall(*s);
      }
      if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 && streamOf(c, frame->hd.stream_id) == s) {
        endRequest(*s);
      }
      return 0;
    }
    case NGHTTP2_DATA: {
      Stream* s = streamOf(c, frame->hd.stream_id);
      if (s != nullptr && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) endRequest(*s);
      return 0;
    }
    default:
      return 0;
  }
}

// Windows are given back by hand (no automatic WINDOW_UPDATE): the connection's at once,
// the stream's at once unless its relay is backlogged (then when it is not: releaseHeld).
int onDataChunk(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data, size_t length,
                void* user) {
  auto& c = *static_cast<Connection*>(user);
  // receiveData() cannot end the stream here (nothing is sent inside nghttp2's callbacks).
  Stream* s = streamOf(c, stream_id);
  if (s != nullptr) receiveData(*s, data, length);
  if (nghttp2_session_consume_connection(session, length) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (s != nullptr && !s->finished && relayBacklogged(*s)) {
    s->held += length;
    return 0;
  }
  // A stream nghttp2 still knows (closed ones are no error).
  (void)nghttp2_session_consume_stream(session, stream_id, length);
  return 0;
}

int onStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user) {
  auto& c = *static_cast<Connection*>(user);
  auto it = c.streams.find(stream_id);
  if (it == c.streams.end()) return 0;
  std::unique_ptr<Stream> s = std::move(it->second);
  c.streams.erase(it);
  c.last_active = std::chrono::steady_clock::now();
  // Closed before its trailers went: the client reset it, or the connection broke.
  detachCall(*s, !(s->finished && s->out.empty()));
  return 0;
}

// A field of the stream's header block passed HPACK's limit: nghttp2 ends the connection
// (GOAWAY, COMPRESSION_ERROR). Before that GOAWAY (onFrameSend), the stream is answered Trailers-Only
// RESOURCE_EXHAUSTED, as grpc answers metadata past its limit. The block is written apart
// from nghttp2's encoder, by a fresh one with fields that enter no table: it leaves the
// client's HPACK table as it was (the connection's encoder state does not matter then).
void refuseOversizedHeaders(Connection& c) {
  Stream* s = streamOf(c, c.decoding_stream);
  if (s == nullptr || s->started) return;
  s->started = true;
  s->finished = true;
  using Indexing = http2::HpackEncoder::Indexing;
  http2::HpackEncoder encoder;
  std::string block;
  encoder.encode(":status", "200", Indexing::kNoIndex, block);
  encoder.encode("content-type", "application/grpc", Indexing::kNoIndex, block);
  encoder.encode("grpc-status", std::to_string(static_cast<int>(::grpc::StatusCode::RESOURCE_EXHAUSTED)),
                 Indexing::kNoIndex, block);
  encoder.encode("grpc-message",
                 codecs::grpcMessageEncoded(codecs::strCat("a metadata field is larger than HPACK's 65536-byte limit; "
                                                           "the call's metadata may have ",
                                                           sharedOf(c).options.max_metadata_bytes, " bytes")),
                 Indexing::kNoIndex, block);
  std::string frame;
  http2::appendFrameHeader(frame, block.size(), http2::FrameType::kHeaders,
                           http2::flags::kEndStream | http2::flags::kEndHeaders, s->id);
  frame.append(block);
  c.out.queueOwned(reinterpret_cast<const uint8_t*>(frame.data()), frame.size());
}

// nghttp2 ends the session with COMPRESSION_ERROR when HPACK refuses a field (past 64
// KiB): the stream whose block it was reading is answered first.
int onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code == NGHTTP2_COMPRESSION_ERROR &&
      c.decoding_stream != 0) {
    refuseOversizedHeaders(c);
    c.decoding_stream = 0;
  }
  return 0;
}

nghttp2_session_callbacks* serverCallbacks() {
  static nghttp2_session_callbacks* callbacks = [] {
    nghttp2_session_callbacks* cb = nullptr;
    if (nghttp2_session_callbacks_new(&cb) != 0) return cb;
    nghttp2_session_callbacks_set_send_callback(cb, &onSend);
    nghttp2_session_callbacks_set_send_data_callback(cb, &onSendData);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &onBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(cb, &onHeader);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &onFrameRecv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &onDataChunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &onStreamClose);
    nghttp2_session_callbacks_set_before_frame_send_callback(cb, &onFrameSend);
    return cb;
  }();
  return callbacks;
}

// The windows are the server's to give back (onDataChunk, releaseHeld).
nghttp2_option* serverOptions() {
  static nghttp2_option* options = [] {
    nghttp2_option* o = nullptr;
    if (nghttp2_option_new(&o) != 0) return o;
    nghttp2_option_set_no_auto_window_update(o, 1);
    return o;
  }();
  return options;
}

// ---- socket and timer events ----


void goAway(Connection& c) {
  if (c.going_away) return;
  c.going_away = true;
  nghttp2_submit_goaway(c.session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c.session),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

// What the client sent, to nghttp2, less the RST_STREAM frames for streams it never opened.
// RFC 9113 makes those a connection error, which nghttp2 enforces; grpc's own clients send
// them (a call cancelled before its HEADERS went out) and grpc's servers let them pass,
// so does this one: they would otherwise end every call on the connection.
ssize_t receive(Connection& c, const uint8_t* data, size_t size) {
  FrameFilter& f = c.filter;
  const uint8_t* const end = data + size;
  const uint8_t* run = data;  // scanned, passed on, not yet fed: one mem_recv for a whole read
  auto feed = [&c](const uint8_t* from, const uint8_t* to) -> ssize_t {
    return from == to ? 0 : nghttp2_session_mem_recv(c.session, from, static_cast<size_t>(to - from));
  };
  // The frame header in f.head is complete: the frame is passed on or dropped.
  auto decide = [&f] {
    f.payload_left = (size_t{f.head[0]} << 16) | (size_t{f.head[1]} << 8) | f.head[2];
    const uint8_t type = f.head[3];
    const uint32_t stream = ((uint32_t{f.head[5]} & 0x7f) << 24) | (uint32_t{f.head[6]} << 16) |
                            (uint32_t{f.head[7]} << 8) | f.head[8];
    if (type == NGHTTP2_HEADERS && stream > f.highest_opened) f.highest_opened = stream;
    f.dropping = type == NGHTTP2_RST_STREAM && stream > f.highest_opened && (stream & 1) == 1;
  };
  const uint8_t* p = data;
  const size_t preface = std::min(size, f.preface_left);  // the connection preface goes as it is
  f.preface_left -= preface;
  p += preface;
  while (p < end) {
    if (f.payload_left > 0) {  // the rest of a frame
      const size_t n = std::min(static_cast<size_t>(end - p), f.payload_left);
      f.payload_left -= n;
      p += n;
      if (f.dropping) run = p;  // the dropped bytes were fed by nobody
      continue;
    }
    if (f.head_have == 0 && end - p >= 9) {  // a whole frame header in this read
      std::memcpy(f.head, p, 9);
      decide();
      if (f.dropping) {
        if (const ssize_t rv = feed(run, p); rv < 0) return rv;
        run = p + 9;
      }
      p += 9;
      continue;
    }
    // A frame header cut by the read: held back until it is whole, then fed or dropped.
    if (const ssize_t rv = feed(run, p); rv < 0) return rv;
    const size_t n = std::min(static_cast<size_t>(end - p), sizeof(f.head) - f.head_have);
    std::memcpy(f.head + f.head_have, p, n);
    f.head_have += n;
    p += n;
    run = p;
    if (f.head_have < sizeof(f.head)) break;
    f.head_have = 0;
    decide();
    if (!f.dropping) {
      if (const ssize_t rv = feed(f.head, f.head + sizeof(f.head)); rv < 0) return rv;
    }
  }
  return feed(run, end);
}

// The socket's bytes (plaintext), or the TLS session's: as recv / writev would answer.
ssize_t readSocket(Connection& c, uint8_t* buffer, size_t size) {
  return c.tls ? c.tls->read(buffer, size) : ::recv(c.fd, buffer, size, 0);
}

// Reads what has arrived and feeds it to nghttp2, then writes what that produced.
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
    const ssize_t used = receive(c, buffer, static_cast<size_t>(n));
    c.in_callback = false;
    if (used < 0) {
      // Not HTTP/2 (a bad preface), or a broken frame: nghttp2 queued a GOAWAY when it could.
      nghttp2_session_terminate_session(c.session, NGHTTP2_PROTOCOL_ERROR);
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

// The handshake's deadline, then the idle check: a connection without calls for the idle
// timeout (counted from its last call's end) is told to go away.
void onTimer(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  if (!c.spoke_http2) return closeConnection(c);
  const auto idle_for = std::chrono::steady_clock::now() - c.last_active;
  if (c.streams.empty() && idle_for >= idleTimeout(c)) {
    goAway(c);
    pump(c);
    return;
  }
  armTimer(c, c.streams.empty() ? std::chrono::duration_cast<std::chrono::milliseconds>(idleTimeout(c) - idle_for)
                                : idleTimeout(c));
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
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kStreamWindow)},
  };
  w.connections.insert(c);
  w.open.fetch_add(1);
  if (c->readable == nullptr || c->writable == nullptr || c->timer == nullptr || serverCallbacks() == nullptr ||
      serverOptions() == nullptr || nghttp2_session_server_new2(&c->session, serverCallbacks(), c, serverOptions()) != 0 ||
      nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0 ||
      nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, kWindow) != 0) {
    return closeConnection(*c);
  }
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
  if (c.session != nullptr) nghttp2_session_del(c.session);
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
    if (nghttp2_session_send(c.session) != 0) return closeConnection(c);
    if (!flushOutput(c)) return closeConnection(c);
    if (!c.out.empty() || (c.tls && c.tls->hasBufferedOutput())) {
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
    if (!c.paused || !nghttp2_session_want_write(c.session)) break;
  }
  if (!c.read_wants_write) event_del(c.writable);
  if ((!nghttp2_session_want_read(c.session) && !nghttp2_session_want_write(c.session)) ||
      (c.going_away && c.streams.empty())) {
    return closeConnection(c);
  }
}

void queueMessage(Stream& s, codecs::MovableByteBuffer message) {
  s.out.emplace_back(std::move(message));
  s.unpromised += s.out.back().size();
}

void submitReply(Stream& s) {
  Connection& c = *s.connection;
  if (!s.headers_sent) {
    s.headers_sent = true;
    const bool trailers_only = s.finished && s.out.empty();
    // The fields point into the stream's own strings (nghttp2 copies them before returning).
    absl::InlinedVector<nghttp2_nv, 8> nva;
    nva.push_back(upstream::http2Field(":status", "200"));
    nva.push_back(upstream::http2Field("content-type", "application/grpc"));
    for (auto& [key, value] : s.initial_metadata) {
      if (key.ends_with("-bin")) value = codecs::base64Encode(value);
      nva.push_back(upstream::http2Field(key, value));
    }
    if (trailers_only) {
      for (auto& [key, value] : s.trailers) nva.push_back(upstream::http2Field(key, value));
    }
    nghttp2_data_provider provider{};
    provider.source.ptr = &s;
    provider.read_callback = &onReadReply;
    nghttp2_submit_response(c.session, s.id, nva.data(), nva.size(), trailers_only ? nullptr : &provider);
  } else if (s.deferred) {
    s.deferred = false;
    nghttp2_session_resume_data(c.session, s.id);
  }
  pump(c);
}

void replyStatus(Stream& s, const ::grpc::Status& status, std::vector<std::pair<std::string, std::string>> trailing) {
  if (s.finished) return;
  s.finished = true;
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
  if (deadline_timer != nullptr) event_free(deadline_timer);
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
  if (nghttp2_session_consume_stream(c.session, s.id, held) != 0) return closeConnection(c);
  pump(c);
}

}  // namespace native_server

}  // namespace infergate::gateway::frontends::grpc_detail
