#include "tls/session.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "codecs/status.h"
#include "tls/server_context.h"

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

// For a name the certificate does not hold: ": the certificate is not for NAME".
std::string mismatchedName(SSL* ssl, long verify) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  std::string name;
  if (verify == X509_V_ERR_HOSTNAME_MISMATCH) {
    if (const char* host = X509_VERIFY_PARAM_get0_host(param, 0)) name = host;
  } else if (verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    if (char* ip = X509_VERIFY_PARAM_get1_ip_asc(param)) {
      name = ip;
      OPENSSL_free(ip);
    }
  }
  return name.empty() ? std::string() : codecs::strCat(": the certificate is not for ", name);
}

}  // namespace

Session::Session(SSL* ssl, int fd) : ssl_(ssl) {
  if (ssl_ != nullptr) {
    SSL_set_fd(ssl_, fd);
  } else {
    error_ = drainErrors("SSL_new failed");
  }
}

Session::~Session() {
  if (ssl_) SSL_free(ssl_);
}

ssize_t Session::failure(const char* during, bool writing) {
  const int code = SSL_get_error(ssl_, 0);
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
      if (ERR_peek_error() == 0 && (errno == 0 || SSL_is_server(ssl_) == 1)) {
        // EOF without close_notify. Common and harmless for a client that is done (the
        // HTTP framing says where messages end): a plain close. A server takes a reset so
        // too; a client (whose context reads a bare EOF as the end already) must tell a
        // reset from the end of a body that runs to the connection's close.
        return 0;
      }
      error_ = codecs::strCat(during, ": ", drainErrors(errno ? std::strerror(errno) : "I/O error"));
      errno = EIO;
      return -1;
    default: {
      want_ = Want::kNone;
      // OpenSSL recognises an HTTP request line in the first bytes of a server's connection.
      if (SSL_is_server(ssl_) == 1 && ERR_GET_REASON(ERR_peek_error()) == SSL_R_HTTP_REQUEST) {
        const std::string& answer = plaintextRequestAnswer();
        // Best effort, one non-blocking try: the connection is closed right after.
        (void)::send(SSL_get_fd(ssl_), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      const bool verify_failed = ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_CERTIFICATE_VERIFY_FAILED;
      error_ = codecs::strCat(during, ": ", drainErrors("TLS failure"));
      // What the certificate check said ("hostname mismatch"), which the error queue
      // only calls "certificate verify failed".
      if (const long verify = SSL_get_verify_result(ssl_); verify_failed && verify != X509_V_OK) {
        error_ = codecs::strCat(error_, " (", X509_verify_cert_error_string(verify), mismatchedName(ssl_, verify), ")");
      }
      errno = EPROTO;
      return -1;
    }
  }
}

ssize_t Session::read(void* buffer, size_t size) {
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
  return failure(handshaking ? "handshake" : "read", false);
}

ssize_t Session::flushStaged() {
  while (staged_sent_ < staged_.size()) {
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int rc = SSL_write_ex(ssl_, staged_.data() + staged_sent_, staged_.size() - staged_sent_, &n);
    if (rc != 1) return failure(handshakeDone() ? "write" : "handshake", true);
    staged_sent_ += n;
  }
  staged_.clear();
  staged_sent_ = 0;
  return 0;
}

ssize_t Session::writev(const iovec* iov, int count) {
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
        ssize_t r = failure(handshakeDone() ? "write" : "handshake", true);
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

bool Session::hasBufferedInput() const {
  if (ssl_ == nullptr) return false;
  if (SSL_pending(ssl_) > 0) return true;  // decrypted and not yet taken
  // Read-ahead bytes not yet decrypted: after a read that wanted more they are only part of
  // a record, and the socket tells when the rest arrives (calling this true then would
  // spin the loop until it does).
  // Nor while the session waits to write (a read that must answer first): reading again
  // before the socket takes those bytes gets nowhere.
  return want_ == Want::kNone && SSL_has_pending(ssl_) == 1;
}

void Session::shutdown() {
  if (ssl_ == nullptr || !handshakeDone()) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::string Session::protocol() const {
  return ssl_ != nullptr ? SSL_get_version(ssl_) : "";
}

std::string Session::serverName() const {
  if (ssl_ == nullptr) return {};
  const char* name = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? name : "";
}

std::string Session::alpn() const {
  if (ssl_ == nullptr) return {};
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl_, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

}  // namespace infergate::tls
