#include "tls/server_session.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace infergate::tls {
namespace {

// Segments up to this size are gathered into one record instead of one record each (a
// response head and a small body go out as one record, not two).
constexpr size_t kGatherMax = 16 * 1024;

// The answer to a plain HTTP request on the TLS port, in plain HTTP: the one thing such a
// client can read.
const std::string& plaintextRequestAnswer() {
  static const std::string answer = [] {
    const std::string body =
        R"({"error":"this port serves HTTPS, and the request came in plain HTTP: use https://"})";
    return codecs::strCat("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n",
                          "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                          body);
  }();
  return answer;
}

}  // namespace

ServerSession::ServerSession(std::shared_ptr<const ServerContext> context, int fd)
    : context_(std::move(context)) {
  ssl_ = SSL_new(context_->get());
  if (ssl_ != nullptr) {
    SSL_set_fd(ssl_, fd);
    SSL_set_accept_state(ssl_);
  } else {
    error_ = drainErrors("SSL_new failed");
  }
}

ServerSession::~ServerSession() {
  if (ssl_) SSL_free(ssl_);
}

ssize_t ServerSession::failure(int rc, const char* during, bool writing) {
  const int code = SSL_get_error(ssl_, rc);
  // A write never answers 0: the peer gone (its close_notify, a reset, a closed socket) is
  // an error there, or its caller would take 0 for "nothing written yet" and try again.
  if (writing && (code == SSL_ERROR_ZERO_RETURN || code == SSL_ERROR_SYSCALL)) {
    want_ = Want::kNone;
    const int saved = errno != 0 ? errno : EPIPE;
    error_ = codecs::strCat(during, ": ", drainErrors(std::strerror(saved)));
    errno = saved;
    return -1;
  }
  switch (code) {
    case SSL_ERROR_WANT_READ:
      want_ = Want::kRead;
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      want_ = Want::kWrite;
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:  // close_notify
      want_ = Want::kNone;
      return 0;
    case SSL_ERROR_SYSCALL:
      want_ = Want::kNone;
      if (ERR_peek_error() == 0 && (errno == 0 || rc == 0)) {
        // EOF without close_notify. Common and harmless for a client that is done (the
        // HTTP framing says where messages end): a plain close.
        return 0;
      }
      error_ = codecs::strCat(during, ": ", drainErrors(errno ? std::strerror(errno) : "I/O error"));
      errno = EIO;
      return -1;
    default:
      want_ = Want::kNone;
      // OpenSSL recognises an HTTP request line in the first bytes of the connection.
      if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_HTTP_REQUEST) {
        const std::string& answer = plaintextRequestAnswer();
        // Best effort, one non-blocking try: the connection is closed right after.
        (void)::send(SSL_get_fd(ssl_), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      error_ = codecs::strCat(during, ": ", drainErrors("TLS failure"));
      errno = EPROTO;
      return -1;
  }
}

ssize_t ServerSession::read(void* buffer, size_t size) {
  if (ssl_ == nullptr) {
    errno = EPROTO;
    return -1;
  }
  const bool handshaking = !handshakeDone();
  ERR_clear_error();
  errno = 0;
  size_t got = 0;
  int rc = SSL_read_ex(ssl_, buffer, size, &got);
  if (rc == 1) {
    want_ = Want::kNone;
    return static_cast<ssize_t>(got);
  }
  return failure(0, handshaking ? "handshake" : "read", false);
}

ssize_t ServerSession::flushStaged() {
  while (staged_sent_ < staged_.size()) {
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int rc = SSL_write_ex(ssl_, staged_.data() + staged_sent_, staged_.size() - staged_sent_, &n);
    if (rc != 1) return failure(0, handshakeDone() ? "write" : "handshake", true);
    staged_sent_ += n;
  }
  staged_.clear();
  staged_sent_ = 0;
  return 0;
}

ssize_t ServerSession::writev(const iovec* iov, int count) {
  if (ssl_ == nullptr) {
    errno = EPROTO;
    return -1;
  }
  // Bytes taken earlier go first: OpenSSL wants a retried record written again as it was.
  if (hasBufferedOutput() && flushStaged() < 0) return -1;
  size_t taken = 0;
  int i = 0;
  while (i < count) {
    const size_t len = iov[i].iov_len;
    const auto* data = static_cast<const uint8_t*>(iov[i].iov_base);
    if (len == 0) {
      ++i;
      continue;
    }
    if (len < kGatherMax) {
      // Gather this and the small segments after it into one record.
      while (i < count && iov[i].iov_len < kGatherMax &&
             staged_.size() + iov[i].iov_len <= kGatherMax) {
        const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
        staged_.insert(staged_.end(), p, p + iov[i].iov_len);
        taken += iov[i].iov_len;
        ++i;
      }
      if (flushStaged() < 0) {
        // The staged bytes are taken (they wait in staged_); report them as written.
        if (errno == EAGAIN && taken > 0) return static_cast<ssize_t>(taken);
        return -1;
      }
      continue;
    }
    // A large segment, record by record from where it is (partial writes are on: each
    // success may cover one record only).
    for (size_t done = 0; done < len;) {
      ERR_clear_error();
      errno = 0;
      size_t n = 0;
      if (SSL_write_ex(ssl_, data + done, len - done, &n) != 1) {
        ssize_t r = failure(0, handshakeDone() ? "write" : "handshake", true);
        return taken > 0 && errno == EAGAIN ? static_cast<ssize_t>(taken) : r;
      }
      done += n;
      taken += n;
    }
    ++i;
  }
  want_ = Want::kNone;
  return static_cast<ssize_t>(taken);
}

bool ServerSession::hasBufferedInput() const {
  if (ssl_ == nullptr) return false;
  if (SSL_pending(ssl_) > 0) return true;  // decrypted and not yet taken
  // Read-ahead bytes not yet decrypted: after a read that wanted more they are only part of
  // a record, and the socket tells when the rest arrives (calling this true then would
  // spin the loop until it does).
  return want_ != Want::kRead && SSL_has_pending(ssl_) == 1;
}

void ServerSession::shutdown() {
  if (ssl_ == nullptr || !handshakeDone()) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
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

std::string ServerSession::protocol() const {
  return ssl_ != nullptr ? SSL_get_version(ssl_) : "";
}

std::string ServerSession::alpn() const {
  if (ssl_ == nullptr) return {};
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl_, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

}  // namespace infergate::tls
