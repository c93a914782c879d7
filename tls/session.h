#pragma once

// One TLS connection on a non-blocking socket the caller owns and polls, either end:
// read() and writev() behave like the system calls on that socket (the handshake runs
// inside them), so a connection layer keeps its own loop and only swaps the calls.
// ServerSession (server_session.h) is the listeners' end, ClientSession
// (client_session.h) the upstream clients'.
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

#include <cstdint>
#include <string>
#include <vector>

namespace infergate::tls {

class Session {
 public:
  virtual ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

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

  bool handshakeDone() const { return ssl_ != nullptr && SSL_is_init_finished(ssl_) == 1; }
  // What made the connection fail ("handshake: certificate verify failed ...").
  const std::string& error() const { return error_; }
  // The negotiated protocol ("TLSv1.3") and ALPN ("" when none).
  std::string protocol() const;
  std::string alpn() const;
  // The host name the client sent (SNI); "" when none.
  std::string serverName() const;
  // Whether the handshake resumed an earlier session (no certificate exchanged).
  bool resumed() const { return ssl_ != nullptr && SSL_session_reused(ssl_) == 1; }

 protected:
  // Takes `ssl` (null: SSL_new failed; every call then fails with `error_`), set to `fd`.
  Session(SSL* ssl, int fd);

  SSL* ssl_ = nullptr;
  std::string error_;

 private:
  enum class Want { kNone, kRead, kWrite };
  // The result of an SSL_read/SSL_write that failed, as read() or writev() returns it
  // (`writing`: never 0).
  ssize_t failure(const char* during, bool writing);
  ssize_t flushStaged();

  Want want_ = Want::kNone;
  std::vector<uint8_t> staged_;  // gathered small segments, encrypted as one record
  size_t staged_sent_ = 0;       // of staged_, already accepted by SSL_write
};

}  // namespace infergate::tls
