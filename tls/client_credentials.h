#pragma once

// TLS toward an upstream, from its `tls` settings (config::UpstreamTlsConfig).
//
//   loadClientTls        reads the files (ca, cert, key) once and checks them with OpenSSL:
//                        the CA bundle holds certificates, the chain loads, the key belongs
//                        to its certificate. Both upstream clients are built from what it
//                        returns, so neither reads a file on a request path (the HTTP client
//                        hands the bytes to libcurl as blobs), and a bad file refuses the
//                        start or the reload instead of failing every handshake.
//   channelCredentials   grpc credentials: SslCredentials, verifying the upstream's chain
//                        against `ca` (empty: grpc's default roots, the system's) and its
//                        name, presenting the client certificate when one is given. With
//                        insecure_skip_verify, grpc's TlsCredentials with server
//                        certificate checks off and a verifier that accepts any peer.
//   setChannelArguments  server_name as grpc's target name override: the name sent (SNI)
//                        and verified in the certificate, for every endpoint.
//
// Hostname verification is on unless insecure_skip_verify says otherwise: the name is
// server_name, or the endpoint's host ("localhost" for a unix: endpoint).
//
// Errors name the upstream, the key and the file:
//   "upstreams[triton].tls.key: /etc/tls/client.key: the key does not belong to the
//    certificate in /etc/tls/client.pem"
//
// Threads: any; nothing here keeps state.

#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>
#include <string_view>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::tls {

// An upstream's `tls` with its files read and checked. Immutable once built.
struct ClientTls {
  config::UpstreamTlsConfig config;
  std::string ca_pem;    // the CA bundle; "" when config.ca is (the system's trust store)
  std::string cert_pem;  // the client certificate chain, leaf first; "" when none
  std::string key_pem;   // its private key; "" when none
};

// Two loads that would make the same connections (same settings, same file contents).
bool sameClientTls(const ClientTls& a, const ClientTls& b);

// `upstream`: the upstream's name, for messages. Encrypted keys are refused (no
// passphrase can be given).
codecs::StatusOr<std::shared_ptr<const ClientTls>> loadClientTls(
    std::string_view upstream, const config::UpstreamTlsConfig& config);

codecs::StatusOr<std::shared_ptr<::grpc::ChannelCredentials>> channelCredentials(
    const ClientTls& tls);

// Adds what the settings ask of a channel (the target name override) to `args`.
void setChannelArguments(const ClientTls& tls, ::grpc::ChannelArguments& args);

}  // namespace infergate::tls
