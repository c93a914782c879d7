#pragma once

// One TLS server connection on a non-blocking socket the caller owns and polls: read()
// and writev() behave like the system calls on that socket (the handshake runs inside
// them), so the HTTP connection layer keeps its own loop and only swaps the calls.
//
//   read()    >0 bytes of plaintext; 0 once the peer closed; -1 with errno EAGAIN (poll,
//             see wantsWritable()) or EPROTO/EIO (the connection failed: error())
//   writev()  bytes taken from the segments (>0), or -1 with errno as read()'s. Small
//             segments are gathered into one record (copied into the session's staging
//             buffer, which counts as taken); large ones are encrypted from where they
//             are. hasBufferedOutput() tells that taken bytes still wait for the socket.
//
// Threads: one thread at a time (the connection's loop).

#include <openssl/ssl.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <string>
#include <vector>

#include "tls/peer_identity.h"
#include "tls/server_context.h"

namespace infergate::tls {

class ServerSession {
 public:
  // Takes a reference to `context` for the connection's life; does not own `fd`.
  ServerSession(std::shared_ptr<const ServerContext> context, int fd);
  ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  ssize_t read(void* buffer, size_t size);
  ssize_t writev(const iovec* iov, int count);

  // The last EAGAIN came from TLS needing to write (a handshake message, a key update)
  // while reading, or to read while writing: poll for that instead.
  bool wantsWritable() const { return want_ == Want::kWrite; }
  bool wantsReadable() const { return want_ == Want::kRead; }
  // Bytes wait inside the session (decrypted, or read ahead as whole records): read()
  // gets to them without the socket becoming readable, so the caller must not wait for an
  // event before reading. False while only part of a record is there.
  bool hasBufferedInput() const;
  bool hasBufferedOutput() const { return staged_sent_ < staged_.size(); }
  // Sends close_notify, best effort (one non-blocking try).
  void shutdown();

  bool handshakeDone() const { return SSL_is_init_finished(ssl_) == 1; }
  // The verified client certificate's identity, or null (none sent, or no handshake yet).
  const PeerIdentity* peer();
  // The same certificate as PEM; "" when peer() is null.
  std::string peerPem();
  // What made the connection fail ("handshake: certificate verify failed ...").
  const std::string& error() const { return error_; }
  // The negotiated protocol ("TLSv1.3") and ALPN ("" when none).
  std::string protocol() const;
  std::string alpn() const;

 private:
  enum class Want { kNone, kRead, kWrite };
  // The result of an SSL_read/SSL_write that returned `rc` <= 0, as read() or writev()
  // returns it (`writing`: never 0).
  ssize_t failure(int rc, const char* during, bool writing);
  ssize_t flushStaged();

  std::shared_ptr<const ServerContext> context_;
  SSL* ssl_ = nullptr;
  Want want_ = Want::kNone;
  std::string error_;
  std::vector<uint8_t> staged_;  // gathered small segments, encrypted as one record
  size_t staged_sent_ = 0;       // of staged_, already accepted by SSL_write
  bool peer_read_ = false;
  std::unique_ptr<PeerIdentity> peer_;
};

}  // namespace infergate::tls
