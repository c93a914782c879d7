#pragma once

// The HTTP/1.1 client toward upstreams of `protocol: http`, driven by one worker's libevent
// loop so that no thread waits on a request. One HttpUpstreamClient per event loop; it keeps
// connections alive and reuses them (up to `max_connections` per endpoint). Two engines
// behind the one interface, chosen per endpoint:
//
//   native   an IP literal or a unix: path (http_client_native.h), plaintext or TLS
//            (tls::ClientSession): the gateway's own HTTP/1.1 on non-blocking sockets,
//            for the per-request cost; and a host name when options.hosts resolves
//            names for it (the gateway's discovery: host_addresses.h)
//   libcurl  host names without options.hosts (its resolver runs off the loop), and TLS
//            without a context: libcurl's multi interface (CURLMOPT_SOCKETFUNCTION /
//            TIMERFUNCTION)
//
// Both meet everything below, message texts included; the client tests run against both.
//
//   send(endpoint, request, callbacks)
//     request body: read straight from the BufferChain's segments (native: handed to the
//                   socket as they are; libcurl: its upload buffer is the one copy on
//                   this path); Content-Length is set, never chunked; no Expect:
//                   100-continue
//     response:     buffered whole into one Buffer (reserved from Content-Length) and
//                   handed to on_complete; or, when on_head is set, streamed: on_head once
//                   the status and headers are in, on_data for each piece as it arrives
//                   (server-sent events are relayed this way), then on_complete with an
//                   empty body; with `relay` (native engine), only a large sized body
//                   still arriving is streamed, to the relay, from the buffer it is read
//                   into (a passthrough answer relayed as it comes), or through a window
//                   of reused blocks when the relay takes them: then the upstream is read
//                   no faster than the relay lets go of what it was handed
//
// Endpoints: "host:port", "[v6]:port" or "unix:/path".
//
// TLS (options.tls): https to every endpoint, unix: ones included; the certificate's chain
// and name are verified (server_name, or the endpoint's host) unless told otherwise;
// TLS 1.2 at least; keep-alive connections are reused as over plaintext, and a new
// connection resumes an earlier one's TLS session (http_client_tls.h for libcurl,
// tls/client_session.h for the native engine). A TLS failure's text differs by engine:
// libcurl's "the upstream's TLS certificate was not accepted (SSL: ...)", the native
// "the TLS handshake failed: handshake: ...certificate verify failed (...)".
//
// Errors (on_complete's status, naming the upstream and endpoint):
//   UNAVAILABLE        connection refused / reset / closed before a full response,
//                      name not resolved, connect timeout, TLS handshake failed or the
//                      upstream's certificate not accepted; the ones before any byte was
//                      sent (refused, not resolved, connect timeout, handshake, and no
//                      byte of the request left: a request whose reused connection breaks
//                      is sent again on a new one) are marked markNotSent (upstream_status.h)
//   DEADLINE_EXCEEDED  the request's timeout passed
//   INVALID_ARGUMENT, stamped ErrorOrigin::kUpstream (-> 502)
//                      a response that is not HTTP/1.x, or malformed (a broken chunked
//                      body, a bad content encoding)
// Connections: kept alive and reused; one that receives anything while idle (an answer
// nobody asked for, a close) is shut down before it can carry another request.
//   CANCELLED          cancel() was called (on_complete is then not called at all)
// An upstream's HTTP error status (4xx, 5xx) is a response, not an error.
//
// Threads: loop thread only, for every member and every callback.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/event_loop.h"
#include "gateway/http/http_message.h"
#include "gateway/upstream/host_addresses.h"
#include "tls/client_session.h"

