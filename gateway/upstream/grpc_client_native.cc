// GrpcLoopClient (grpc_client_native.h): unary gRPC over h2c with nghttp2 on a worker loop.
//
//   Engine       the loop's state: a connection per endpoint (by key), the receive buffer,
//                the endings waiting to be told.
//   Connection   a socket, its nghttp2 session, the calls on it by stream id, and the
//                output queue (below). Lives in `connections_` from socket() to drop().
//   Call         one unary call: the request's slices and the cursor over them, the
//                answer as it is read, the deadline timer. Held (shared) by the caller's
//                handle, by its connection's stream map while nghttp2 may read from it, and
//                by the endings list until `done` has run.
//
// Output queue. nghttp2 serializes frames through two callbacks: control frames and
// frame headers are copied into the queue (small), and each DATA frame's payload is queued
// as references into the request's slices (each reference keeps its slice alive), so a
// tensor travels from the client's buffer to the socket without a copy. flush() hands the
// queue to sendmsg in batches of iovecs. While more than kMaxQueuedBytes wait for the
// socket, the callbacks answer NGHTTP2_ERR_WOULDBLOCK and nghttp2 keeps the rest.
//
// Endings. A call ends (finish) inside nghttp2's callbacks, a timer, or cancel(); `done`
// runs later, from deliver(): at the end of the socket or timer handler that ended it, or
// from a task posted to the loop, so that no caller's code runs inside nghttp2 or inside
// unary() / cancel(). Handlers that may run a caller's code hold the engine's `alive_`
// token: a callback may destroy the client (the last reference to an upstream set), and
// the handler then returns without touching it.
//
// Sent or not. Each call records where its HEADERS frame starts in the connection's byte
// stream; a connection that fails before its written bytes reach that point never sent the
// call: it is sent once more on a fresh connection, or (its resend used, or connecting
// failed) ended as not sent.

#include "gateway/upstream/grpc_client_native.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
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

#include "codecs/text.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::Status;
using codecs::strCat;
using http_client_detail::SocketAddress;

constexpr size_t kReadBufferBytes = 256 * 1024;
constexpr size_t kMaxQueuedBytes = 4 * 1024 * 1024;  // waiting for the socket (see the top)
constexpr int kMaxIovecs = 512;                       // one sendmsg
constexpr int32_t kWindow = INT32_MAX;                // HTTP/2's largest window
constexpr uint32_t kMaxHeaderListBytes = 1 << 20;     // as grpc_client.cc's metadata cap
constexpr size_t kMaxReservedMessageBytes = 64 * 1024 * 1024;  // reserved before it arrives
constexpr size_t kMaxMessageBytes = INT32_MAX;  // Triton: INT32_MAX both ways

timeval toTimeval(std::chrono::microseconds us) {
  if (us.count() < 0) us = std::chrono::microseconds(0);
  return timeval{static_cast<time_t>(us.count() / 1000000),
                 static_cast<suseconds_t>(us.count() % 1000000)};
}

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

// grpc-message is percent-encoded (PROTOCOL.md, gRPC over HTTP/2).
std::string percentDecoded(std::string_view in) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(in[i]);
  }
  return out;
}

nghttp2_nv header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

class GrpcLoopClient::Engine {
 public:
  Engine(http::EventLoop& loop, GrpcLoopClientOptions options)
      : loop_(loop), options_(std::move(options)), read_buffer_(new uint8_t[kReadBufferBytes]) {}
  ~Engine() { abandonAll(); }

  std::shared_ptr<GrpcCallHandle> unary(const config::ListenAddress& endpoint,
                                        std::string_view method, const grpc::ByteBuffer& request,
                                        const GrpcCallOptions& options, Done done);
  void abandonAll();

 private:
  struct Connection;

  class Call final : public GrpcCallHandle, public std::enable_shared_from_this<Call> {
   public:
    void cancel() override {
      if (loop->inLoopThread()) {
        if (owner != nullptr) owner->cancel(*this);
        return;
      }
      loop->post([self = shared_from_this()] {
        if (self->owner != nullptr) self->owner->cancel(*self);
      });
    }

    http::EventLoop* loop = nullptr;
    Engine* owner = nullptr;  // null once ended (delivered or abandoned)
    Connection* connection = nullptr;
    int32_t stream_id = -1;
    std::string endpoint;  // for messages
    std::string key;       // its connection's key
    config::ListenAddress address;
    std::string method;
    std::vector<std::pair<std::string, std::string>> metadata;  // in send order
    std::optional<std::chrono::system_clock::time_point> deadline;
    event* deadline_timer = nullptr;
    Done done;
    bool resent = false;
    uint64_t headers_at = UINT64_MAX;  // where its HEADERS start in the connection's output

