#include "tls/client_session.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <functional>

#include "tls/pem_memory.h"
#include "tls/server_context.h"

namespace infergate::tls {
namespace {

using codecs::strCat;

using pem::BioPtr;
using pem::KeyPtr;
using pem::memoryBio;
using pem::noPassphrase;

// The endpoints whose last session a context keeps.
constexpr size_t kMaxTickets = 1024;

// The index of the ClientSession's ticket key in each SSL's ex_data.
int ticketKeyIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
// The index of the ClientContext in its SSL_CTX's ex_data.
int contextIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

bool isIpLiteral(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// Every certificate of a PEM bundle, in order (loadClientTls checked that there is one).
codecs::Status forEachCertificate(const std::string& pem, const std::function<bool(X509*)>& use) {
  BioPtr bio = memoryBio(pem);
  if (!bio) return absl::InternalError(drainErrors("BIO_new_mem_buf failed"));
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, noPassphrase, nullptr)) {
    const bool ok = use(cert);
    X509_free(cert);
    if (!ok) return absl::InvalidArgumentError(drainErrors("a certificate was not accepted"));
  }
  ERR_clear_error();  // the end of the input
  return absl::OkStatus();
}

}  // namespace

codecs::StatusOr<std::shared_ptr<const ClientContext>> ClientContext::create(
    std::shared_ptr<const ClientTls> tls, const std::vector<std::string>& alpn) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return absl::InternalError(drainErrors("SSL_CTX_new failed"));
  // Owned from here: freed with the context, also when a step below fails.
  std::shared_ptr<ClientContext> context(new ClientContext(ctx, tls));
  auto refuse = [&](std::string_view what) -> codecs::Status {
    return absl::InvalidArgumentError(strCat("upstream TLS: ", what, ": ", drainErrors("refused by OpenSSL")));
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // An upstream that closes without close_notify ends the stream (a read answers 0) as
  // over plaintext: HTTP's framing says whether the answer was whole.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_read_ahead(ctx, 1);
  if (tls->config.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (tls->ca_pem.empty()) {
      if (SSL_CTX_set_default_verify_paths(ctx) != 1) return refuse("the system's trust store");
    } else {
      X509_STORE* store = SSL_CTX_get_cert_store(ctx);
      INFERGATE_RETURN_IF_ERROR(forEachCertificate(
          tls->ca_pem, [store](X509* cert) { return X509_STORE_add_cert(store, cert) == 1; }));
    }
  }
  if (!tls->cert_pem.empty()) {
    bool leaf = true;
    INFERGATE_RETURN_IF_ERROR(forEachCertificate(tls->cert_pem, [&](X509* cert) {
      if (leaf) {
        leaf = false;
        return SSL_CTX_use_certificate(ctx, cert) == 1;
      }
      return SSL_CTX_add1_chain_cert(ctx, cert) == 1;
    }));
    BioPtr bio = memoryBio(tls->key_pem);
    KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, noPassphrase, nullptr) : nullptr);
    if (!key || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
      return refuse("the client key");
    }
  }
  if (!alpn.empty()) {
    std::string wire;
    for (const std::string& p : alpn) wire.append(1, static_cast<char>(p.size())).append(p);
    // 0 is success here, unlike the rest of OpenSSL.
    if (SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                                static_cast<unsigned>(wire.size())) != 0) {
      return refuse("ALPN");
    }
  }
  SSL_CTX_set_ex_data(ctx, contextIndex(), context.get());
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &ClientContext::onNewSession);
  return std::shared_ptr<const ClientContext>(std::move(context));
}

ClientContext::~ClientContext() {
  for (auto& [key, session] : tickets_) SSL_SESSION_free(session);
  SSL_CTX_free(ctx_);
}

std::string ClientContext::verifiedName(const config::ListenAddress& endpoint) const {
  if (!tls_->config.server_name.empty()) return tls_->config.server_name;
  if (endpoint.kind == config::ListenAddress::Kind::kUnix) return "localhost";
  return endpoint.host;
}

int ClientContext::onNewSession(SSL* ssl, SSL_SESSION* session) {
  const auto* key = static_cast<const std::string*>(SSL_get_ex_data(ssl, ticketKeyIndex()));
  auto* self = static_cast<ClientContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), contextIndex()));
  if (key == nullptr || self == nullptr) return 0;
  // A copy: OpenSSL marks the connection's own session not resumable when the connection
  // ends without close_notify (a reset, a failure), which must not cost the next one its
  // resumption.
  SSL_SESSION* copy = SSL_SESSION_dup(session);
  if (copy == nullptr) return 0;
  std::lock_guard<std::mutex> lock(self->mutex_);
  if (self->tickets_.size() >= kMaxTickets && self->tickets_.count(*key) == 0) {
    // Endpoints come and go (re-resolved names): the oldest are not known, so all go.
    for (auto& [k, kept] : self->tickets_) SSL_SESSION_free(kept);
    self->tickets_.clear();
  }
  SSL_SESSION*& slot = self->tickets_[*key];
  if (slot != nullptr) SSL_SESSION_free(slot);
  slot = copy;
  return 0;  // the original stays OpenSSL's
}

SSL_SESSION* ClientContext::ticketFor(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tickets_.find(key);
  if (it == tickets_.end() || SSL_SESSION_is_resumable(it->second) != 1) return nullptr;
  // A copy again: the connection that resumes it writes into its session (a resumed
  // TLS 1.3 session is marked spent when a new ticket comes), on its own loop's thread.
  return SSL_SESSION_dup(it->second);
}

ClientSession::ClientSession(std::shared_ptr<const ClientContext> context, int fd,
                             const config::ListenAddress& endpoint)
    : Session(SSL_new(context->get()), fd), context_(std::move(context)) {
  if (ssl_ == nullptr) return;
  SSL_set_connect_state(ssl_);
  const std::string name = context_->verifiedName(endpoint);
  const bool ip = isIpLiteral(name);
  if (!ip) SSL_set_tlsext_host_name(ssl_, name.c_str());  // SNI names hosts only (RFC 6066)
  if (!context_->settings().config.insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    }
  }
  ticket_key_ = endpoint.kind == config::ListenAddress::Kind::kUnix
                    ? strCat(name, "|unix:", endpoint.path)
                    : strCat(name, "|", endpoint.host, ":", endpoint.port);
  SSL_set_ex_data(ssl_, ticketKeyIndex(), &ticket_key_);
  if (SSL_SESSION* ticket = context_->ticketFor(ticket_key_)) {
    SSL_set_session(ssl_, ticket);
    SSL_SESSION_free(ticket);
  }
}

}  // namespace infergate::tls
