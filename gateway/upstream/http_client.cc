// HttpUpstreamClient: libcurl's multi interface driven by one libevent loop.
//
//   send() --> Call (easy handle from a free list) --> curl_multi_add_handle
//
//   libcurl --SOCKETFUNCTION(fd, IN|OUT|REMOVE)--> one EV_PERSIST event per socket
//   libcurl --TIMERFUNCTION(ms | -1)-------------> one evtimer
//   socket event / timer fires
//     --> curl_multi_socket_action(fd | CURL_SOCKET_TIMEOUT)
//           libcurl calls onHeader / onWrite / onRead on the Calls: they only record
//           (status, headers, body bytes, streamed pieces) and queue the Call as "news"
//     --> collectFinished(): curl_multi_info_read; each finished transfer leaves the multi
//         handle, its easy handle goes back to the free list, its Status is fixed
//     --> deliverNews(): the user callbacks run, in order on_head, on_data..., on_complete
//
// Why user callbacks never run inside a libcurl callback: libcurl refuses to be re-entered
// from its own callbacks (CURLM_RECURSIVE_API_CALL), and the natural things a callback does
// -- cancel() this or another call, send() a follow-up, destroy the client -- all re-enter
// the multi handle. Recording first and delivering after curl_multi_socket_action returned
// makes all of them safe. The price is that a streamed piece is copied once into a Buffer
// (libcurl's pointer is only valid during its callback), which the interface asks for anyway.
//
// Re-entrancy while delivering: a callback may cancel any call (it is skipped from then on),
// and may destroy the client: deliverNews() watches a flag the destructor sets and returns
// without touching `this`. The callbacks being run are moved out of their Call first, so
// cancel() or the destructor never destroys a std::function while it is executing.
//
// Connections: libcurl's connection cache in the multi handle keeps them alive and reuses
// them (CURLMOPT_MAX_HOST_CONNECTIONS caps them per endpoint; further requests queue inside
// libcurl). Easy handles of successful transfers are kept in a small free list and
// curl_easy_reset() on release, so a request costs no curl_easy_init() and an idle handle
// points at nothing stale. A cancelled or failed transfer's handle is cleaned up instead:
// removing an unfinished transfer makes libcurl close its connection, and nothing of a
// transfer in an unknown state is reused.
//
// Idle connections are watched: libcurl 7.88 takes a cached connection with unread bytes
// for a live one, so a response the upstream sent unasked (a second answer, a late body)
// would be read as the answer to the next request, someone else's. The client opens and
// closes the connections' sockets itself (OPENSOCKETFUNCTION / CLOSESOCKETFUNCTION), so it
// knows which descriptors are connections; when libcurl lets go of one (CURL_POLL_REMOVE)
// while it stays cached, a one-shot read event watches it, and if anything arrives (bytes
// or the end of the stream) the socket is shut down both ways: libcurl's liveness check
// then sees it hung up and opens a fresh connection instead.
//
// TLS (options.tls; the options in http_client_tls.h): libcurl matches a cached connection
// on its TLS settings and its CONNECT_TO target too, so keep-alive reuse is unchanged; the
// handles share one TLS session cache (a CURLSH), so a new connection resumes a session.
//
// Deadlines: CURLOPT_TIMEOUT_MS enforces the request's timeout, except while a transfer
// waits in libcurl's queue for a free connection (CURLMOPT_MAX_HOST_CONNECTIONS reached):
// libcurl 7.88 checks no timeout in that state, so a request queued behind hung ones would
// wait forever. A per-call evtimer, due a little after libcurl's own, ends such a call.
//
// libcurl's data callbacks and the meaning of its result codes are in
// http_client_curl_answer.cc; the classes, shared by both files, in http_client_curl_engine.h.
//
// Zero-copy: the request body is read by libcurl straight from the BufferChain's segments
// (onRead copies into libcurl's upload buffer: the one copy of DESIGN.md). A buffered
// response lands in one buffer reserved from Content-Length (doubling when it is unknown).

#include "gateway/upstream/http_client.h"

#include <curl/curl.h>
#include <event2/event.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <sys/socket.h>
#include <unistd.h>