    // The request's payload: the 5-byte prefix, then the slices.
    uint8_t prefix[5] = {};
    std::vector<grpc::Slice> slices;
    size_t payload_size = 0;
    size_t promised = 0;  // handed to nghttp2 by the read callback
    size_t queued = 0;    // queued for the socket by the send callback
    size_t slice_index = 0, slice_offset = 0;

    // The answer.
    int http_status = 0;
    std::string content_type;
    std::optional<int> grpc_status;
    std::string grpc_message;
    uint8_t frame_head[5] = {};
    size_t frame_head_have = 0;
    char* message = nullptr;  // malloc'd; owned until handed to the answer
    size_t message_size = 0, message_have = 0, message_capacity = 0;
    int messages = 0;
    std::optional<Status> broken;  // the answer broke the protocol (502)

    ~Call() { std::free(message); }
  };

  struct Segment {
    std::string owned;  // frame headers and control frames
    const char* data = nullptr;  // or a reference into `keep`
    size_t size = 0;
    grpc::Slice keep;
    const char* bytes() const { return data != nullptr ? data : owned.data(); }
    size_t length() const { return data != nullptr ? size : owned.size(); }
  };

  struct Connection {
    Engine* engine = nullptr;
    std::string key;
    std::string authority;  // :authority
    int fd = -1;
    event* readable = nullptr;
    event* writable = nullptr;
    event* connect_timer = nullptr;
    bool connecting = false;
    bool draining = false;  // GOAWAY received, or failed: no new call
    nghttp2_session* session = nullptr;
    std::unordered_map<int32_t, std::shared_ptr<Call>> streams;
    std::deque<Segment> out;
    size_t out_front_offset = 0;  // bytes of out.front() already written
    uint64_t queued_bytes = 0;    // ever queued
    uint64_t written_bytes = 0;   // ever written
  };

  struct Ending {
    std::shared_ptr<Call> call;
    Status status;
    grpc::ByteBuffer answer;
  };

  // -- calls --
  codecs::StatusOr<Connection*> connectionFor(const Call& call);
  void submit(Connection& c, const std::shared_ptr<Call>& call);
  void cancel(Call& call);
  void finish(Call& call, Status status, grpc::ByteBuffer answer = {});
  Status outcome(Call& call, uint32_t error_code) const;
  grpc::ByteBuffer takeAnswer(Call& call) const;
  void receiveData(Call& call, const uint8_t* data, size_t size);
  void breakAnswer(Call& call, std::string_view why);

  // -- connections --
  codecs::StatusOr<Connection*> open(const Call& call);
  bool startSession(Connection& c);
  void connected(Connection& c);
  void pump(Connection& c);  // lets nghttp2 serialize, then writes
  bool flush(Connection& c);  // false: the connection failed (dropped)
  enum class Failure { kConnect, kClosed, kBroken };
  // Ends (or resends) every call on `c` and drops it; `why` is named per call.
  void fail(Connection& c, std::string_view why, Failure kind);
  void drop(Connection& c);
  void queueOwned(Connection& c, const uint8_t* data, size_t size);
  void maybeClose(Connection& c);

  // -- endings --
  void deliver();
  void scheduleDelivery();

  Status unavailable(const Call& call, std::string_view why) const {
    return codecs::withOrigin(
        absl::UnavailableError(strCat("upstream '", options_.upstream_name, "' (", call.endpoint,
                                      ") is unavailable: ", why)),
        codecs::ErrorOrigin::kUpstream);
  }

  // nghttp2 callbacks (user_data: the Connection).
  static ssize_t onSend(nghttp2_session*, const uint8_t* data, size_t size, int, void* user);
  static int onSendData(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd,
                        size_t length, nghttp2_data_source* source, void* user);
  static ssize_t onReadPayload(nghttp2_session*, int32_t, uint8_t*, size_t length,
                               uint32_t* flags, nghttp2_data_source* source, void*);
  static int onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user);
  static int onDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t size, void* user);
  static int onStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user);

  // libevent callbacks.
  static void onReadable(evutil_socket_t, short, void* arg);
  static void onWritable(evutil_socket_t, short, void* arg);
  static void onConnectTimeout(evutil_socket_t, short, void* arg);
  static void onDeadline(evutil_socket_t, short, void* arg);

  http::EventLoop& loop_;
  const GrpcLoopClientOptions options_;
  std::unique_ptr<uint8_t[]> read_buffer_;
  std::unordered_map<std::string, Connection*> by_key_;  // the one taking new calls
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::vector<Ending> endings_;
  bool delivery_posted_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// ---- calls ----

