#pragma once

// The upstream clients' end of a TLS connection (session.h has the calls and what they
// return), from an upstream's `tls` settings (client_credentials.h has them read).
//
//   ClientContext   one SSL_CTX per upstream client: TLS 1.2 at least; the upstream's
//                   chain verified against `ca` (none given: the system's trust store)
//                   unless insecure_skip_verify; the client certificate and key when given
//                   (mTLS); the ALPN protocols offered ("h2" for gRPC). It keeps the last
//                   session ticket per endpoint, so that a new connection resumes instead
//                   of a full handshake.
//   ClientSession   one connection: SNI and the name verified (verifiedName: server_name,
//                   else the endpoint's host, "localhost" for a unix: endpoint; an IP
//                   literal is checked against the certificate's IP addresses and not sent
//                   as SNI), the handshake started by the first read() or writev().
//
// A failed handshake's error() says why, the certificate check's reason included:
//   "handshake: error:0A000086:SSL routines::certificate verify failed (hostname mismatch: the
//    certificate is not for upstream.internal)"
//
// Threads: ClientContext is shared by the connections of every loop (its ticket cache
// locks); a ClientSession is one loop's.

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"
#include "tls/client_credentials.h"
#include "tls/session.h"

namespace infergate::tls {

class ClientContext {
 public:
  // `alpn`: the protocols offered, most wanted first (empty: no ALPN).
  static codecs::StatusOr<std::shared_ptr<const ClientContext>> create(
      std::shared_ptr<const ClientTls> tls, const std::vector<std::string>& alpn);
  ~ClientContext();
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  SSL_CTX* get() const { return ctx_; }
  const ClientTls& settings() const { return *tls_; }

  // The name a connection to `endpoint` sends and verifies.
  std::string verifiedName(const config::ListenAddress& endpoint) const;

 private:
  friend class ClientSession;
  ClientContext(SSL_CTX* ctx, std::shared_ptr<const ClientTls> tls) : ctx_(ctx), tls_(std::move(tls)) {}
  static int onNewSession(SSL* ssl, SSL_SESSION* session);
  // A copy of the session kept for `key` (the caller frees it), or null.
  SSL_SESSION* ticketFor(const std::string& key) const;

  SSL_CTX* ctx_;
  std::shared_ptr<const ClientTls> tls_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, SSL_SESSION*> tickets_;  // owned references
};

class ClientSession : public Session {
 public:
  // Takes a reference to `context` for the connection's life; does not own `fd`.
  // `endpoint` names what is verified and which earlier session may be resumed.
  ClientSession(std::shared_ptr<const ClientContext> context, int fd,
                const config::ListenAddress& endpoint);

 private:
  std::shared_ptr<const ClientContext> context_;
  std::string ticket_key_;
};

}  // namespace infergate::tls