#include "config/listen_address.h"
#include "gateway/upstream/http_call_delivery.h"
#include "gateway/upstream/http_client_curl_engine.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/http_client_native.h"
#include "gateway/upstream/http_client_tls.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway::upstream {
namespace {

using curl_detail::Call;
using curl_detail::CurlMultiClient;
using codecs::Status;
using codecs::strCat;
using http_client_detail::endpointText;
using http_client_detail::equalsIgnoreCase;
using http_client_detail::forwardableHeader;
using http_client_detail::sendableTarget;
using http_client_detail::unsendableTargetMessage;

// Easy handles kept for reuse. Beyond this many idle ones (after a burst), they are freed.
constexpr size_t kMaxIdleEasyHandles = 32;
// libcurl's receive and upload buffers (defaults 16 KiB / 64 KiB): larger ones halve the
// callbacks and syscalls for multi-MiB tensors; allocated once per (reused) easy handle.
constexpr long kReceiveBufferBytes = 256 * 1024;
constexpr long kUploadBufferBytes = 256 * 1024;
// How long after the request's timeout the backstop deadline fires. libcurl's own timer is
// due first (and, if the loop stalled, libevent runs due timers in deadline order), so the
// backstop only ever ends transfers that libcurl did not: those still queued.
constexpr std::chrono::milliseconds kDeadlineGrace{20};

void initCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

namespace curl_detail {

void Call::cancel() {
  if (owner == nullptr) return;
  auto keep = shared_from_this();  // the client may hold the last other reference
  owner->cancel(*this);
}

// ---- construction and teardown ----

CurlMultiClient::CurlMultiClient(http::EventLoop& loop, HttpClientOptions options)
    : loop_(loop), options_(std::move(options)) {
  initCurlOnce();
  // Not added yet: the constructor may run off the loop thread (the UpstreamSet is built on
  // the main thread), and only event_add touches the loop's base.
  timer_ = evtimer_new(loop_.base(), &CurlMultiClient::onTimeout, this);
  multi_ = curl_multi_init();
  if (multi_ == nullptr) return;  // send() reports it per request
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &CurlMultiClient::onSocketUpdate);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &CurlMultiClient::onTimerUpdate);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  long per_endpoint = std::max<long>(1, options_.max_connections_per_endpoint);
  curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, per_endpoint);
  // The idle cache holds every endpoint's connections: room for 16 endpoints at their cap
  // (the default, 4 x the handles added, would close warm connections after a quiet spell).
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, std::clamp(per_endpoint * 16, 64L, 16384L));
  if (options_.tls) tls_sessions_ = newTlsSessionShare();
}

CurlMultiClient::~CurlMultiClient() {
  if (destroyed_ != nullptr) *destroyed_ = true;
  abandonAll();
  for (CURL* easy : idle_easies_) curl_easy_cleanup(easy);
  idle_easies_.clear();
  // Closes the cached connections; libcurl may still call onSocketUpdate/onTimerUpdate here.
  if (multi_ != nullptr) curl_multi_cleanup(multi_);
  // Last: every easy handle that used it is gone.
  if (tls_sessions_ != nullptr) curl_share_cleanup(tls_sessions_);
  for (auto& [fd, ev] : sockets_) event_free(ev);
  sockets_.clear();
  for (auto& [fd, ev] : idle_) event_free(ev);
  idle_.clear();
  if (timer_ != nullptr) event_free(timer_);
}

void CurlMultiClient::abandonAll() {
  // Detach every call first (a late cancel() on a handle is then a no-op), and only then drop
  // the callbacks: their captures' destructors may run arbitrary code.
  std::unordered_map<Call*, std::shared_ptr<Call>> calls;
  calls.swap(calls_);
  news_.clear();
  for (auto& [ptr, call] : calls) {
    abandonTransfer(*call);
    dropDeadline(*call);
    call->owner = nullptr;
  }
  for (auto& [ptr, call] : calls) call->callbacks = {};
}

// ---- requests ----

