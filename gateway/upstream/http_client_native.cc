// NativeHttpClient: HTTP/1.1 to IP and unix endpoints (and host names discovery resolves),
// plaintext or TLS, on one libevent loop.
//
//   send() --> Call --> Pool (one per endpoint)
//                         idle connection?  --> attach: write the request
//                         room under the cap? --> open a connection: connect, then write
//                         else               --> wait in the pool's FIFO
//
//   A host name's connection goes to one of its addresses (connectTarget: the one that
//   connected last first); one that refuses it, or does not answer within the connect
//   timeout, passes the call on to the next, until each was tried once.
//
//   socket writable --> connect finished / the rest of the request written
//   socket readable --> busy: recv, http_parser (or straight into the body), record
//                       idle: nothing was asked; the connection is closed
//   timers           --> the call's deadline; the connection's connect timeout
//
// The answer's side (readSome, http_parser's callbacks) is in http_client_native_answer.cc;
// the Engine class, shared by both files, in http_client_native_engine.h.
//
// Recording and delivering are apart, as in the libcurl engine (http_client.cc): the
// handlers only change state and queue the Call as news; the user's callbacks run last,
// from deliverNews(), at the end of a libevent handler or from a task posted by send() and
// cancel() (which never call back themselves). A callback may then send, cancel any call or
// destroy the client: deliverNews() watches a flag the destructor sets.
//
// Connections are counted against max_connections_per_endpoint from socket() to close();
// whenever one closes or goes idle, the pool's waiting calls get it.
#include "gateway/upstream/http_client_native.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "gateway/http/head_writer.h"
#include "gateway/upstream/http_call_delivery.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/http_client_native_engine.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::Status;
using codecs::strCat;
using http::toTimeval;
using http_client_detail::callPrefix;
using http_client_detail::endpointText;
using http_client_detail::equalsIgnoreCase;
using http_client_detail::forwardableHeader;
using http_client_detail::sendableTarget;
using http_client_detail::unsendableTargetMessage;
using native_detail::upstreamError;

// The most iovecs one sendmsg is given (the head, then body segments).
constexpr int kMaxIovecs = 64;

}  // namespace

// ---- teardown ----

NativeHttpClient::Engine::~Engine() {
  if (destroyed_ != nullptr) *destroyed_ = true;
  abandonAll();
  while (!connections_.empty()) dropConnection(*connections_.begin()->first);
}

void NativeHttpClient::Engine::abandonAll() {
  // Detach every call first (a late cancel() is then a no-op), and only then drop the
  // callbacks: their captures' destructors may run arbitrary code.
  std::unordered_map<Call*, std::shared_ptr<Call>> calls;
  calls.swap(calls_);
  news_.clear();
  for (auto& [key, pool] : pools_) pool->waiting.clear();
  for (auto& [ptr, call] : calls) {
    dropDeadline(*call);
    if (call->connection != nullptr) dropConnection(*call->connection);
    call->waiting = false;
    call->owner = nullptr;
  }
  for (auto& [ptr, call] : calls) call->callbacks = {};
}

// ---- requests ----

