#include "tls/server_session.h"

#include <openssl/pem.h>
#include <openssl/ssl.h>

namespace infergate::tls {

ServerSession::ServerSession(std::shared_ptr<const ServerContext> context, int fd)
    : Session(SSL_new(context->get()), fd), context_(std::move(context)) {
  if (ssl_ != nullptr) SSL_set_accept_state(ssl_);
}

const PeerIdentity* ServerSession::peer() {
  if (peer_read_) return peer_.get();
  if (ssl_ == nullptr || !handshakeDone()) return nullptr;
  peer_read_ = true;
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) return nullptr;
  peer_ = std::make_unique<PeerIdentity>(identityOf(cert));
  return peer_.get();
}

std::string ServerSession::peerPem() {
  if (peer() == nullptr) return {};
  X509* cert = SSL_get0_peer_certificate(ssl_);
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  std::string pem;
  if (PEM_write_bio_X509(bio, cert) == 1) {
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    if (size > 0) pem.assign(data, static_cast<size_t>(size));
  }
  BIO_free(bio);
  return pem;
}

}  // namespace infergate::tls