std::shared_ptr<HttpCallHandle> CurlMultiClient::send(const config::ListenAddress& endpoint,
                                                      SharedHttpRequest request,
                                                      HttpUpstreamCallbacks callbacks) {
  auto call = std::make_shared<Call>();
  call->owner = this;
  call->request = std::move(request);
  call->streaming = static_cast<bool>(callbacks.on_head);  // never a relay: libcurl buffers
  call->callbacks = std::move(callbacks);
  call->endpoint = endpointText(endpoint);
  call->started = std::chrono::steady_clock::now();
  calls_.emplace(call.get(), call);

  call->easy = multi_ != nullptr ? acquireEasy() : nullptr;
  if (call->easy == nullptr) {
    failSoon(call, codecs::withOrigin(
                       codecs::internalError(prefix(*call), "cannot create a libcurl handle"),
                       codecs::ErrorOrigin::kInternal));
    return call;
  }
  Status configured = configure(*call, endpoint);
  if (configured.ok()) {
    CURLMcode added = curl_multi_add_handle(multi_, call->easy);
    if (added != CURLM_OK) {
      configured = codecs::withOrigin(
          codecs::internalError(prefix(*call),
                                "cannot start the transfer: ", curl_multi_strerror(added)),
          codecs::ErrorOrigin::kInternal);
    }
  }
  if (!configured.ok()) {
    releaseEasy(call->easy);
    call->easy = nullptr;
    failSoon(call, std::move(configured));
    return call;
  }
  if (call->request->timeout.count() > 0) armDeadline(*call);
  return call;
}

void CurlMultiClient::armDeadline(Call& call) {
  call.deadline = evtimer_new(loop_.base(), &CurlMultiClient::onDeadline, &call);
  if (call.deadline == nullptr) return;  // libcurl's own timeout still covers most cases
  auto after = call.request->timeout + kDeadlineGrace;
  timeval tv{static_cast<time_t>(after.count() / 1000),
             static_cast<suseconds_t>((after.count() % 1000) * 1000)};
  evtimer_add(call.deadline, &tv);
}

void CurlMultiClient::dropDeadline(Call& call) {
  if (call.deadline == nullptr) return;
  event_free(call.deadline);  // also from inside its own callback: libevent allows it
  call.deadline = nullptr;
}

void CurlMultiClient::abandonTransfer(Call& call) {
  if (call.easy == nullptr) return;
  // An unfinished transfer leaving the multi handle makes libcurl close its connection;
  // the easy handle goes too rather than back to the free list.
  curl_multi_remove_handle(multi_, call.easy);
  curl_easy_cleanup(call.easy);
  call.easy = nullptr;
}

void CurlMultiClient::onDeadline(evutil_socket_t, short, void* arg) {
  auto& call = *static_cast<Call*>(arg);
  CurlMultiClient* self = call.owner;  // set: the timer is dropped whenever the call ends
  self->dropDeadline(call);
  if (call.finished) return;  // libcurl ended it; delivery is under way
  self->abandonTransfer(call);
  call.finished = true;
  call.outcome = codecs::withOrigin(
      absl::DeadlineExceededError(strCat(
          self->prefix(call), "no response within the request's timeout of ",
          call.request->timeout.count(), " ms (still queued for a connection: all ",
          self->options_.max_connections_per_endpoint, " allowed to the endpoint were busy)")),
      codecs::ErrorOrigin::kUpstream);
  self->markNews(call);
  self->deliverNews();  // last: it may destroy `self`
}

CURL* CurlMultiClient::acquireEasy() {
  if (idle_easies_.empty()) return curl_easy_init();
  CURL* easy = idle_easies_.back();
  idle_easies_.pop_back();
  return easy;
}

void CurlMultiClient::releaseEasy(CURL* easy) {
  if (idle_easies_.size() >= kMaxIdleEasyHandles) {
    curl_easy_cleanup(easy);
    return;
  }
  // Reset now rather than at reuse: an idle handle then points at no Call, no header list
  // and no error buffer that is about to be freed.
  curl_easy_reset(easy);
  idle_easies_.push_back(easy);
}