std::shared_ptr<HttpCallHandle> NativeHttpClient::Engine::send(
    const config::ListenAddress& endpoint, SharedHttpRequest request,
    HttpUpstreamCallbacks callbacks) {
  auto call = std::make_shared<Call>();
  call->owner = this;
  call->request = std::move(request);
  call->relay = callbacks.relay != nullptr;
  call->streaming = callbacks.on_head && !call->relay;
  if (call->streaming && callbacks.windowed_data) call->window = std::make_shared<RelayWindow>();
  call->callbacks = std::move(callbacks);
  call->endpoint = endpointText(endpoint);
  const std::string& method = call->request->method;
  call->head_only = method == "HEAD";
  // As libcurl sends them: a GET without a body and a HEAD go without Content-Length; any
  // other request (a POST without a body too) carries one.
  call->sends_body = !call->head_only && !(method == "GET" && call->request->body.empty());
  calls_.emplace(call.get(), call);
  if (http::BodyArrival* arrival = call->request->arrival.get(); arrival != nullptr && !arrival->complete()) {
    call->arrival_watch = arrival->watch([weak = std::weak_ptr<Call>(call)] {
      std::shared_ptr<Call> c = weak.lock();
      if (c != nullptr && c->owner != nullptr) c->owner->onArrival(*c);
    });
  }

  Status error;
  Pool* pool = nullptr;
  if (call->request->arrival != nullptr && call->request->arrival->failed()) {
    error = http::BodyArrival::notArrived();
  } else if (!sendableTarget(call->request->target)) {
    error = codecs::invalidArgument(unsendableTargetMessage(prefix(*call), call->request->target));
  } else if (pool = poolFor(endpoint, &error); pool != nullptr) {
    call->pool = pool;
    buildHead(*call, *pool);
    if (call->request->timeout.count() > 0) {
      call->deadline = evtimer_new(loop_.base(), &Engine::onDeadline, call.get());
      if (call->deadline != nullptr) {
        timeval tv = toTimeval(call->request->timeout);
        evtimer_add(call->deadline, &tv);
      }
    }
    dispatch(call);
    serveWaiting(*pool);
  }
  if (!error.ok()) finish(*call, std::move(error));
  scheduleDelivery();  // what ended already is told from the loop, never inside send()
  return call;
}

namespace {

// Whether `a` and `b` get the same pool: as exactly as the pools' key tells endpoints
// apart (config::sameEndpoint ignores the host's case; the key does not).
bool samePlace(const config::ListenAddress& a, const config::ListenAddress& b) {
  return a.kind == b.kind && a.port == b.port && a.host == b.host && a.path == b.path;
}

}  // namespace

NativeHttpClient::Engine::Pool* NativeHttpClient::Engine::poolFor(
    const config::ListenAddress& endpoint, Status* error) {
  // Most loops send to one endpoint after another of the same few: the last one found is
  // asked first, before a key is built and hashed.
  if (last_pool_ != nullptr && samePlace(last_pool_->endpoint, endpoint)) return last_pool_;
  std::string key = endpoint.kind == config::ListenAddress::Kind::kUnix
                        ? strCat("unix:", endpoint.path)
                        : strCat(endpoint.host, "|", endpoint.port);
  auto it = pools_.find(key);
  if (it != pools_.end()) return last_pool_ = it->second.get();
  auto pool = std::make_unique<Pool>();
  pool->named = !http_client_detail::isLiteralEndpoint(endpoint);
  if (pool->named) {
    pool->address.authority = strCat(endpoint.host, ":", endpoint.port);  // as libcurl sends it
  } else {
    codecs::StatusOr<http_client_detail::SocketAddress> address =
        http_client_detail::literalSocketAddress(endpoint, options_.upstream_name);
    if (!address.ok()) {
      *error = address.status();
      return nullptr;
    }
    pool->address = std::move(*address);
  }
  pool->key = key;
  pool->endpoint = endpoint;
  if (options_.tls && !options_.tls->server_name.empty()) {
    // As libcurl's https://SERVER_NAME:PORT: the name the certificate holds is the Host.
    pool->address.authority = endpoint.kind == config::ListenAddress::Kind::kUnix
                                  ? options_.tls->server_name
                                  : strCat(options_.tls->server_name, ":", endpoint.port);
  }
  return last_pool_ = pools_.emplace(std::move(key), std::move(pool)).first->second.get();
}

