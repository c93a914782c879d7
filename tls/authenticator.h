#pragma once

// Who is calling: the credential checks of the `auth` section, which the frontends call
// with what a request presents before anything else is done for it.
//
//   Authorization: Bearer <JWT>     verified by the JwtVerifier (auth.jwt); the principal
//                                   is the configured claim
//   Authorization: Bearer <key>     an API key of a principal (api_keys_file / api_key_env)
//   <api_key_header>: <key>         the same, in the header an operator chose
//   the verified client certificate a principal whose client_cert matches it
//
// With no principal and no jwt configured, nothing presented is looked at: every request is
// anonymous and an Authorization header meant for the upstream travels on.
// authenticate() answers the principal, nobody (no credentials: anonymous), or
// UNAUTHENTICATED when credentials were presented and do not verify: a wrong key is
// refused even on a public API group, so a client learns its key is bad. A bearer token
// or key wins over the certificate when both are presented.
//
// API keys are kept as SHA-256 digests in a hash table: a presented key is hashed and
// looked up, so the time taken does not depend on how much of a stored key it shares, and
// the process keeps no key in clear after loading. Keys never appear in a message or log.
//
// AuthenticatorSource holds the current Authenticator; the key and JWKS files are checked
// for changes (reloadIfChanged, from the control thread) and a config reload builds a new
// one (update). A file that does not load keeps the last good Authenticator serving.
//
// Threads: Authenticator is immutable; authenticate() from any thread. The source's
// current() from any thread (an atomic load: every request reads it); update(), install()
// and reloadIfChanged() from one thread at a time.

#include <array>
#include <cstdint>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codecs/published.h"
#include "codecs/status.h"
#include "config/config.h"
#include "tls/jwt.h"
#include "tls/peer_identity.h"
#include "tls/server_context.h"

namespace infergate::tls {

struct Principal {
  enum class Method { kApiKey, kJwt, kClientCertificate };
  std::string name;
  Method method = Method::kApiKey;
};
const char* methodName(Principal::Method method);  // "api_key", "jwt", "client_cert"

// What one request presents (views into its headers / metadata).
struct PresentedCredentials {
  std::string_view authorization;      // the Authorization value; "" = none
  std::string_view api_key;            // the api_key_header's value; "" = none
  const PeerIdentity* peer = nullptr;  // the verified client certificate, when any
};

class Authenticator {
 public:
  // Reads every key file, environment variable and the JWKS file. INVALID_ARGUMENT naming
  // the principal and file ("auth.principals[ci].api_keys_file: /k: no key in the file").
  static codecs::StatusOr<std::shared_ptr<const Authenticator>> create(const config::AuthConfig& config);

  // The principal; nullopt without credentials; UNAUTHENTICATED when they do not verify.
  codecs::StatusOr<std::optional<Principal>> authenticate(const PresentedCredentials& presented,
                                                          int64_t now_s) const;

  const config::AuthConfig& config() const { return config_; }
  // The key and JWKS files read, as they were when read.
  const FileStamps& stamps() const { return stamps_; }
  // Whether any credential is configured; when none is, authenticate() ignores what is
  // presented and answers nobody (an Authorization header meant for the upstream passes).
  bool configured() const { return !keys_.empty() || !certs_.empty() || jwt_ != nullptr; }

 private:
  using Digest = std::array<unsigned char, 32>;
  struct DigestHash {
    size_t operator()(const Digest& d) const;
  };
  explicit Authenticator(config::AuthConfig config) : config_(std::move(config)) {}
  codecs::Status addKey(std::string_view key, const std::string& principal, std::string_view where);
  codecs::StatusOr<std::optional<Principal>> byKey(std::string_view key) const;

  config::AuthConfig config_;
  std::unordered_map<Digest, std::string, DigestHash> keys_;  // SHA-256 of a key -> principal
  std::vector<const config::PrincipalConfig*> certs_;         // principals with client_cert
  std::shared_ptr<const JwtVerifier> jwt_;
  FileStamps stamps_;
};

class AuthenticatorSource {
 public:
  static codecs::StatusOr<std::shared_ptr<AuthenticatorSource>> create(const config::AuthConfig& config);

  std::shared_ptr<const Authenticator> current() const;
  // The current one as this thread last took it (codecs::Published::get): for the check
  // of each request, with no atomic write; valid until this thread's next view().
  const Authenticator& view() const { return *current_.get(); }
  // Builds one from `config` and makes it current; on failure the current one stays.
  codecs::Status update(const config::AuthConfig& config);
  // Makes `next` (built by Authenticator::create) current.
  void install(std::shared_ptr<const Authenticator> next);
  // update() with the current settings when a file changed since it was read (or since
  // the last failed try); `*changed` tells whether a rebuild was tried.
  codecs::Status reloadIfChanged(bool* changed);

 private:
  AuthenticatorSource() = default;
  codecs::Published<Authenticator> current_;  // read per request; never null once created
  FileStamps failed_stamps_;                      // the updating thread's only
};

// The value of a Bearer authorization ("Bearer abc" -> "abc", scheme case-insensitive);
// "" when `authorization` is not a Bearer credential.
std::string_view bearerToken(std::string_view authorization);

}  // namespace infergate::tls
