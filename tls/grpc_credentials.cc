#include "tls/grpc_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "tls/server_context.h"

namespace infergate::tls {

codecs::StatusOr<std::shared_ptr<::grpc::ServerCredentials>> serverCredentials(
    const config::ServerTlsConfig& config) {
  using ClientAuth = config::ServerTlsConfig::ClientAuth;
  INFERGATE_RETURN_IF_ERROR(ServerContext::create(config, {"h2"}).status());
  const unsigned refresh_s =
      static_cast<unsigned>(std::max<uint64_t>(1, (config.watch_interval_ms + 999) / 1000));
  std::shared_ptr<::grpc::experimental::CertificateProviderInterface> provider;
  if (config.client_ca.empty()) {
    provider = std::make_shared<::grpc::experimental::FileWatcherCertificateProvider>(
        config.key, config.cert, refresh_s);
  } else {
    provider = std::make_shared<::grpc::experimental::FileWatcherCertificateProvider>(
        config.key, config.cert, config.client_ca, refresh_s);
  }
  ::grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!config.client_ca.empty()) options.watch_root_certs();
  switch (config.client_auth) {
    case ClientAuth::kNone:
      options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      break;
    case ClientAuth::kOptional:
      options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
      break;
    case ClientAuth::kRequire:
      options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      break;
  }
  std::shared_ptr<::grpc::ServerCredentials> credentials =
      ::grpc::experimental::TlsServerCredentials(options);
  if (!credentials) return absl::InternalError("grpc refused the TLS server credentials");
  return credentials;
}

}  // namespace infergate::tls