void NativeHttpClient::Engine::buildHead(Call& call, const Pool& pool) const {
  using namespace std::string_view_literals;
  const HttpUpstreamRequest& r = *call.request;
  char digits[24];
  const std::string_view length =
      call.sends_body ? std::string_view(digits, static_cast<size_t>(
                                                     std::to_chars(digits, digits + sizeof(digits), r.body.size()).ptr - digits))
                      : std::string_view();
  // Every byte counted first (headers that are then dropped included): one allocation.
  bool has_host = false;
  size_t size = r.method.size() + 1 + r.target.size() + " HTTP/1.1\r\n"sv.size() +
                http::HeadWriter::fieldSize("Host", pool.address.authority) +
                http::HeadWriter::fieldSize("Content-Length", length) + 2;
  for (const auto& [name, value] : r.headers) {
    has_host = has_host || equalsIgnoreCase(name, "host"sv);
    size += http::HeadWriter::fieldSize(name, value);
  }
  std::string& head = call.head;
  head.resize(size);
  http::HeadWriter out(head.data());
  out.put(r.method).put(" "sv).put(r.target).put(" HTTP/1.1\r\n"sv);
  if (!has_host) out.field("Host"sv, pool.address.authority);
  for (const auto& [name, value] : r.headers) {
    // Unsendable headers are dropped: none can come from a parsed client request.
    if (forwardableHeader(name, value)) out.field(name, value);
  }
  if (call.sends_body) out.field("Content-Length"sv, length);
  out.put("\r\n"sv);
  head.resize(out.size());
}

void NativeHttpClient::Engine::dispatch(std::shared_ptr<Call> call) {
  Pool& pool = *call->pool;
  if (!pool.idle.empty()) {
    Connection* c = pool.idle.back();  // the newest: the least likely to have been closed
    pool.idle.pop_back();
    attach(*c, std::move(call));
  } else if (pool.open < std::max<uint32_t>(1, options_.max_connections_per_endpoint)) {
    open(pool, std::move(call));
  } else {
    call->waiting = true;
    pool.waiting.push_back(std::move(call));
  }
}

void NativeHttpClient::Engine::serveWaiting(Pool& pool) {
  const size_t cap = std::max<uint32_t>(1, options_.max_connections_per_endpoint);
  while (!pool.waiting.empty() && (!pool.idle.empty() || pool.open < cap)) {
    std::shared_ptr<Call> call = std::move(pool.waiting.front());
    pool.waiting.pop_front();
    call->waiting = false;
    dispatch(std::move(call));
  }
  // Not erased here: serveWaiting() may run deep inside a dispatch() whose callers still
  // hold the pool (a send whose connection broke at once, a resend refused at once).
  // sweepPools() erases it once no engine function is on the stack.
  if (pool.open == 0 && pool.waiting.empty()) maybe_empty_.push_back(pool.key);
}

void NativeHttpClient::Engine::sweepPools() {
  for (const std::string& key : maybe_empty_) {
    auto it = pools_.find(key);
    if (it != pools_.end() && it->second->open == 0 && it->second->waiting.empty()) {
      if (last_pool_ == it->second.get()) last_pool_ = nullptr;
      pools_.erase(it);
    }
  }
  maybe_empty_.clear();
}