std::shared_ptr<GrpcCallHandle> GrpcLoopClient::Engine::unary(const config::ListenAddress& endpoint,
                                              std::string_view method,
                                              const grpc::ByteBuffer& request,
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

  // Metadata: forwarded entries, then the configured ones (replacing the same keys).
  auto configured = [this](const std::string& key) {
    return std::any_of(options_.headers.begin(), options_.headers.end(),
                       [&key](const auto& h) { return h.first == key; });
  };
  Status refused;
  for (const auto* list : {&options.metadata, &options_.headers}) {
    for (const auto& [key, value] : *list) {
      if (const char* problem = grpcMetadataProblem(key, value); problem && refused.ok()) {
        refused = absl::InvalidArgumentError(strCat("cannot send metadata '", key, "' to upstream '",
                                                    options_.upstream_name, "': ", problem));
      }
    }
  }
  for (const auto& [key, value] : options.metadata) {
    if (!configured(key)) call->metadata.emplace_back(key, value);
  }
  for (const auto& h : options_.headers) call->metadata.push_back(h);

  // The payload: prefix (uncompressed, big-endian length) and the request's own slices.
  if (request.Valid()) request.Dump(&call->slices);
  size_t size = 0;
  for (const grpc::Slice& s : call->slices) size += s.size();
  call->prefix[0] = 0;
  const uint32_t length = static_cast<uint32_t>(std::min<size_t>(size, UINT32_MAX));
  call->prefix[1] = static_cast<uint8_t>(length >> 24);
  call->prefix[2] = static_cast<uint8_t>(length >> 16);
  call->prefix[3] = static_cast<uint8_t>(length >> 8);
  call->prefix[4] = static_cast<uint8_t>(length);
  call->payload_size = 5 + size;

  if (!refused.ok()) {
    finish(*call, std::move(refused));
  } else if (size > kMaxMessageBytes) {
    finish(*call, absl::ResourceExhaustedError(strCat("the request to upstream '", options_.upstream_name,
                                                      "' is larger than gRPC's 2 GiB message limit")));
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
      if (call->owner != nullptr && !(*c)->connecting) pump(**c);
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
  std::vector<nghttp2_nv> nv;
  nv.reserve(8 + call->metadata.size());
  std::string timeout;
  nv.push_back(header(":method", "POST"));
  nv.push_back(header(":scheme", "http"));
  nv.push_back(header(":path", call->method));
  nv.push_back(header(":authority", c.authority));
  nv.push_back(header("te", "trailers"));
  nv.push_back(header("content-type", "application/grpc"));
  nv.push_back(header("user-agent", "infergate"));
  if (call->deadline) {
    timeout = grpcTimeout(*call->deadline - std::chrono::system_clock::now());
    nv.push_back(header("grpc-timeout", timeout));
  }
  for (const auto& [key, value] : call->metadata) nv.push_back(header(key, value));

  nghttp2_data_provider provider;
  provider.source.ptr = call.get();
  provider.read_callback = &Engine::onReadPayload;
  call->promised = call->queued = 0;
  call->slice_index = call->slice_offset = 0;
  call->headers_at = UINT64_MAX;
  const int32_t id = nghttp2_submit_request(c.session, nullptr, nv.data(), nv.size(), &provider, call.get());
  if (id < 0) {
    finish(*call, unavailable(*call, strCat("cannot start an HTTP/2 stream: ", nghttp2_strerror(id))));
    return;
  }
  call->connection = &c;
  call->stream_id = id;
  c.streams.emplace(id, call);
}

void GrpcLoopClient::Engine::cancel(Call& call) {
  std::shared_ptr<Call> keep = call.shared_from_this();
  Connection* c = call.connection;
  if (c != nullptr && call.stream_id > 0) {
    nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call.stream_id, NGHTTP2_CANCEL);
  }
  finish(call, absl::CancelledError("the request was cancelled"));
  if (c != nullptr && !c->connecting) pump(*c);  // the RST_STREAM; may drop the connection
  scheduleDelivery();
}

void GrpcLoopClient::Engine::finish(Call& call, Status status, grpc::ByteBuffer answer) {
  if (call.owner == nullptr) return;
  call.owner = nullptr;
  if (call.deadline_timer != nullptr) {
    event_free(call.deadline_timer);
    call.deadline_timer = nullptr;
  }
  // The connection keeps the call (nghttp2 may still read its payload) until the stream
  // closes; what arrives for it meanwhile is ignored.
  endings_.push_back(Ending{call.shared_from_this(), std::move(status), std::move(answer)});
}

