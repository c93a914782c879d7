#pragma once

// grpc credentials from the config's TLS settings.
//
//   serverCredentials   the gRPC listener: grpc's TlsServerCredentials over a
//                       FileWatcherCertificateProvider, so grpc itself picks up new
//                       certificate files (every watch_interval_ms, rounded up to whole
//                       seconds). The files are first loaded once through OpenSSL
//                       (ServerContext) so that a bad file refuses the start with the same
//                       message the HTTP listener gives, instead of failing each handshake.
//
// grpc (1.51) has no per-server setting for the protocol floor, ciphers or groups: it
// negotiates TLS 1.2 and 1.3 with its own list (the config refuses those keys there).

#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::tls {

codecs::StatusOr<std::shared_ptr<::grpc::ServerCredentials>> serverCredentials(
    const config::ServerTlsConfig& config);

}  // namespace infergate::tls