void NativeHttpClient::Engine::open(Pool& pool, std::shared_ptr<Call> call) {
  http_client_detail::ConnectTarget target;
  if (pool.named) {
    codecs::StatusOr<http_client_detail::ConnectTarget> found = http_client_detail::connectTarget(
        pool.endpoint, options_.hosts.get(), call->address_tries, call->address_start, options_.upstream_name);
    if (!found.ok()) {
      finish(*call, openingFailed(*call, codecs::messageOf(found.status())));
      return;
    }
    target = std::move(*found);
    call->address_start = target.start;
  } else {
    target.address = pool.address;
  }
  const int family = target.address.storage.ss_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    finish(*call, connectError(*call, errno));
    return;
  }
  if (family != AF_UNIX) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));  // a silently dead idle one
  }
  auto owned = std::make_unique<Connection>();
  Connection& c = *owned;
  c.engine = this;
  c.pool = &pool;
  c.fd = fd;
  c.target = std::move(target);
  c.readable = event_new(loop_.base(), fd, EV_READ | EV_PERSIST, &Engine::onReadable, &c);
  c.writable = event_new(loop_.base(), fd, EV_WRITE | EV_PERSIST, &Engine::onWritable, &c);
  if (options_.tls && options_.tls->context) {
    c.tls = std::make_unique<tls::ClientSession>(options_.tls->context, fd, pool.endpoint);
  }
  connections_.emplace(&c, std::move(owned));
  ++pool.open;
  c.call = call;
  call->connection = &c;
  if (c.readable == nullptr || c.writable == nullptr || (c.tls != nullptr && !c.tls->error().empty())) {
    const std::string what = c.tls != nullptr && !c.tls->error().empty()
                                 ? strCat("cannot set up TLS: ", c.tls->error())
                                 : std::string("cannot watch a socket");
    dropConnection(c);
    finish(*call, codecs::withOrigin(codecs::internalError(prefix(*call), what), codecs::ErrorOrigin::kInternal));
    return;
  }
  // Bounds the connect and, under TLS, the handshake too (established() ends it).
  c.connect_timer = evtimer_new(loop_.base(), &Engine::onConnectTimeout, &c);
  if (c.connect_timer != nullptr) {
    timeval tv = toTimeval(options_.connect_timeout);
    evtimer_add(c.connect_timer, &tv);
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&c.target.address.storage), c.target.address.length) == 0) {
    connected(c);
    return;
  }
  if (errno != EINPROGRESS) {
    int err = errno;
    if (tryNextAddress(c)) return;
    dropConnection(c);
    finish(*call, connectError(*call, err));
    return;
  }
  c.connecting = true;
  watchWritable(c, true);
}

bool NativeHttpClient::Engine::tryNextAddress(Connection& c) {
  std::shared_ptr<Call> call = c.call;
  if (call == nullptr || c.target.host == nullptr || call->address_tries + 1 >= c.target.count) return false;
  ++call->address_tries;
  Pool& pool = *c.pool;
  dropConnection(c);
  open(pool, std::move(call));
  // That open may have failed at once, leaving room for a call waiting in the pool.
  serveWaiting(pool);
  return true;
}

void NativeHttpClient::Engine::connected(Connection& c) {
  c.connecting = false;
  c.target.connected();
  if (c.call != nullptr) c.call->address_tries = 0;
  watchWritable(c, false);
  if (c.tls == nullptr && c.connect_timer != nullptr) {
    event_free(c.connect_timer);
    c.connect_timer = nullptr;
  }
  event_add(c.readable, nullptr);
  std::shared_ptr<Call> call = std::move(c.call);
  attach(c, std::move(call));
}

void NativeHttpClient::Engine::attach(Connection& c, std::shared_ptr<Call> call) {
  call->connection = &c;
  call->sent = 0;
  call->answer_started = false;
  c.call = std::move(call);
  http_parser_init(&c.parser, HTTP_RESPONSE);
  c.parser.data = &c;
  writeSome(c);
}

