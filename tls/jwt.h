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
// Threads: a verifier is immutable once built; verify() from any thread.

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

class JwtVerifier {
 public:
  static codecs::StatusOr<std::shared_ptr<const JwtVerifier>> create(const config::JwtConfig& config);
  ~JwtVerifier();
  JwtVerifier(const JwtVerifier&) = delete;
  JwtVerifier& operator=(const JwtVerifier&) = delete;

  // `now_s`: seconds since the epoch.
  codecs::StatusOr<std::string> verify(std::string_view token, int64_t now_s) const;

  size_t keyCount() const { return keys_.size(); }
  const config::JwtConfig& config() const { return config_; }

 private:
  enum class Alg { kHs256, kRs256, kEs256 };
  struct Key;
  explicit JwtVerifier(config::JwtConfig config);
  codecs::Status loadKeys(std::string_view text);
  bool verifySignature(const Key& key, std::string_view signed_part, std::string_view signature) const;

  config::JwtConfig config_;
  std::vector<std::unique_ptr<Key>> keys_;
};

}  // namespace infergate::tls
