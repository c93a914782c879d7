#pragma once

// JSON Web Tokens (RFC 7519) presented as bearer credentials, verified with OpenSSL:
// HS256 (HMAC-SHA256), RS256 (RSA PKCS#1 v1.5, SHA-256) and ES256 (ECDSA P-256, SHA-256).
//
//   JwtVerifier::create(config)   reads config.keys_file: a JWKS document ("kty" RSA, EC
//                                 with "crv" P-256, or oct) or one PEM public key (RSA or
//                                 P-256). Each key serves one algorithm only: its type
//                                 decides (an RSA key is never used as an HMAC secret).
//   verify(token, now)            the principal (the configured claim), or UNAUTHENTICATED
//                                 naming what was wrong, never echoing the token.
//
// Checked: the header's alg is one of the three (never "none") and matches the key; the
// key is the one named by "kid", else any key of the algorithm; the signature; "exp" is
// present and not past (with the leeway); "nbf" not in the future; "iss" and "aud" when
// configured; the principal claim a non-empty string.
//
// Verified tokens are remembered, per thread, by this verifier (at most
// kJwtCacheEntries each): a client presents the same token on every request until it
// expires, and the signature check (tens of microseconds for RS256 / ES256) is done once.
// A remembered token is still checked against the time (exp, nbf, with the leeway) on
// every use; a new verifier (a reload, a changed keys file) starts with nothing.
//
// Threads: a verifier is immutable once built (its cache is per thread); verify() from any
// thread.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::tls {

// Whether `token` has the shape of a compact JWS (three base64url parts, two dots): such
// a bearer credential is verified as a JWT, anything else is looked up as an API key.
bool looksLikeJwt(std::string_view token);

inline constexpr size_t kJwtCacheEntries = 1024;

class JwtVerifier {
 public:
  static codecs::StatusOr<std::shared_ptr<const JwtVerifier>> create(const config::JwtConfig& config);
  ~JwtVerifier();
  JwtVerifier(const JwtVerifier&) = delete;
  JwtVerifier& operator=(const JwtVerifier&) = delete;

  // `now_s`: seconds since the epoch.
  codecs::StatusOr<std::string> verify(std::string_view token, int64_t now_s) const;
  // How many verify() calls on this thread were answered from the cache (tests).
  static uint64_t cacheHitsOnThisThread();

  size_t keyCount() const { return keys_.size(); }
  const config::JwtConfig& config() const { return config_; }

 private:
  enum class Alg { kHs256, kRs256, kEs256 };
  struct Key;
  // What a token proved, and the window in which it holds (leeway applied).
  struct Verified {
    std::string principal;
    int64_t valid_from_s;   // inclusive
    int64_t valid_until_s;  // exclusive
  };
  codecs::StatusOr<Verified> verifyFully(std::string_view token, int64_t now_s) const;
  explicit JwtVerifier(config::JwtConfig config);
  codecs::Status loadKeys(std::string_view text);
  bool verifySignature(const Key& key, std::string_view signed_part, std::string_view signature) const;

  config::JwtConfig config_;
  std::vector<std::unique_ptr<Key>> keys_;
  const uint64_t id_;  // names this verifier in the per-thread caches
};

}  // namespace infergate::tls