void NativeHttpClient::Engine::writeSome(Connection& c) {
  Call& call = *c.call;
  const std::vector<codecs::Buffer>& segments = call.request->body.segments();
  const size_t total = call.head.size() + (call.sends_body ? call.request->body.size() : 0);
  const http::BodyArrival* arrival = call.request->arrival.get();
  if (arrival != nullptr && arrival->complete()) arrival = nullptr;
  // Stopped at the first body byte not yet in: the arrival's watcher writes on, not the
  // writable event.
  bool waits_for_body = false;
  while (call.sent < total) {
    iovec iov[kMaxIovecs];
    int count = 0;
    size_t skip = call.sent;
    if (skip < call.head.size()) {
      iov[count++] = {call.head.data() + skip, call.head.size() - skip};
      skip = 0;
    } else {
      skip -= call.head.size();
    }
    if (call.sends_body) {
      for (const codecs::Buffer& segment : segments) {
        if (count == kMaxIovecs) break;
        if (skip >= segment.size()) {
          skip -= segment.size();
          continue;
        }
        size_t len = segment.size() - skip;
        const size_t in = arrival != nullptr ? arrival->arrivedOf(segment.data() + skip, len) : len;
        if (in > 0) iov[count++] = {const_cast<uint8_t*>(segment.data()) + skip, in};
        skip = 0;
        if (in < len) {
          waits_for_body = true;
          break;
        }
      }
    }
    if (count == 0) break;  // nothing more is in yet
    ssize_t n;
    if (c.tls != nullptr) {
      n = c.tls->writev(iov, count);
    } else {
      msghdr message{};
      message.msg_iov = iov;
      message.msg_iovlen = static_cast<size_t>(count);
      n = ::sendmsg(c.fd, &message, MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        waits_for_body = false;  // the socket is full: the writable event goes on
        break;
      }
      if (c.tls != nullptr && !c.established) return handshakeFailed(c, c.tls->error());
      broken(c, errno, /*sending=*/true);
      return;
    }
    call.sent += static_cast<size_t>(n);
    if (c.tls != nullptr && !c.established && tlsState(c) == TlsState::kFailed) return;  // `c` is gone
    // Bytes a TLS session took before its handshake ended reached no upstream.
    if (c.tls == nullptr || c.established) call.body_taken = true;
  }
  bool pending = call.sent < total && !waits_for_body;
  if (c.tls != nullptr) {
    if (!pending && c.tls->hasBufferedOutput() && c.tls->writev(nullptr, 0) < 0 && errno != EAGAIN) {
      if (!c.established) return handshakeFailed(c, c.tls->error());
      return broken(c, errno, /*sending=*/true);
    }
    pending = pending || c.tls->hasBufferedOutput();
    if (tlsState(c) == TlsState::kFailed) return;  // `c` is gone
    if (c.established && call.sent > 0) call.body_taken = true;  // staged bytes go now
    if (c.tls->wantsReadable() && !c.read_wants_write) {
      // A handshake waiting for the upstream's answer: the readable event brings it, and
      // readSome() writes on (a writable socket would only spin).
      watchWritable(c, false);
      return;
    }
  }
  if (pending || c.read_wants_write) {
    watchWritable(c, true);
  } else {
    watchWritable(c, false);
  }
}

NativeHttpClient::Engine::TlsState NativeHttpClient::Engine::tlsState(Connection& c) {
  if (c.tls == nullptr || c.established) return TlsState::kEstablished;
  if (!c.tls->handshakeDone()) return TlsState::kHandshaking;
  c.established = true;
  if (c.connect_timer != nullptr) {
    event_free(c.connect_timer);
    c.connect_timer = nullptr;
  }
  const std::string alpn = c.tls->alpn();
  if (!alpn.empty() && alpn != "http/1.1") {
    handshakeFailed(c, strCat("the upstream agreed on '", alpn, "', not HTTP/1.1"));
    return TlsState::kFailed;
  }
  return TlsState::kEstablished;
}

void NativeHttpClient::Engine::handshakeFailed(Connection& c, std::string_view why_text) {
  const std::string why(why_text);  // it may be the session's own error, gone with `c`
  std::shared_ptr<Call> call = c.call;
  Pool& pool = *c.pool;
  dropConnection(c);
  if (call != nullptr) finish(*call, openingFailed(*call, strCat("the TLS handshake failed: ", why)));
  serveWaiting(pool);
}

void NativeHttpClient::Engine::onArrival(Call& call) {
  if (call.finished) return;
  if (!call.request->arrival->failed()) {
    if (call.connection != nullptr && !call.connection->connecting) writeSome(*call.connection);
    scheduleDelivery();  // a write may have ended it (a broken connection)
    return;
  }
  // Half a request went, or none: its connection (if any) cannot carry another.
  Status gone = http::BodyArrival::notArrived();
  if (call.connection != nullptr) {
    failExchange(*call.connection, std::move(gone));
  } else {
    leaveQueue(call);
    finish(call, std::move(gone));
  }
  scheduleDelivery();
}

void NativeHttpClient::Engine::leaveQueue(Call& call) {
  if (!call.waiting) return;
  auto& waiting = call.pool->waiting;
  waiting.erase(std::find_if(waiting.begin(), waiting.end(),
                             [&](const std::shared_ptr<Call>& w) { return w.get() == &call; }));
  call.waiting = false;
}

