#include "tls/server_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include "codecs/status.h"

namespace infergate::tls {
namespace {

using codecs::strCat;

codecs::Status fileError(std::string_view key, const std::string& path, std::string_view what) {
  return absl::InvalidArgumentError(strCat("tls.", key, ": ", path, ": ", drainErrors(what)));
}

codecs::Status settingError(std::string_view key, const std::string& value) {
  return absl::InvalidArgumentError(
      strCat("tls.", key, ": \"", value, "\": ", drainErrors("not accepted by OpenSSL")));
}

// Chooses the first of the server's protocols that the client offers.
int selectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void* arg) {
  const auto* protocols = static_cast<const std::vector<std::string>*>(arg);
  for (const std::string& p : *protocols) {
    for (unsigned int i = 0; i < in_len;) {
      unsigned int len = in[i];
      if (i + 1 + len > in_len) break;
      if (len == p.size() && p.compare(0, len, reinterpret_cast<const char*>(in + i + 1), len) == 0) {
        *out = in + i + 1;
        *out_len = static_cast<unsigned char>(len);
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
  }
  return SSL_TLSEXT_ERR_NOACK;  // no ALPN: the connection goes on without it
}

}  // namespace

// Mozilla's "intermediate" TLS 1.2 list: ECDHE key exchange, AEAD ciphers.
const char kDefaultTls12Ciphers[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string drainErrors(std::string_view fallback) {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text.empty() ? std::string(fallback) : text;
}

FileStamps stampFiles(const config::ServerTlsConfig& config) {
  FileStamps stamps;
  for (const std::string* path : {&config.cert, &config.key, &config.client_ca}) {
    if (!path->empty()) stamps.emplace_back(*path, stampOf(*path));
  }
  return stamps;
}

FileStamp stampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileStamp{};
  return FileStamp{static_cast<unsigned long>(st.st_ino), static_cast<long long>(st.st_size),
                   static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec};
}

ServerContext::~ServerContext() {
  if (ctx_) SSL_CTX_free(ctx_);
}

codecs::StatusOr<std::shared_ptr<const ServerContext>> ServerContext::create(
    const config::ServerTlsConfig& config, std::vector<std::string> alpn) {
  using ClientAuth = config::ServerTlsConfig::ClientAuth;
  ERR_clear_error();
  std::shared_ptr<ServerContext> self(new ServerContext());
  self->config_ = config;
  self->alpn_ = std::move(alpn);
  // The stamps first: a file replaced while it is read shows as changed at the next check.
  self->stamps_ = stampFiles(config);
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(drainErrors("SSL_CTX_new failed"));
  self->ctx_ = ctx;

  SSL_CTX_set_min_proto_version(
      ctx, config.min_version == config::TlsVersion::k13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_COMPRESSION);
  // Partial writes let a big response go out record by record; the connection may retry
  // a write from a moved buffer; idle connections give their buffers back.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  // One read() per socket wakeup instead of two per record (the 5-byte record header, then
  // its body): on a small request that halves the read syscalls.
  SSL_CTX_set_read_ahead(ctx, 1);
  const std::string& ciphers = config.ciphers.empty() ? std::string(kDefaultTls12Ciphers) : config.ciphers;
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) return settingError("ciphers", ciphers);
  if (!config.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, config.ciphersuites.c_str()) != 1) {
    return settingError("ciphersuites", config.ciphersuites);
  }
  if (!config.groups.empty() && SSL_CTX_set1_groups_list(ctx, config.groups.c_str()) != 1) {
    return settingError("groups", config.groups);
  }

  if (SSL_CTX_use_certificate_chain_file(ctx, config.cert.c_str()) != 1) {
    return fileError("cert", config.cert, "cannot load a PEM certificate chain");
  }
  EVP_PKEY* key = nullptr;
  if (BIO* bio = BIO_new_file(config.key.c_str(), "r")) {
    key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
  }
  if (key == nullptr) return fileError("key", config.key, "cannot load a PEM private key");
  const bool matches = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    ERR_clear_error();
    return fileError("key", config.key,
                     strCat("the key does not belong to the certificate in ", config.cert));
  }
  if (X509* leaf = SSL_CTX_get0_certificate(ctx)) {
    struct tm end {};
    if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &end) == 1) self->not_after_ = timegm(&end);
  }

  if (!config.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, config.client_ca.c_str(), nullptr) != 1) {
      return fileError("client_ca", config.client_ca, "cannot load PEM CA certificates");
    }
    // The CA names sent in the CertificateRequest, so clients pick a matching certificate.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.client_ca.c_str());
    if (names == nullptr) {
      return fileError("client_ca", config.client_ca, "no CA certificate in the file");
    }
    SSL_CTX_set_client_CA_list(ctx, names);
  }
  switch (config.client_auth) {
    case ClientAuth::kNone:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      break;
    case ClientAuth::kOptional:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      break;
    case ClientAuth::kRequire:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  // Session resumption across this context's connections (its own ticket keys: a swap
  // to a new context costs the clients one full handshake).
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  static const unsigned char kSessionId[] = "infergate";
  SSL_CTX_set_session_id_context(ctx, kSessionId, sizeof(kSessionId) - 1);

  if (!self->alpn_.empty()) {
    SSL_CTX_set_alpn_select_cb(ctx, &selectAlpn, &self->alpn_);
  }
  ERR_clear_error();
  return std::shared_ptr<const ServerContext>(std::move(self));
}

bool ServerContext::filesChanged() const { return stampFiles(config_) != stamps_; }

codecs::StatusOr<std::shared_ptr<ServerContextSource>> ServerContextSource::create(
    const config::ServerTlsConfig& config, std::vector<std::string> alpn) {
  std::shared_ptr<ServerContextSource> source(new ServerContextSource(std::move(alpn)));
  INFERGATE_RETURN_IF_ERROR(source->update(config));
  return source;
}

std::shared_ptr<const ServerContext> ServerContextSource::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

codecs::Status ServerContextSource::update(const config::ServerTlsConfig& config) {
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const ServerContext> next,
                             ServerContext::create(config, alpn_));
  install(std::move(next));
  return absl::OkStatus();
}

void ServerContextSource::install(std::shared_ptr<const ServerContext> context) {
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(context);
}

codecs::Status ServerContextSource::reloadIfChanged(bool* changed) {
  std::shared_ptr<const ServerContext> now = current();
  *changed = false;
  if (!now->filesChanged()) return absl::OkStatus();
  // Files that already failed to load are tried again only once they change again.
  FileStamps stamps = stampFiles(now->config());
  if (stamps == failed_stamps_) return absl::OkStatus();
  *changed = true;
  codecs::Status status = update(now->config());
  failed_stamps_ = status.ok() ? FileStamps() : std::move(stamps);
  return status;
}

}  // namespace infergate::tls