void GrpcLoopClient::Engine::breakAnswer(Call& call, std::string_view why) {
  if (call.broken) return;
  call.broken = codecs::withOrigin(
      absl::InvalidArgumentError(strCat("upstream '", options_.upstream_name, "' (", call.endpoint,
                                        ") broke the gRPC protocol: ", why)),
      codecs::ErrorOrigin::kUpstream);
  if (call.connection != nullptr && call.stream_id > 0) {
    nghttp2_submit_rst_stream(call.connection->session, NGHTTP2_FLAG_NONE, call.stream_id,
                              NGHTTP2_CANCEL);
  }
}

Status GrpcLoopClient::Engine::outcome(Call& call, uint32_t error_code) const {
  if (call.broken) return *call.broken;
  const std::string& name = options_.upstream_name;
  if (call.grpc_status) {
    if (call.http_status != 200) {
      return codecs::withOrigin(
          absl::InvalidArgumentError(strCat("upstream '", name, "' (", call.endpoint,
                                            ") broke the gRPC protocol: answered HTTP status ",
                                            call.http_status)),
          codecs::ErrorOrigin::kUpstream);
    }
    const int code = *call.grpc_status;
    if (code == 0 && call.frame_head_have > 0) {
      return codecs::withOrigin(
          absl::InvalidArgumentError(strCat("upstream '", name, "' (", call.endpoint,
                                            ") broke the gRPC protocol: the answer's data does not end where "
                                            "its message's length prefix says")),
          codecs::ErrorOrigin::kUpstream);
    }
    if (code == 0) return absl::OkStatus();
    const auto grpc_code = code > 0 && code <= 16 ? static_cast<grpc::StatusCode>(code)
                                                   : grpc::StatusCode::UNKNOWN;
    return toUpstreamStatus(grpc::Status(grpc_code, call.grpc_message), name, call.endpoint);
  }
  if (error_code == NGHTTP2_REFUSED_STREAM) {
    return markNotSent(unavailable(call, "the upstream refused the stream before reading it"));
  }
  if (error_code != NGHTTP2_NO_ERROR) {
    const grpc::StatusCode code =
        error_code == NGHTTP2_CANCEL ? grpc::StatusCode::CANCELLED : grpc::StatusCode::INTERNAL;
    return toUpstreamStatus(grpc::Status(code, strCat("Received RST_STREAM with error code ", error_code)),
                            name, call.endpoint);
  }
  std::string why;
  if (call.http_status != 200) {
    why = strCat("answered HTTP status ", call.http_status);
  } else if (!call.content_type.starts_with("application/grpc")) {
    why = strCat("answered content-type '", call.content_type, "'");
  } else {
    why = "the call ended without a grpc-status";
  }
  return codecs::withOrigin(
      absl::InvalidArgumentError(strCat("upstream '", name, "' (", call.endpoint,
                                        ") broke the gRPC protocol: ", why)),
      codecs::ErrorOrigin::kUpstream);
}

grpc::ByteBuffer GrpcLoopClient::Engine::takeAnswer(Call& call) const {
  if (call.messages == 0) return grpc::ByteBuffer();
  if (call.message_size == 0) return grpc::ByteBuffer(nullptr, 0);
  grpc::Slice slice(call.message, call.message_size, &std::free);
  call.message = nullptr;
  return grpc::ByteBuffer(&slice, 1);
}