Status CurlMultiClient::configure(Call& call, const config::ListenAddress& endpoint) {
  CURL* e = call.easy;
  const HttpUpstreamRequest& r = *call.request;
  CURLcode rc = CURLE_OK;
  // curl_easy_setopt is variadic: every value below has exactly the type libcurl reads
  // (long, curl_off_t, a pointer), never a plain int.
  auto set = [&](CURLoption option, auto value) {
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, option, value);
  };

  // The target goes onto the request line byte for byte (PROTOCOL.md pitfall 4: Triton
  // matches the raw path). Given inside CURLOPT_URL, libcurl would percent-encode bytes
  // >= 0x80, so a UTF-8 model name would reach the upstream as another name. Only what
  // cannot stand in a request line is refused: the request's fault, never sent.
  if (!sendableTarget(r.target)) return codecs::invalidArgument(unsendableTargetMessage(prefix(call), r.target));
  const HttpClientTls* tls = options_.tls ? &*options_.tls : nullptr;
  std::string url = baseUrl(endpoint, tls);
  url += '/';
  set(CURLOPT_URL, url.c_str());  // libcurl copies strings
  set(CURLOPT_REQUEST_TARGET, r.target.c_str());
  set(CURLOPT_PROTOCOLS_STR, tls ? "https" : "http");
  if (tls && rc == CURLE_OK) {
    rc = setTlsOptions(e, *tls, endpoint, &call.connect_to);
    if (tls_sessions_ != nullptr) set(CURLOPT_SHARE, tls_sessions_);
  }
  set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  if (endpoint.kind == config::ListenAddress::Kind::kUnix) {
    set(CURLOPT_UNIX_SOCKET_PATH, endpoint.path.c_str());
  }
  set(CURLOPT_PRIVATE, static_cast<void*>(&call));
  set(CURLOPT_OPENSOCKETFUNCTION, &CurlMultiClient::onOpenSocket);
  set(CURLOPT_OPENSOCKETDATA, static_cast<void*>(this));
  set(CURLOPT_CLOSESOCKETFUNCTION, &CurlMultiClient::onCloseSocket);
  set(CURLOPT_CLOSESOCKETDATA, static_cast<void*>(this));
  set(CURLOPT_ERRORBUFFER, call.error);
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_PROXY, "");  // never a proxy from http_proxy / HTTP_PROXY
  set(CURLOPT_TCP_NODELAY, 1L);
  set(CURLOPT_TCP_KEEPALIVE, 1L);  // notices a silently dead idle connection
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  set(CURLOPT_TIMEOUT_MS, std::max<long>(0, static_cast<long>(r.timeout.count())));  // 0: none
  // Bodies pass through as sent: no Accept-Encoding (so no decoding is negotiated), and
  // content decoding off in case an upstream encodes unasked.
  set(CURLOPT_HTTP_CONTENT_DECODING, 0L);
  // Tuning only, so their result is ignored: libcurl 7.88 refuses CURLOPT_BUFFERSIZE on a
  // handle that still holds a receive buffer (see collectFinished()).
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
  curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, kUploadBufferBytes);
  set(CURLOPT_HEADERFUNCTION, &CurlMultiClient::onHeader);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&call));
  set(CURLOPT_WRITEFUNCTION, &CurlMultiClient::onWrite);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&call));

  if (r.method == "HEAD") {
    set(CURLOPT_NOBODY, 1L);  // else libcurl waits for the body the headers announce
  } else if (r.method == "GET" && r.body.empty()) {
    set(CURLOPT_HTTPGET, 1L);
  } else {
    // Any method with a body (or POST without one): Content-Length from the chain, the
    // bytes from onRead; onSeek lets libcurl resend on a fresh connection when a reused
    // keep-alive connection turns out to be dead.
    set(CURLOPT_POST, 1L);
    set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    set(CURLOPT_READFUNCTION, &CurlMultiClient::onRead);
    set(CURLOPT_READDATA, static_cast<void*>(&call));
    set(CURLOPT_SEEKFUNCTION, &CurlMultiClient::onSeek);
    set(CURLOPT_SEEKDATA, static_cast<void*>(&call));
    if (r.method != "POST") set(CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }

  bool has_accept = false, has_content_type = false;
  auto append = [&](const std::string& line) {
    curl_slist* grown = curl_slist_append(call.header_list, line.c_str());
    if (grown == nullptr) {
      if (rc == CURLE_OK) rc = CURLE_OUT_OF_MEMORY;
      return;
    }
    call.header_list = grown;
  };
  for (const auto& [name, value] : r.headers) {
    // Unsendable headers are dropped: none can come from a parsed client request.
    if (!forwardableHeader(name, value)) continue;
    has_accept = has_accept || equalsIgnoreCase(name, "accept");
    has_content_type = has_content_type || equalsIgnoreCase(name, "content-type");
    // "Name;" is libcurl's spelling of a header with an empty value ("Name:" removes one).
    append(value.empty() ? strCat(name, ";") : strCat(name, ": ", value));
  }
  // Remove what libcurl would add on its own: Expect: 100-continue (bodies over 1 MiB; a
  // round trip lost), Accept: */*, and Content-Type: application/x-www-form-urlencoded.
  append("Expect:");
  if (!has_accept) append("Accept:");
  if (!has_content_type) append("Content-Type:");
  set(CURLOPT_HTTPHEADER, call.header_list);

  if (rc != CURLE_OK) {
    return codecs::withOrigin(
        codecs::internalError(prefix(call), "cannot set up the request: ", curl_easy_strerror(rc)),
        codecs::ErrorOrigin::kInternal);
  }
  return Status();
}

