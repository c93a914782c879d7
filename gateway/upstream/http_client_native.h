#pragma once

// The engine HttpUpstreamClient (http_client.h) uses for endpoints it can reach without a
// resolver: an IPv4 or IPv6 literal, or a unix: path; in plaintext, or TLS when the options
// carry a tls::ClientContext. HTTP/1.1 over non-blocking sockets driven by the worker's
// libevent loop, written for the one job the gateway gives it -- many small exchanges on
// kept-alive connections -- where libcurl's general machinery (URL parsing, option
// handling, its own header formatting and callbacks) cost more than half of the gateway's
// instructions per forwarded request (bench/README.md).
//
// The contract is http_client.h's, to the message text: the same headers go out (Host,
// the caller's forwardable ones, Content-Length), the same statuses come back, the same
// marks (markNotSent) are set. What it does on its own:
//
//   connections  per endpoint, at most max_connections_per_endpoint open (connecting, busy
//                or idle); further requests wait in a FIFO; an idle one is reused
//                newest-first; one that receives anything while idle is closed
//   sending      the request line and headers, then the body's segments, in one sendmsg
//                (no copy of the body at all); the rest when the socket is writable again
//   receiving    the status line and headers through http_parser; a buffered body of known
//                length is received straight into its one buffer once the head is in
//   resending    a request whose reused connection turns out dead (closed or reset before
//                any byte of an answer) is sent once more on a fresh connection, as
//                libcurl does; it is then never marked not-sent
//   TLS          a tls::ClientSession per connection (SNI, the name or IP checked, ALPN
//                http/1.1, the endpoint's last session resumed); the connect timeout
//                bounds the handshake too; a failed or unanswered handshake fails the
//                call as not sent ("the TLS handshake failed: ...", its reason named),
//                unless a connection before carried it (a resend); an upstream that
//                refuses the client's certificate after the client's side of the TLS 1.3
//                handshake ended fails it as a broken connection, the alert named; the
//                request waits in the session until the handshake ends; an idle
//                connection that receives a record without data (a session ticket) stays
//
// Threads: loop thread only, like HttpUpstreamClient.

#include <memory>

#include "config/config.h"
#include "gateway/http/event_loop.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway::upstream {

class NativeHttpClient {
 public:
  NativeHttpClient(http::EventLoop& loop, const HttpClientOptions& options);
  ~NativeHttpClient();  // ends every call in flight without calling back
  NativeHttpClient(const NativeHttpClient&) = delete;
  NativeHttpClient& operator=(const NativeHttpClient&) = delete;

  // Whether this engine serves `endpoint`: an IP literal or unix: path, or a host name with
  // options.hosts; TLS only with options.tls->context.
  static bool serves(const config::ListenAddress& endpoint, const HttpClientOptions& options);

  std::shared_ptr<HttpCallHandle> send(const config::ListenAddress& endpoint,
                                       SharedHttpRequest request,
                                       HttpUpstreamCallbacks callbacks);
  void abandonAll();

 private:
  class Engine;
  std::unique_ptr<Engine> engine_;
};

}  // namespace infergate::gateway::upstream