void GrpcLoopClient::Engine::receiveData(Call& call, const uint8_t* data, size_t size) {
  while (size > 0 && !call.broken) {
    if (call.frame_head_have < 5) {
      const size_t n = std::min(size, 5 - call.frame_head_have);
      std::memcpy(call.frame_head + call.frame_head_have, data, n);
      call.frame_head_have += n;
      data += n;
      size -= n;
      if (call.frame_head_have < 5) return;
      if (call.messages > 0) return breakAnswer(call, "a second message in a unary call's answer");
      if (call.frame_head[0] != 0) {
        return breakAnswer(call, "a compressed message, with no grpc-encoding agreed");
      }
      const size_t length = (size_t{call.frame_head[1]} << 24) | (size_t{call.frame_head[2]} << 16) |
                            (size_t{call.frame_head[3]} << 8) | size_t{call.frame_head[4]};
      if (length > kMaxMessageBytes) {
        return breakAnswer(call, strCat("a message of ", length, " bytes, over gRPC's 2 GiB limit"));
      }
      call.message_size = length;
      call.message_have = 0;
      call.message_capacity = std::min(length, kMaxReservedMessageBytes);
      call.message = static_cast<char*>(std::malloc(std::max<size_t>(call.message_capacity, 1)));
      if (call.message == nullptr) return breakAnswer(call, "no memory for the answer");
      if (length == 0) {
        call.messages = 1;
        call.frame_head_have = 0;
      }
      continue;
    }
    const size_t n = std::min(size, call.message_size - call.message_have);
    if (call.message_have + n > call.message_capacity) {
      size_t grown = std::min(std::max(call.message_capacity * 2, call.message_have + n), call.message_size);
      char* bigger = static_cast<char*>(std::realloc(call.message, grown));
      if (bigger == nullptr) return breakAnswer(call, "no memory for the answer");
      call.message = bigger;
      call.message_capacity = grown;
    }
    std::memcpy(call.message + call.message_have, data, n);
    call.message_have += n;
    data += n;
    size -= n;
    if (call.message_have == call.message_size) {
      call.messages = 1;
      call.frame_head_have = 0;  // what follows starts another message's prefix
    }
  }
}

// ---- connections ----

codecs::StatusOr<GrpcLoopClient::Engine::Connection*> GrpcLoopClient::Engine::open(const Call& call) {
  INFERGATE_ASSIGN_OR_RETURN(SocketAddress address,
                             http_client_detail::literalSocketAddress(call.address, options_.upstream_name));
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
  c.authority = std::move(address.authority);
  c.fd = fd;
  c.readable = event_new(loop_.base(), fd, EV_READ | EV_PERSIST, &Engine::onReadable, &c);
  c.writable = event_new(loop_.base(), fd, EV_WRITE | EV_PERSIST, &Engine::onWritable, &c);
  connections_.emplace(&c, std::move(owned));
  if (c.readable == nullptr || c.writable == nullptr || !startSession(c)) {
    drop(c);
    return codecs::withOrigin(codecs::internalError("upstream '", options_.upstream_name, "' (", call.endpoint,
                                                    "): cannot set up a connection"),
                              codecs::ErrorOrigin::kInternal);
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    if (errno != EINPROGRESS) {
      const int err = errno;
      drop(c);
      return markNotSent(unavailable(call, strCat("cannot connect: ", std::strerror(err))));
    }
    c.connecting = true;
    event_add(c.writable, nullptr);
  } else {
    event_add(c.readable, nullptr);
  }
  // Bounds the connect and the upstream's first SETTINGS (onFrameRecv ends it): a peer
  // that takes the connection and never speaks HTTP/2 fails the calls as unconnected.
  c.connect_timer = evtimer_new(loop_.base(), &Engine::onConnectTimeout, &c);
  if (c.connect_timer != nullptr) {
    timeval tv = toTimeval(options_.connect_timeout);
    evtimer_add(c.connect_timer, &tv);
  }
  by_key_[c.key] = &c;
  return &c;
}

bool GrpcLoopClient::Engine::startSession(Connection& c) {
  static nghttp2_session_callbacks* callbacks = [] {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, &Engine::onSend);
    nghttp2_session_callbacks_set_send_data_callback(cb, &Engine::onSendData);
    nghttp2_session_callbacks_set_before_frame_send_callback(cb, &Engine::onFrameSend);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Engine::onFrameRecv);
    nghttp2_session_callbacks_set_on_header_callback(cb, &Engine::onHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &Engine::onDataChunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Engine::onStreamClose);
    return cb;
  }();
  if (callbacks == nullptr || nghttp2_session_client_new(&c.session, callbacks, &c) != 0) return false;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderListBytes},
  };
  return nghttp2_submit_settings(c.session, NGHTTP2_FLAG_NONE, settings, std::size(settings)) == 0 &&
         nghttp2_session_set_local_window_size(c.session, NGHTTP2_FLAG_NONE, 0, kWindow) == 0;
}

void GrpcLoopClient::Engine::connected(Connection& c) {
  c.connecting = false;
  event_del(c.writable);
  event_add(c.readable, nullptr);  // the connect timer runs on until the upstream's SETTINGS
  pump(c);
}

