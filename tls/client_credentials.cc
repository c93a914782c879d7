#include "tls/client_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tls/pem_memory.h"
#include "tls/server_context.h"

namespace infergate::tls {
namespace {

using codecs::strCat;

// Says where a check failed: "upstreams[NAME].tls.KEY: PATH: what".
class Reporter {
 public:
  explicit Reporter(std::string_view upstream) : upstream_(upstream) {}
  codecs::Status error(std::string_view key, const std::string& path, std::string_view what) const {
    return absl::InvalidArgumentError(
        strCat("upstreams[", upstream_, "].tls.", key, ": ", path, ": ", what));
  }

 private:
  std::string_view upstream_;
};

codecs::StatusOr<std::string> readFile(const Reporter& report, std::string_view key,
                                       const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return report.error(key, path, std::strerror(errno));
  std::string bytes;
  char chunk[16384];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) bytes.append(chunk, n);
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) return report.error(key, path, std::strerror(error));
  return bytes;
}

using pem::BioPtr;
using pem::KeyPtr;
using pem::memoryBio;
using pem::noPassphrase;
using pem::X509Ptr;

// Reads every PEM certificate of `bytes`, keeping the first in `*first` when asked. The
// end of the input ends the loop; anything else that stops it is an error.
codecs::Status readCertificates(const Reporter& report, std::string_view key,
                                const std::string& path, const std::string& bytes,
                                X509Ptr* first) {
  ERR_clear_error();
  BioPtr bio = memoryBio(bytes);
  if (!bio) return absl::InternalError(drainErrors("BIO_new_mem_buf failed"));
  size_t count = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, noPassphrase, nullptr)) {
    if (count++ == 0 && first != nullptr) {
      first->reset(cert);
    } else {
      X509_free(cert);
    }
  }
  const unsigned long last = ERR_peek_last_error();
  if (count > 0 && ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
    ERR_clear_error();  // the input ended
    return absl::OkStatus();
  }
  if (count == 0 && (last == 0 || ERR_GET_REASON(last) == PEM_R_NO_START_LINE)) {
    ERR_clear_error();
    return report.error(key, path, "no PEM certificate in the file");
  }
  return report.error(key, path, drainErrors("cannot read a PEM certificate"));
}

}  // namespace

bool sameClientTls(const ClientTls& a, const ClientTls& b) {
  return a.config.ca == b.config.ca && a.config.server_name == b.config.server_name &&
         a.config.cert == b.config.cert && a.config.key == b.config.key &&
         a.config.insecure_skip_verify == b.config.insecure_skip_verify && a.ca_pem == b.ca_pem &&
         a.cert_pem == b.cert_pem && a.key_pem == b.key_pem;
}

codecs::StatusOr<std::shared_ptr<const ClientTls>> loadClientTls(
    std::string_view upstream, const config::UpstreamTlsConfig& config) {
  const Reporter report(upstream);
  auto tls = std::make_shared<ClientTls>();
  tls->config = config;
  if (!config.ca.empty()) {
    INFERGATE_ASSIGN_OR_RETURN(tls->ca_pem, readFile(report, "ca", config.ca));
    INFERGATE_RETURN_IF_ERROR(readCertificates(report, "ca", config.ca, tls->ca_pem, nullptr));
  }
  if (config.cert.empty() != config.key.empty()) {
    // The loader refuses this; a config built in code might not.
    return report.error(config.cert.empty() ? "key" : "cert",
                        config.cert.empty() ? config.key : config.cert,
                        "give cert and key together");
  }
  if (config.cert.empty()) return std::shared_ptr<const ClientTls>(std::move(tls));

  INFERGATE_ASSIGN_OR_RETURN(tls->cert_pem, readFile(report, "cert", config.cert));
  X509Ptr leaf;
  INFERGATE_RETURN_IF_ERROR(readCertificates(report, "cert", config.cert, tls->cert_pem, &leaf));
  INFERGATE_ASSIGN_OR_RETURN(tls->key_pem, readFile(report, "key", config.key));
  ERR_clear_error();
  BioPtr bio = memoryBio(tls->key_pem);
  KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, noPassphrase, nullptr) : nullptr);
  if (!key) {
    return report.error("key", config.key,
                        strCat("cannot read a PEM private key (an encrypted key is not "
                               "supported): ",
                               drainErrors("no key in the file")));
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    ERR_clear_error();
    return report.error("key", config.key,
                        strCat("the key does not belong to the certificate in ", config.cert));
  }
  return std::shared_ptr<const ClientTls>(std::move(tls));
}

codecs::StatusOr<std::shared_ptr<::grpc::ChannelCredentials>> channelCredentials(
    const ClientTls& tls) {
  std::shared_ptr<::grpc::ChannelCredentials> credentials;
  if (!tls.config.insecure_skip_verify) {
    ::grpc::SslCredentialsOptions options;
    options.pem_root_certs = tls.ca_pem;  // "" = grpc's default roots
    options.pem_private_key = tls.key_pem;
    options.pem_cert_chain = tls.cert_pem;
    credentials = ::grpc::SslCredentials(options);
  } else {
    // SslCredentials always verify; only the experimental TLS credentials can be told not
    // to: no chain check, no name check (per connection or per call), any peer accepted.
    ::grpc::experimental::TlsChannelCredentialsOptions options;
    if (!tls.cert_pem.empty()) {
      options.set_certificate_provider(
          std::make_shared<::grpc::experimental::StaticDataCertificateProvider>(
              std::vector<::grpc::experimental::IdentityKeyCertPair>{{tls.key_pem, tls.cert_pem}}));
      options.watch_identity_key_cert_pairs();
    }
    options.set_verify_server_certs(false);
    options.set_check_call_host(false);
    options.set_certificate_verifier(
        std::make_shared<::grpc::experimental::NoOpCertificateVerifier>());
    credentials = ::grpc::experimental::TlsCredentials(options);
  }
  if (!credentials) return absl::InternalError("grpc refused the TLS channel credentials");
  return credentials;
}

void setChannelArguments(const ClientTls& tls, ::grpc::ChannelArguments& args) {
  if (!tls.config.server_name.empty()) args.SetSslTargetNameOverride(tls.config.server_name);
}

}  // namespace infergate::tls