void CurlMultiClient::failSoon(const std::shared_ptr<Call>& call, Status status) {
  call->finished = true;
  call->outcome = std::move(status);
  // Posted, not delivered here: the caller of send() has not even received the handle yet.
  loop_.post([call] {
    if (call->owner == nullptr) return;  // cancelled, or the client is gone
    call->owner->markNews(*call);
    call->owner->deliverNews();
  });
}

void CurlMultiClient::cancel(Call& call) {
  abandonTransfer(call);
  dropDeadline(call);
  call.owner = nullptr;
  // Not running: deliverCall() moves the callbacks it runs out of the Call first.
  call.callbacks = {};
  call.pieces.clear();
  calls_.erase(&call);
}

// ---- libcurl <-> libevent ----

int CurlMultiClient::onSocketUpdate(CURL*, curl_socket_t fd, int what, void* userp, void*) {
  auto* self = static_cast<CurlMultiClient*>(userp);
  if (what == CURL_POLL_REMOVE) {
    auto it = self->sockets_.find(fd);
    if (it != self->sockets_.end()) {
      event_free(it->second);
      self->sockets_.erase(it);
    }
    // A connection going idle in the cache (or about to close: onCloseSocket drops the
    // watch then).
    if (self->connections_.contains(fd) && !self->idle_.contains(fd)) {
      event* watch = event_new(self->loop_.base(), fd, EV_READ, &CurlMultiClient::onIdleReadable, self);
      if (watch != nullptr) {
        event_add(watch, nullptr);
        self->idle_.emplace(fd, watch);
      }
    }
    return 0;
  }
  self->dropIdleWatch(fd);  // taken for a transfer again
  short events = EV_PERSIST;
  if (what & CURL_POLL_IN) events |= EV_READ;
  if (what & CURL_POLL_OUT) events |= EV_WRITE;
  // Keyed by descriptor rather than curl_multi_assign(): should libcurl ever close a socket
  // without CURL_POLL_REMOVE, the next socket with that number updates the same event
  // instead of leaving a stale one registered.
  auto [it, inserted] = self->sockets_.try_emplace(fd, nullptr);
  if (inserted) {
    it->second = event_new(self->loop_.base(), fd, events, &CurlMultiClient::onSocketReady, self);
    if (it->second == nullptr) {
      self->sockets_.erase(it);
      return -1;  // libcurl fails the transfers on this socket
    }
  } else {
    event_del(it->second);
    event_assign(it->second, self->loop_.base(), fd, events, &CurlMultiClient::onSocketReady, self);
  }
  event_add(it->second, nullptr);
  return 0;
}

int CurlMultiClient::onTimerUpdate(CURLM*, long timeout_ms, void* userp) {
  auto* self = static_cast<CurlMultiClient*>(userp);
  if (timeout_ms < 0) {
    evtimer_del(self->timer_);
    return 0;
  }
  // 0 means "as soon as possible": a zero timer runs on the next loop iteration, never
  // inside this callback (libcurl forbids curl_multi_socket_action from here).
  timeval tv{static_cast<time_t>(timeout_ms / 1000),
             static_cast<suseconds_t>((timeout_ms % 1000) * 1000)};
  evtimer_add(self->timer_, &tv);
  return 0;
}

void CurlMultiClient::onSocketReady(evutil_socket_t fd, short events, void* arg) {
  auto* self = static_cast<CurlMultiClient*>(arg);
  int action = 0;
  if (events & EV_READ) action |= CURL_CSELECT_IN;
  if (events & EV_WRITE) action |= CURL_CSELECT_OUT;
  int running = 0;
  curl_multi_socket_action(self->multi_, fd, action, &running);
  self->afterAction();
}