void NativeHttpClient::Engine::cancel(Call& call) {
  Pool* pool = call.finished ? nullptr : call.pool;
  if (call.request->arrival != nullptr) call.request->arrival->unwatch(call.arrival_watch);
  dropDeadline(call);
  leaveQueue(call);
  // An unfinished exchange cannot leave its connection reusable: closed.
  if (call.connection != nullptr) dropConnection(*call.connection);
  call.owner = nullptr;
  call.callbacks = {};  // not running: deliverCall() moves the callbacks it runs out first
  call.pieces.clear();
  calls_.erase(&call);
  if (pool != nullptr) serveWaiting(*pool);
  scheduleDelivery();
}

// ---- endings ----

void NativeHttpClient::Engine::finish(Call& call, Status outcome) {
  if (call.finished) return;
  call.finished = true;
  // A relay cut short (the upstream went, the deadline passed): what arrived goes on before
  // the error, not just the whole steps of it.
  if (call.relay && call.streaming && call.blocks) {
    handOnBlock(call);
  } else if (call.relay && call.streaming && call.body_used > call.relayed) {
    call.pieces.push_back(call.body.shareWritten(call.relayed, call.body_used - call.relayed));
    call.relayed = call.body_used;
  }
  if (call.request->arrival != nullptr) call.request->arrival->unwatch(call.arrival_watch);
  call.outcome = std::move(outcome);
  dropDeadline(call);
  markNews(call);
}

void NativeHttpClient::Engine::dropConnection(Connection& c) {
  if (c.call != nullptr) {
    if (c.call->window != nullptr) c.call->window->waiting = nullptr;  // its blocks outlive `c`
    c.call->connection = nullptr;
    c.call.reset();
  }
  Pool& pool = *c.pool;
  auto idle = std::find(pool.idle.begin(), pool.idle.end(), &c);
  if (idle != pool.idle.end()) pool.idle.erase(idle);
  --pool.open;
  // event_free is safe from inside the event's own callback.
  if (c.readable != nullptr) event_free(c.readable);
  if (c.writable != nullptr) event_free(c.writable);
  if (c.connect_timer != nullptr) event_free(c.connect_timer);
  if (c.tls != nullptr && c.established) c.tls->shutdown();  // close_notify, best effort
  c.tls.reset();
  ::close(c.fd);
  connections_.erase(&c);  // `c` is gone
}

void NativeHttpClient::Engine::dropDeadline(Call& call) {
  if (call.deadline == nullptr) return;
  event_free(call.deadline);
  call.deadline = nullptr;
}

Status NativeHttpClient::Engine::openingFailed(const Call& call, std::string_view what) const {
  Status s = upstreamError(absl::UnavailableError(strCat(prefix(call), what)));
  // Never sent only when no byte ever reached a socket (a resend's connect may fail too).
  return call.body_taken ? s : markNotSent(std::move(s));
}

Status NativeHttpClient::Engine::connectError(const Call& call, int err) const {
  return openingFailed(call, strCat(err == ECONNREFUSED ? "connection refused" : "cannot connect", " (",
                                    std::strerror(err), ")"));
}

Status NativeHttpClient::Engine::connectTimeout(const Call& call, bool handshaking) const {
  return openingFailed(call, handshaking ? strCat("the TLS handshake did not finish within ",
                                                  options_.connect_timeout.count(), " ms of connecting")
                                         : strCat("cannot connect within ", options_.connect_timeout.count(), " ms"));
}

// ---- libevent entry points ----

void NativeHttpClient::Engine::onReadable(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine* self = c.engine;
  self->readSome(c);
  self->deliverNews();  // last: it may destroy the engine
}