void GrpcLoopClient::Engine::pump(Connection& c) {
  for (;;) {
    const uint64_t before = c.queued_bytes;
    if (const int rv = nghttp2_session_send(c.session); rv != 0) {
      return fail(c, strCat("HTTP/2 session failed: ", nghttp2_strerror(rv)), Failure::kBroken);
    }
    if (!flush(c)) return;
    if (!c.out.empty()) {
      event_add(c.writable, nullptr);
      return;
    }
    // Paused by the queue's cap, which the socket has now drained: serialize the rest.
    if (c.queued_bytes == before || !nghttp2_session_want_write(c.session)) break;
  }
  event_del(c.writable);
}

bool GrpcLoopClient::Engine::flush(Connection& c) {
  iovec iov[kMaxIovecs];
  while (!c.out.empty()) {
    int n = 0;
    for (auto it = c.out.begin(); it != c.out.end() && n < kMaxIovecs; ++it, ++n) {
      const size_t skip = n == 0 ? c.out_front_offset : 0;
      iov[n].iov_base = const_cast<char*>(it->bytes() + skip);
      iov[n].iov_len = it->length() - skip;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    const ssize_t sent = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      fail(c, strCat("the connection failed: ", std::strerror(errno)), Failure::kClosed);
      return false;
    }
    c.written_bytes += static_cast<uint64_t>(sent);
    size_t left = static_cast<size_t>(sent);
    while (left > 0) {
      Segment& front = c.out.front();
      const size_t rest = front.length() - c.out_front_offset;
      if (left < rest) {
        c.out_front_offset += left;
        break;
      }
      left -= rest;
      c.out_front_offset = 0;
      c.out.pop_front();
    }
  }
  return true;
}