curl_socket_t CurlMultiClient::onOpenSocket(void* clientp, curlsocktype, curl_sockaddr* address) {
  auto* self = static_cast<CurlMultiClient*>(clientp);
  curl_socket_t fd = ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
  if (fd == CURL_SOCKET_BAD) return CURL_SOCKET_BAD;
  self->connections_.insert(fd);
  return fd;
}

int CurlMultiClient::onCloseSocket(void* clientp, curl_socket_t fd) {
  auto* self = static_cast<CurlMultiClient*>(clientp);
  self->dropIdleWatch(fd);
  self->connections_.erase(fd);
  return ::close(fd);
}

void CurlMultiClient::dropIdleWatch(curl_socket_t fd) {
  auto it = idle_.find(fd);
  if (it == idle_.end()) return;
  event_free(it->second);
  idle_.erase(it);
}

// An idle connection got bytes or its end: nothing was asked on it, so whatever came is
// not an answer to anything, and the connection must not carry the next request.
void CurlMultiClient::onIdleReadable(evutil_socket_t fd, short, void*) {
  ::shutdown(fd, SHUT_RDWR);
}

void CurlMultiClient::onTimeout(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<CurlMultiClient*>(arg);
  int running = 0;
  curl_multi_socket_action(self->multi_, CURL_SOCKET_TIMEOUT, 0, &running);
  self->afterAction();
}

void CurlMultiClient::afterAction() {
  collectFinished();
  deliverNews();  // last: it may destroy `this`
}

void CurlMultiClient::collectFinished() {
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    // Copied out: `msg` is invalid once the handle is removed.
    CURL* easy = msg->easy_handle;
    CURLcode result = msg->data.result;
    char* private_data = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &private_data);
    auto* call = reinterpret_cast<Call*>(private_data);
    call->outcome = outcomeOf(*call, result);  // reads the handle's info: before release
    call->finished = true;
    curl_multi_remove_handle(multi_, easy);
    if (result == CURLE_OK) {
      releaseEasy(easy);
    } else {
      // A failed transfer can leave state behind that curl_easy_reset() keeps (7.88: after
      // failing before connecting, the receive buffer stays allocated and the next
      // CURLOPT_BUFFERSIZE is refused). Failures are rare enough to pay a curl_easy_init().
      curl_easy_cleanup(easy);
    }
    call->easy = nullptr;
    dropDeadline(*call);
    markNews(*call);
  }
}

// ---- delivery ----

void CurlMultiClient::markNews(Call& call) {
  if (call.queued) return;
  call.queued = true;
  news_.push_back(call.shared_from_this());
}

void CurlMultiClient::deliverNews() {
  http_client_detail::deliverNews(news_, calls_, destroyed_);
}

}  // namespace curl_detail


// NativeHttpClient::serves() picks: IP literals, unix: paths, and host names the gateway's
// discovery resolves go to the native engine; the rest (host names without it, TLS without
// a context) to libcurl.
struct HttpUpstreamClient::Impl {
  Impl(http::EventLoop& loop, HttpClientOptions options)
      : native(loop, options), curl(loop, options), options(std::move(options)) {}
  NativeHttpClient native;
  CurlMultiClient curl;
  HttpClientOptions options;
};

HttpUpstreamClient::HttpUpstreamClient(http::EventLoop& loop, HttpClientOptions options)
    : impl_(std::make_unique<Impl>(loop, std::move(options))) {}

HttpUpstreamClient::~HttpUpstreamClient() = default;

void HttpUpstreamClient::abandonAll() {
  impl_->native.abandonAll();
  impl_->curl.abandonAll();
}

bool HttpUpstreamClient::sendsAsArrives(const config::ListenAddress& endpoint) const {
  return NativeHttpClient::serves(endpoint, impl_->options);
}

std::shared_ptr<HttpCallHandle> HttpUpstreamClient::send(const config::ListenAddress& endpoint,
                                                         SharedHttpRequest request,
                                                         HttpUpstreamCallbacks callbacks) {
  if (NativeHttpClient::serves(endpoint, impl_->options)) {
    return impl_->native.send(endpoint, std::move(request), std::move(callbacks));
  }
  return impl_->curl.send(endpoint, std::move(request), std::move(callbacks));
}

}  // namespace infergate::gateway::upstream
