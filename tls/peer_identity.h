#pragma once

// Who a client is, from the certificate it presented and the handshake verified: what
// `auth.principals[].client_cert` matches against. The HTTP listener reads it from its
// own session (ServerSession::peer); the gRPC listener from grpc's auth context, which
// carries the verified certificate as PEM (identityOfPem).

#include <openssl/x509.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infergate::tls {

struct PeerIdentity {
  std::string subject;                 // RFC 2253 form: "CN=client,O=example"
  std::string common_name;             // the subject's CN, "" when none
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  std::vector<std::string> uris;       // subjectAltName URIs (SPIFFE ids)
  std::vector<std::string> emails;     // subjectAltName e-mail addresses
};

// The identity written in `cert` (which the caller has verified).
PeerIdentity identityOf(X509* cert);
// The same from a PEM certificate; nullopt when it does not parse.
std::optional<PeerIdentity> identityOfPem(std::string_view pem);

}  // namespace infergate::tls