void GrpcLoopClient::Engine::fail(Connection& c, std::string_view why_text, Failure kind) {
  const std::string why(why_text);
  const bool connect_failed = kind == Failure::kConnect;
  std::unordered_map<int32_t, std::shared_ptr<Call>> streams = std::move(c.streams);
  c.streams.clear();
  const uint64_t written = c.written_bytes;
  drop(c);
  std::vector<Connection*> resent_on;
  for (auto& [id, call] : streams) {
    call->connection = nullptr;
    call->stream_id = -1;
    if (call->owner == nullptr) continue;
    const bool unsent = call->headers_at == UINT64_MAX || written <= call->headers_at;
    if (unsent && !connect_failed && !call->resent) {
      call->resent = true;  // as the HTTP client: a dead kept-alive connection costs one resend
      codecs::StatusOr<Connection*> next = connectionFor(*call);
      if (!next.ok()) {
        finish(*call, next.status());
        continue;
      }
      submit(**next, call);
      if (std::find(resent_on.begin(), resent_on.end(), *next) == resent_on.end()) resent_on.push_back(*next);
      continue;
    }
    Status cause = kind == Failure::kBroken
                       ? codecs::withOrigin(absl::InvalidArgumentError(strCat(
                                                "upstream '", options_.upstream_name, "' (", call->endpoint,
                                                ") broke the HTTP/2 protocol: ", why)),
                                            codecs::ErrorOrigin::kUpstream)
                       : unavailable(*call, why);
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
  if (c.session != nullptr) nghttp2_session_del(c.session);
  if (c.fd >= 0) ::close(c.fd);
  auto it = by_key_.find(c.key);
  if (it != by_key_.end() && it->second == &c) by_key_.erase(it);
  connections_.erase(&c);  // `c` is gone
}

void GrpcLoopClient::Engine::queueOwned(Connection& c, const uint8_t* data, size_t size) {
  if (c.out.empty() || c.out.back().data != nullptr || c.out.back().owned.size() > 16 * 1024) {
    c.out.emplace_back();
  }
  c.out.back().owned.append(reinterpret_cast<const char*>(data), size);
  c.queued_bytes += size;
}

void GrpcLoopClient::Engine::maybeClose(Connection& c) {
  const bool finished = !nghttp2_session_want_read(c.session) && !nghttp2_session_want_write(c.session);
  if (finished || (c.draining && c.streams.empty())) {
    if (c.streams.empty()) return drop(c);
    // Only a GOAWAY of the gateway's own ends a session under open streams: the upstream
    // broke HTTP/2's rules (or does not speak it).
    fail(c, "the session ended on a protocol error", Failure::kBroken);
  }
}

// ---- endings ----

void GrpcLoopClient::Engine::deliver() {
  std::weak_ptr<bool> alive = alive_;
  while (!endings_.empty()) {
    std::vector<Ending> now = std::move(endings_);
    endings_.clear();
    for (size_t i = 0; i < now.size(); ++i) {
      Done done = std::move(now[i].call->done);
      now[i].call->done = nullptr;
      if (done) done(std::move(now[i].status), std::move(now[i].answer));
      if (alive.expired()) return;  // a callback destroyed the client: the rest is dropped
    }
  }
}

void GrpcLoopClient::Engine::scheduleDelivery() {
  if (endings_.empty() || delivery_posted_) return;
  delivery_posted_ = true;
  loop_.post([this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    delivery_posted_ = false;
    deliver();
  });
}

void GrpcLoopClient::Engine::abandonAll() {
  for (Ending& e : endings_) e.call->done = nullptr;
  endings_.clear();
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

// ---- nghttp2 callbacks ----

ssize_t GrpcLoopClient::Engine::onSend(nghttp2_session*, const uint8_t* data, size_t size, int, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (c.queued_bytes - c.written_bytes > kMaxQueuedBytes) return NGHTTP2_ERR_WOULDBLOCK;
  c.engine->queueOwned(c, data, size);
  return static_cast<ssize_t>(size);
}

int GrpcLoopClient::Engine::onSendData(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd, size_t length,
                       nghttp2_data_source* source, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (c.queued_bytes - c.written_bytes > kMaxQueuedBytes) return NGHTTP2_ERR_WOULDBLOCK;
  auto& call = *static_cast<Call*>(source->ptr);
  Engine& e = *c.engine;
  e.queueOwned(c, framehd, 9);
  if (frame->data.padlen > 0) {
    const uint8_t pad = static_cast<uint8_t>(frame->data.padlen - 1);
    e.queueOwned(c, &pad, 1);
  }
  while (length > 0) {
    if (call.queued < 5) {
      const size_t n = std::min(length, 5 - call.queued);
      e.queueOwned(c, call.prefix + call.queued, n);
      call.queued += n;
      length -= n;
      continue;
    }
    const grpc::Slice& slice = call.slices[call.slice_index];
    const size_t n = std::min(length, slice.size() - call.slice_offset);
    if (n > 0) {
      Segment s;
      s.data = reinterpret_cast<const char*>(slice.begin()) + call.slice_offset;
      s.size = n;
      s.keep = slice;
      c.out.push_back(std::move(s));
      c.queued_bytes += n;
    }
    call.queued += n;
    call.slice_offset += n;
    length -= n;
    if (call.slice_offset == slice.size()) {
      ++call.slice_index;
      call.slice_offset = 0;
    }
  }
  if (frame->data.padlen > 1) {
    static const uint8_t zeros[256] = {};
    e.queueOwned(c, zeros, frame->data.padlen - 1);
  }
  return 0;
}

ssize_t GrpcLoopClient::Engine::onReadPayload(nghttp2_session*, int32_t, uint8_t*, size_t length, uint32_t* flags,
                              nghttp2_data_source* source, void*) {
  auto& call = *static_cast<Call*>(source->ptr);
  const size_t n = std::min(length, call.payload_size - call.promised);
  call.promised += n;
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  if (call.promised == call.payload_size) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

int GrpcLoopClient::Engine::onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto it = c.streams.find(frame->hd.stream_id);
  if (it != c.streams.end() && it->second->headers_at == UINT64_MAX) {
    it->second->headers_at = c.queued_bytes;  // its first byte is the next one queued
  }
  return 0;
}

int GrpcLoopClient::Engine::onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (frame->hd.type == NGHTTP2_SETTINGS && (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 &&
      c.connect_timer != nullptr) {
    event_free(c.connect_timer);  // the upstream speaks HTTP/2: connected
    c.connect_timer = nullptr;
  }
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    c.draining = true;  // the calls it covers go on; the next call opens a new connection
    auto it = c.engine->by_key_.find(c.key);
    if (it != c.engine->by_key_.end() && it->second == &c) c.engine->by_key_.erase(it);
  }
  return 0;
}

int GrpcLoopClient::Engine::onHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_bytes,
                     size_t namelen, const uint8_t* value_bytes, size_t valuelen, uint8_t, void* user) {
  auto& c = *static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto it = c.streams.find(frame->hd.stream_id);
  if (it == c.streams.end() || it->second->owner == nullptr) return 0;
  Call& call = *it->second;
  const std::string_view name(reinterpret_cast<const char*>(name_bytes), namelen);
  const std::string_view value(reinterpret_cast<const char*>(value_bytes), valuelen);
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
    call.http_status = number(value);
  } else if (name == "content-type") {
    call.content_type = std::string(value);
  } else if (name == "grpc-status") {
    const int code = number(value);
    call.grpc_status = code < 0 ? static_cast<int>(grpc::StatusCode::UNKNOWN) : code;
  } else if (name == "grpc-message") {
    call.grpc_message = percentDecoded(value);
  }
  return 0;
}

