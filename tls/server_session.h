#pragma once

// The listeners' end of a TLS connection (session.h has the calls and what they return):
// a session made from the listener's context at accept, and the client certificate it
// verified. A plain HTTP request on the TLS port gets one plain 400 answer before the
// connection fails.
//
// Threads: one thread at a time (the connection's loop).

#include <memory>
#include <string>

#include "tls/peer_identity.h"
#include "tls/server_context.h"
#include "tls/session.h"

namespace infergate::tls {

class ServerSession : public Session {
 public:
  // Takes a reference to `context` for the connection's life; does not own `fd`.
  ServerSession(std::shared_ptr<const ServerContext> context, int fd);

  // The verified client certificate's identity, or null (none sent, or no handshake yet).
  const PeerIdentity* peer();
  // The same certificate as PEM; "" when peer() is null.
  std::string peerPem();

 private:
  std::shared_ptr<const ServerContext> context_;
  bool peer_read_ = false;
  std::unique_ptr<PeerIdentity> peer_;
};

}  // namespace infergate::tls