void NativeHttpClient::Engine::onWritable(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine* self = c.engine;
  if (c.read_wants_write) {
    self->readSome(c);  // it writes on when it can
  } else if (!c.connecting) {
    if (c.call != nullptr) {
      self->writeSome(c);
    } else {
      watchWritable(c, false);  // idle: nothing to write
    }
  } else {
    int err = 0;
    socklen_t length = sizeof(err);
    if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &length) != 0) err = errno;
    if (err == 0) {
      self->connected(c);
    } else if (!self->tryNextAddress(c)) {
      std::shared_ptr<Call> call = c.call;
      Pool& pool = *c.pool;
      self->dropConnection(c);
      self->finish(*call, self->connectError(*call, err));
      self->serveWaiting(pool);
    }
  }
  self->deliverNews();
}

void NativeHttpClient::Engine::onConnectTimeout(evutil_socket_t, short, void* arg) {
  auto& c = *static_cast<Connection*>(arg);
  Engine* self = c.engine;
  std::shared_ptr<Call> call = c.call;
  Pool& pool = *c.pool;
  const bool handshaking = !c.connecting;  // connected: TLS has not finished
  if (!handshaking && self->tryNextAddress(c)) {
    self->deliverNews();
    return;
  }
  self->dropConnection(c);
  if (call != nullptr) self->finish(*call, self->connectTimeout(*call, handshaking));
  self->serveWaiting(pool);
  self->deliverNews();
}

void NativeHttpClient::Engine::onDeadline(evutil_socket_t, short, void* arg) {
  auto& call = *static_cast<Call*>(arg);
  Engine* self = call.owner;  // set: the timer is dropped whenever the call ends
  auto keep = call.shared_from_this();
  Pool* pool = call.pool;
  std::string queued;
  if (call.waiting) {
    auto& waiting = pool->waiting;
    waiting.erase(std::find_if(waiting.begin(), waiting.end(),
                               [&](const std::shared_ptr<Call>& w) { return w.get() == &call; }));
    call.waiting = false;
    queued = strCat(" (still queued for a connection: all ", self->options_.max_connections_per_endpoint,
                    " allowed to the endpoint were busy)");
  }
  if (call.connection != nullptr) self->dropConnection(*call.connection);  // no late answer on it
  self->finish(call, upstreamError(absl::DeadlineExceededError(
                         strCat(self->prefix(call), "no response within the request's timeout of ",
                                call.request->timeout.count(), " ms", queued))));
  self->serveWaiting(*pool);
  self->deliverNews();
}

// ---- delivery ----

void NativeHttpClient::Engine::markNews(Call& call) {
  if (call.queued) return;
  call.queued = true;
  news_.push_back(call.shared_from_this());
}

void NativeHttpClient::Engine::scheduleDelivery() {
  if (news_.empty() || delivery_posted_) return;
  delivery_posted_ = true;
  loop_.post([this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;  // the engine is gone
    delivery_posted_ = false;
    deliverNews();
  });
}

void NativeHttpClient::Engine::deliverNews() {
  sweepPools();  // every caller is an entry point: nothing of the engine is on the stack
  http_client_detail::deliverNews(news_, calls_, destroyed_);
}

// ---- NativeHttpClient ----

NativeHttpClient::NativeHttpClient(http::EventLoop& loop, const HttpClientOptions& options)
    : engine_(std::make_unique<Engine>(loop, options)) {}

NativeHttpClient::~NativeHttpClient() = default;

bool NativeHttpClient::serves(const config::ListenAddress& endpoint,
                              const HttpClientOptions& options) {
  if ((options.tls && !options.tls->context) || options.engine == HttpClientEngine::kLibcurl) return false;
  return http_client_detail::nativeReaches(endpoint, options.hosts.get());
}

std::shared_ptr<HttpCallHandle> NativeHttpClient::send(const config::ListenAddress& endpoint,
                                                       SharedHttpRequest request,
                                                       HttpUpstreamCallbacks callbacks) {
  return engine_->send(endpoint, std::move(request), std::move(callbacks));
}

void NativeHttpClient::abandonAll() { engine_->abandonAll(); }

}  // namespace infergate::gateway::upstream