int GrpcLoopClient::Engine::onDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t size,
                        void* user) {
  auto& c = *static_cast<Connection*>(user);
  auto it = c.streams.find(stream_id);
  if (it == c.streams.end() || it->second->owner == nullptr) return 0;
  Call& call = *it->second;
  if (call.http_status != 200 || !call.content_type.starts_with("application/grpc")) {
    return 0;  // not a gRPC answer: its body is not read (outcome() names why)
  }
  c.engine->receiveData(call, data, size);
  return 0;
}

int GrpcLoopClient::Engine::onStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
  auto& c = *static_cast<Connection*>(user);
  auto it = c.streams.find(stream_id);
  if (it == c.streams.end()) return 0;
  std::shared_ptr<Call> call = std::move(it->second);
  c.streams.erase(it);
  call->connection = nullptr;
  call->stream_id = -1;
  if (call->owner == nullptr) return 0;
  Engine& e = *c.engine;
  Status status = e.outcome(*call, error_code);
  grpc::ByteBuffer answer = status.ok() ? e.takeAnswer(*call) : grpc::ByteBuffer();
  e.finish(*call, std::move(status), std::move(answer));
  return 0;
}

// ---- libevent callbacks ----

void GrpcLoopClient::Engine::onReadable(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine& e = *c.engine;
  for (int reads = 0; reads < 16; ++reads) {
    const ssize_t n = ::recv(c.fd, e.read_buffer_.get(), kReadBufferBytes, 0);
    if (n > 0) {
      const ssize_t used = nghttp2_session_mem_recv(c.session, e.read_buffer_.get(), static_cast<size_t>(n));
      if (used < 0) {
        e.fail(c, nghttp2_strerror(static_cast<int>(used)), Failure::kBroken);
        return e.deliver();
      }
      if (static_cast<size_t>(n) < kReadBufferBytes) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    const std::string why = n == 0 ? std::string("the connection closed before the answer")
                                   : strCat("the connection failed: ", std::strerror(errno));
    e.fail(c, why, Failure::kClosed);
    return e.deliver();
  }
  e.pump(c);  // WINDOW_UPDATE, SETTINGS ACK, RST_STREAM; may drop the connection
  if (e.connections_.count(&c) != 0) e.maybeClose(c);
  e.deliver();
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
    e.connected(c);
  } else {
    e.pump(c);
  }
  if (e.connections_.count(&c) != 0) e.maybeClose(c);
  e.deliver();
}

void GrpcLoopClient::Engine::onConnectTimeout(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine& e = *c.engine;
  e.fail(c,
         c.connecting ? strCat("cannot connect within ", e.options_.connect_timeout.count(), " ms")
                      : strCat("no HTTP/2 SETTINGS from the upstream within ",
                               e.options_.connect_timeout.count(), " ms of connecting"),
         Failure::kConnect);
  e.deliver();
}

void GrpcLoopClient::Engine::onDeadline(evutil_socket_t, short, void* arg) {
  auto& call = *static_cast<Call*>(arg);
  Engine& e = *call.owner;  // set: the timer is freed whenever the call ends
  std::shared_ptr<Call> keep = call.shared_from_this();
  Connection* c = call.connection;
  if (c != nullptr && call.stream_id > 0) {
    nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call.stream_id, NGHTTP2_CANCEL);
  }
  e.finish(call, toUpstreamStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"),
                                  e.options_.upstream_name, call.endpoint));
  if (c != nullptr && !c->connecting) e.pump(*c);
  e.deliver();
}

// ---- GrpcLoopClient ----

GrpcLoopClient::GrpcLoopClient(http::EventLoop& loop, GrpcLoopClientOptions options)
    : loop_(loop), engine_(std::make_unique<Engine>(loop, std::move(options))) {}

GrpcLoopClient::~GrpcLoopClient() = default;

bool GrpcLoopClient::serves(const config::ListenAddress& endpoint) {
  return http_client_detail::isLiteralEndpoint(endpoint);
}

std::shared_ptr<GrpcCallHandle> GrpcLoopClient::unary(const config::ListenAddress& endpoint,
                                                      std::string_view method,
                                                      const grpc::ByteBuffer& request,
                                                      const GrpcCallOptions& options, Done done) {
  return engine_->unary(endpoint, method, request, options, std::move(done));
}

void GrpcLoopClient::abandonAll() { engine_->abandonAll(); }

}  // namespace infergate::gateway::upstream
