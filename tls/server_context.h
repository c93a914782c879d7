#pragma once

// A listener's TLS settings as an OpenSSL SSL_CTX, and the holder that swaps it when the
// certificate files change or a reload brings new settings.
//
//   ServerContext         one SSL_CTX built from a config::ServerTlsConfig: the chain and
//                         key loaded and checked against each other, the client CA, the
//                         protocol floor, ciphers, groups and ALPN. Immutable once built.
//   ServerContextSource   the listener's current ServerContext. Connections take the one
//                         current when they are accepted and keep it: a swap never touches
//                         a connection already open.
//
// Threads: ServerContext is read-only and shared by every connection on every thread.
// ServerContextSource::current() from any thread; update() from one thread at a time.

#include <openssl/ssl.h>

#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::tls {

// A file as it was when read: a change of any field means the file changed (an editor or
// Kubernetes replacing the file through a rename changes the inode).
struct FileStamp {
  unsigned long inode = 0;
  long long size = -1;
  long long mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
// The stamp of `path` now; an unreadable path has size -1.
FileStamp stampOf(const std::string& path);
// The stamps of the files `config` names (cert, key, client_ca when set), with their paths.
using FileStamps = std::vector<std::pair<std::string, FileStamp>>;
FileStamps stampFiles(const config::ServerTlsConfig& config);

// The TLS 1.2 cipher list used when `ciphers` is not set: forward-secret AEAD suites only.
extern const char kDefaultTls12Ciphers[];

class ServerContext {
 public:
  // Builds the context. `alpn`: the protocols offered, most preferred first ("http/1.1");
  // a client offering none of them is served without ALPN. Errors name the key and the
  // file: "tls.cert: /etc/tls/server.pem: no certificate in the file".
  static codecs::StatusOr<std::shared_ptr<const ServerContext>> create(
      const config::ServerTlsConfig& config, std::vector<std::string> alpn);
  ~ServerContext();
  ServerContext(const ServerContext&) = delete;
  ServerContext& operator=(const ServerContext&) = delete;

  SSL_CTX* get() const { return ctx_; }
  const config::ServerTlsConfig& config() const { return config_; }
  // The server certificate's validity end (seconds since the epoch).
  time_t notAfter() const { return not_after_; }
  // Whether any of the files it was built from differs from when it was read.
  bool filesChanged() const;

 private:
  ServerContext() = default;

  SSL_CTX* ctx_ = nullptr;
  config::ServerTlsConfig config_;
  std::vector<std::string> alpn_;  // what the ALPN callback chooses from
  FileStamps stamps_;
  time_t not_after_ = 0;
};

class ServerContextSource {
 public:
  static codecs::StatusOr<std::shared_ptr<ServerContextSource>> create(
      const config::ServerTlsConfig& config, std::vector<std::string> alpn);

  std::shared_ptr<const ServerContext> current() const;
  const std::vector<std::string>& alpn() const { return alpn_; }
  // Builds a context from `config` and makes it current. On failure the current one stays
  // and the error comes back (a bad certificate never stops the listener).
  codecs::Status update(const config::ServerTlsConfig& config);
  // Makes `context` (built by ServerContext::create) current.
  void install(std::shared_ptr<const ServerContext> context);
  // update() with the current settings when the files changed since they were read; OK and
  // nothing done when they did not (or when they are as they were at the last failed try).
  // `*changed` tells whether a rebuild was tried.
  codecs::Status reloadIfChanged(bool* changed);

 private:
  explicit ServerContextSource(std::vector<std::string> alpn) : alpn_(std::move(alpn)) {}

  const std::vector<std::string> alpn_;
  mutable std::mutex mu_;
  std::shared_ptr<const ServerContext> current_;
  FileStamps failed_stamps_;  // reloadIfChanged's caller's thread only
};

// The OpenSSL error queue as text ("error:0A00018E:SSL routines::ca md too weak; ..."),
// emptied; `fallback` when it is empty.
std::string drainErrors(std::string_view fallback);

}  // namespace infergate::tls