namespace infergate::gateway::upstream {

struct HttpUpstreamRequest {
  std::string method = "POST";  // "GET", "POST"
  std::string target;           // path and query, sent as is (never re-encoded)
  std::vector<std::pair<std::string, std::string>> headers;  // no Host / Content-Length
  codecs::BufferChain body;
  std::chrono::milliseconds timeout{0};  // the whole exchange; 0 = none
  // The client's body while it still arrives (http/body_arrival.h), when `body` references
  // it: the native engine sends each byte once it is in (and ends the call, cancelled, when
  // the body never comes whole); a caller that may reach libcurl waits for the whole body
  // first (sendsAsArrives).
  std::shared_ptr<http::BodyArrival> arrival;
};
// A request as the clients hold it while it is in flight: shared, so that a caller that
// may send it again (a retry on another endpoint) keeps it without a copy.
using SharedHttpRequest = std::shared_ptr<const HttpUpstreamRequest>;

struct HttpUpstreamResponse {
  int status = 0;
  http::HeaderList headers;  // as received (names as sent by the upstream)
  codecs::Buffer body;       // empty when streamed
};

// How much of a relayed body is handed on at a time (the last piece may be less): a
// write toward the client per piece, not per read of the upstream's socket.
inline constexpr size_t kRelayStepBytes = 256 * 1024;
// A relay that takes blocks (AnswerRelay::takesBlocks): the body is read into blocks of
// this size, each handed on once full; and at most this much of them is held at once (past
// it the upstream is not read until the relay lets go of half). A read of up to a block per
// system call: at 256 KiB the relay measured slower than the whole body read at once
// (bench/README.md, "Large answers in a window of blocks").
inline constexpr size_t kRelayBlockBytes = 1024 * 1024;
inline constexpr size_t kRelayWindowBytes = 8 * 1024 * 1024;

// Where a relayed answer goes (HttpUpstreamCallbacks::relay): its head with the body's
// length (its Content-Length, as the client read it), then the body's pieces; on_complete
// still ends the call (an empty body when the head went here). One object rather than two
// more std::functions per request: most answers never relay, and the object is the only
// thing a request pays for the possibility. Loop thread.
//
// The pieces come one of two ways (the native engine's; libcurl never relays):
//   - by default, consecutive slices of the one buffer the body is read into, of the
//     body's length, the first at its start: a relay may reference that buffer's unread
//     rest (the first piece's owner keeps it) as memory still being written, and read of
//     it only what the pieces have covered. The whole body is in memory by its end.
//   - takesBlocks(): each piece is a block of its own (kRelayBlockBytes, the last one
//     less; reused from the buffer pool), and what the relay holds of them counts against
//     kRelayWindowBytes: once a block more would pass it, the upstream's socket is not read
//     (TCP then holds the upstream back) until the relay has let go of half the window.
//     A relay that passes its pieces on (to a client's socket) and drops them once written
//     so holds a body of any size in a few MiB, and a client that reads slowly makes the
//     upstream send slowly. Pieces must be let go of on the loop thread. The call's
//     timeout still runs while reading waits.
class AnswerRelay {
 public:
  virtual ~AnswerRelay() = default;
  virtual void onHead(int status, const http::HeaderList& headers, uint64_t length) = 0;
  virtual void onPiece(codecs::Buffer piece) = 0;
  // Whether the pieces may be blocks of their own (see above); asked once per relayed body.
  virtual bool takesBlocks() const { return false; }
};

struct HttpUpstreamCallbacks {
  // Optional; set to stream the body.
  std::function<void(int status, const http::HeaderList& headers)> on_head;
  std::function<void(codecs::Buffer piece)> on_data;
  // With on_head: the pieces on_data is handed count against kRelayWindowBytes until they
  // are let go of (on the loop thread), as a relay's blocks do; while they pass it, the
  // upstream's socket is not read (TCP holds the upstream back), and reading resumes at
  // half. Only for a caller that lets go of each piece once it is passed on (written to
  // its client): one that keeps them would wait for the call's timeout. The native engine
  // only; libcurl hands its pieces on as they come.
  bool windowed_data = false;
  // Optional, instead of on_head: only a final answer whose body (Content-Length above
  // kRelayStepBytes, not chunked) is still arriving once its head is in goes here, without
  // a copy: the body is read into one buffer of its length as when buffered, its pieces
  // handed on every kRelayStepBytes and at the end, or into blocks
  // (AnswerRelay::takesBlocks), each handed on once full (and what arrived, when the call
  // fails after its head). Any other
  // answer is buffered whole for on_complete. libcurl buffers every answer.
  std::shared_ptr<AnswerRelay> relay;
  // Once, last (not after cancel()).
  std::function<void(codecs::StatusOr<HttpUpstreamResponse> response)> on_complete;
};

// A request in flight. cancel() stops it (the connection is closed, not reused); after
// the end it does nothing. Loop thread.
class HttpCallHandle {
 public:
  virtual ~HttpCallHandle() = default;
  virtual void cancel() = 0;
};

// TLS toward the upstream (https), with the files of its `tls` already read and checked
// (tls/client_credentials.h): the client itself never opens a file.
struct HttpClientTls {
  // Sent (SNI) and verified in the certificate; "" = the endpoint's host ("localhost" for
  // a unix: endpoint). Connections still go to the endpoint's address.
  std::string server_name;
  std::string ca_pem;    // the only CAs trusted; "" = libcurl's default (the system's)
  std::string cert_pem;  // client certificate chain (mTLS); "" = none
  std::string key_pem;   // its key
  bool verify = true;    // false only for insecure_skip_verify: no chain, no name check
  // The same settings as an OpenSSL context (ALPN http/1.1), for the native engine; null:
  // libcurl carries every TLS endpoint.
  std::shared_ptr<const tls::ClientContext> context;
};

// Which engine serves an endpoint (see the top of this file).
enum class HttpClientEngine {
  kAuto,     // native where it can (host names with options.hosts), libcurl for the rest
  kLibcurl,  // libcurl for every endpoint (the fallback, and how its tests reach it)
};

struct HttpClientOptions {
  std::string upstream_name;  // for messages
  HttpClientEngine engine = HttpClientEngine::kAuto;
  uint32_t max_connections_per_endpoint = 64;
  std::chrono::milliseconds connect_timeout{5000};
  std::optional<HttpClientTls> tls;  // absent = plaintext
  // The addresses of host-name endpoints, as the gateway's discovery resolves them: with
  // it, the native engine serves host names too. Null: libcurl resolves them.
  std::shared_ptr<const HostAddresses> hosts;
};

class HttpUpstreamClient {
 public:
  HttpUpstreamClient(http::EventLoop& loop, HttpClientOptions options);
  ~HttpUpstreamClient();  // cancels what is in flight (no callbacks)
  HttpUpstreamClient(const HttpUpstreamClient&) = delete;
  HttpUpstreamClient& operator=(const HttpUpstreamClient&) = delete;

  // Ends every call in flight without calling back, dropping the callbacks, as the
  // destructor does. For shutdown, once the loop has stopped: a call's callbacks may hold
  // (through the request) the set that owns this client, a cycle only this breaks.
  void abandonAll();

  std::shared_ptr<HttpCallHandle> send(const config::ListenAddress& endpoint,
                                       SharedHttpRequest request,
                                       HttpUpstreamCallbacks callbacks);
  // Whether a request to `endpoint` may carry a body still arriving
  // (HttpUpstreamRequest::arrival): the native engine's endpoints.
  bool sendsAsArrives(const config::ListenAddress& endpoint) const;
  std::shared_ptr<HttpCallHandle> send(const config::ListenAddress& endpoint,
                                       HttpUpstreamRequest request,
                                       HttpUpstreamCallbacks callbacks) {
    return send(endpoint, std::make_shared<const HttpUpstreamRequest>(std::move(request)),
                std::move(callbacks));
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infergate::gateway::upstream
