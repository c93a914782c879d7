#include "tls/jwt.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "codecs/base64.h"
#include "codecs/json_value.h"
#include "codecs/text.h"
#include "config/text_file.h"

namespace infergate::tls {
namespace {

using codecs::strCat;

constexpr size_t kMaxKeysFileBytes = 1024 * 1024;
constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr size_t kEs256SignatureBytes = 64;  // r || s, 32 bytes each (RFC 7518 3.4)

codecs::Status unauthenticated(std::string_view what) {
  return absl::UnauthenticatedError(strCat("invalid bearer token: ", what));
}

bool isBase64UrlChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// RFC 7515 base64url without padding; nullopt for any other byte.
std::optional<std::string> base64UrlDecode(std::string_view text) {
  std::string standard(text);
  for (char& c : standard) {
    if (!isBase64UrlChar(c)) return std::nullopt;
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  return codecs::base64Decode(standard);
}

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

// An RSA public key from a JWK's base64url modulus and exponent.
Pkey rsaKey(std::string_view n64, std::string_view e64) {
  std::optional<std::string> n = base64UrlDecode(n64), e = base64UrlDecode(e64);
  if (!n || !e || n->empty() || e->empty()) return nullptr;
  BIGNUM* bn_n = BN_bin2bn(reinterpret_cast<const unsigned char*>(n->data()), static_cast<int>(n->size()), nullptr);
  BIGNUM* bn_e = BN_bin2bn(reinterpret_cast<const unsigned char*>(e->data()), static_cast<int>(e->size()), nullptr);
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  OSSL_PARAM* params = nullptr;
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr);
  if (bn_n && bn_e && bld && ctx && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) &&
      OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) &&
      (params = OSSL_PARAM_BLD_to_param(bld)) != nullptr && EVP_PKEY_fromdata_init(ctx) > 0) {
    EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params);
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  BN_free(bn_n);
  BN_free(bn_e);
  return Pkey(key);
}

// A P-256 public key from a JWK's base64url coordinates.
Pkey p256Key(std::string_view x64, std::string_view y64) {
  std::optional<std::string> x = base64UrlDecode(x64), y = base64UrlDecode(y64);
  if (!x || !y || x->size() != 32 || y->size() != 32) return nullptr;
  std::string point = strCat(std::string_view("\x04", 1), *x, *y);  // uncompressed (SEC 1)
  char group[] = "prime256v1";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      OSSL_PARAM_construct_end()};
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
  if (ctx && EVP_PKEY_fromdata_init(ctx) > 0) EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params);
  EVP_PKEY_CTX_free(ctx);
  return Pkey(key);
}

bool isP256(EVP_PKEY* key) {
  char name[64] = {};
  size_t len = 0;
  return EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof(name), &len) == 1 &&
         (std::string_view(name, len) == "prime256v1" || std::string_view(name, len) == "P-256");
}

const codecs::JsonValue* stringMember(const codecs::JsonValue& object, std::string_view key) {
  const codecs::JsonValue* v = object.find(key);
  return v != nullptr && v->isString() ? v : nullptr;
}

}  // namespace

struct JwtVerifier::Key {
  std::string kid;
  Alg alg;
  Pkey pkey;           // RS256, ES256
  std::string secret;  // HS256
};

bool looksLikeJwt(std::string_view token) {
  size_t dots = 0;
  for (char c : token) {
    if (c == '.') {
      ++dots;
    } else if (!isBase64UrlChar(c)) {
      return false;
    }
  }
  return dots == 2 && token.front() != '.' && token.back() != '.';
}

namespace {

std::atomic<uint64_t> next_verifier_id{1};

// One thread's remembered tokens, for the verifier it saw last.
struct TokenCache {
  struct Entry {
    std::string principal;
    int64_t from_s, until_s;  // valid while from_s <= now < until_s
  };
  uint64_t verifier = 0;
  std::unordered_map<std::string, Entry> tokens;
  uint64_t hits = 0;
};

int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

TokenCache& tokenCache() {
  thread_local TokenCache cache;
  return cache;
}

// A claim's seconds, clamped into int64 (a float "exp" like 1e300 is valid JSON).
int64_t secondsOf(double v) {
  if (!(v > -9.0e18)) return std::numeric_limits<int64_t>::min();
  if (!(v < 9.0e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(std::floor(v));
}

}  // namespace

JwtVerifier::JwtVerifier(config::JwtConfig config)
    : config_(std::move(config)), id_(next_verifier_id.fetch_add(1)) {}

uint64_t JwtVerifier::cacheHitsOnThisThread() { return tokenCache().hits; }

codecs::StatusOr<std::string> JwtVerifier::verify(std::string_view token, int64_t now_s) const {
  TokenCache& cache = tokenCache();
  if (cache.verifier != id_) {
    cache.tokens.clear();
    cache.verifier = id_;
  }
  std::string key(token);
  if (auto hit = cache.tokens.find(key); hit != cache.tokens.end()) {
    if (now_s >= hit->second.from_s && now_s < hit->second.until_s) {
      ++cache.hits;
      return hit->second.principal;
    }
    cache.tokens.erase(hit);  // outside its window now: the full check says why
  }
  INFERGATE_ASSIGN_OR_RETURN(Verified verified, verifyFully(token, now_s));
  // Bounded: past the cap it starts over, and a burst of new tokens costs a full check each.
  if (cache.tokens.size() >= kJwtCacheEntries) cache.tokens.clear();
  cache.tokens.emplace(std::move(key), TokenCache::Entry{verified.principal, verified.valid_from_s,
                                                         verified.valid_until_s});
  return std::move(verified.principal);
}
JwtVerifier::~JwtVerifier() = default;

codecs::StatusOr<std::shared_ptr<const JwtVerifier>> JwtVerifier::create(const config::JwtConfig& config) {
  std::shared_ptr<JwtVerifier> verifier(new JwtVerifier(config));
  codecs::StatusOr<std::string> text = config::readTextFile(config.keys_file, kMaxKeysFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(strCat("auth.jwt.keys_file: ", codecs::messageOf(text.status())));
  }
  codecs::Status status = verifier->loadKeys(*text);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        strCat("auth.jwt.keys_file: ", config.keys_file, ": ", codecs::messageOf(status)));
  }
  return std::shared_ptr<const JwtVerifier>(std::move(verifier));
}

codecs::Status JwtVerifier::loadKeys(std::string_view text) {
  std::string_view trimmed = codecs::trimAscii(text);
  if (trimmed.starts_with("-----BEGIN")) {
    BIO* bio = BIO_new_mem_buf(trimmed.data(), static_cast<int>(trimmed.size()));
    EVP_PKEY* raw = bio ? PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr) : nullptr;
    BIO_free(bio);
    if (raw == nullptr) return absl::InvalidArgumentError("not a PEM public key");
    auto key = std::make_unique<Key>();
    key->pkey.reset(raw);
    if (EVP_PKEY_is_a(raw, "RSA")) {
      key->alg = Alg::kRs256;
    } else if (EVP_PKEY_is_a(raw, "EC") && isP256(raw)) {
      key->alg = Alg::kEs256;
    } else {
      return absl::InvalidArgumentError("the PEM key is neither RSA nor EC P-256");
    }
    keys_.push_back(std::move(key));
    return absl::OkStatus();
  }
  codecs::StatusOr<codecs::JsonValue> doc = codecs::parseJson(trimmed);
  if (!doc.ok()) return absl::InvalidArgumentError("neither a PEM public key nor JSON (a JWKS document)");
  const codecs::JsonValue* list = doc->find("keys");
  if (list == nullptr || !list->isArray()) {
    return absl::InvalidArgumentError("a JWKS document needs a \"keys\" array");
  }
  for (size_t i = 0; i < list->asArray().size(); ++i) {
    const codecs::JsonValue& jwk = list->asArray()[i];
    const codecs::JsonValue* kty = stringMember(jwk, "kty");
    if (kty == nullptr) return absl::InvalidArgumentError(strCat("keys[", i, "] has no \"kty\""));
    if (const codecs::JsonValue* use = stringMember(jwk, "use"); use && use->asString() != "sig") {
      continue;  // an encryption key: not for verifying
    }
    auto key = std::make_unique<Key>();
    if (const codecs::JsonValue* kid = stringMember(jwk, "kid")) key->kid = kid->asString();
    const std::string& type = kty->asString();
    auto member = [&](std::string_view name) -> std::string_view {
      const codecs::JsonValue* v = stringMember(jwk, name);
      return v ? std::string_view(v->asString()) : std::string_view();
    };
    if (type == "RSA") {
      key->alg = Alg::kRs256;
      key->pkey = rsaKey(member("n"), member("e"));
    } else if (type == "EC") {
      if (member("crv") != "P-256") {
        return absl::InvalidArgumentError(strCat("keys[", i, "]: only the P-256 curve is supported (ES256)"));
      }
      key->alg = Alg::kEs256;
      key->pkey = p256Key(member("x"), member("y"));
    } else if (type == "oct") {
      std::optional<std::string> secret = base64UrlDecode(member("k"));
      if (!secret || secret->size() < 32) {
        return absl::InvalidArgumentError(
            strCat("keys[", i, "]: an HS256 secret (\"k\", base64url) of at least 32 bytes is required"));
      }
      key->alg = Alg::kHs256;
      key->secret = std::move(*secret);
    } else {
      return absl::InvalidArgumentError(strCat("keys[", i, "]: unsupported kty \"", type, "\""));
    }
    if (key->alg != Alg::kHs256 && key->pkey == nullptr) {
      return absl::InvalidArgumentError(strCat("keys[", i, "]: the ", type, " key's parameters do not form a key"));
    }
    if (const codecs::JsonValue* alg = stringMember(jwk, "alg")) {
      static constexpr std::string_view kNames[] = {"HS256", "RS256", "ES256"};
      if (alg->asString() != kNames[static_cast<int>(key->alg)]) {
        return absl::InvalidArgumentError(strCat("keys[", i, "]: alg \"", alg->asString(),
                                                 "\" does not fit a ", type, " key (supported: HS256, RS256, ES256)"));
      }
    }
    keys_.push_back(std::move(key));
  }
  if (keys_.empty()) return absl::InvalidArgumentError("no signing key");
  return absl::OkStatus();
}

bool JwtVerifier::verifySignature(const Key& key, std::string_view signed_part,
                                  std::string_view signature) const {
  const auto* data = reinterpret_cast<const unsigned char*>(signed_part.data());
  if (key.alg == Alg::kHs256) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()), data,
             signed_part.size(), mac, &mac_len) == nullptr) {
      return false;
    }
    return signature.size() == mac_len && CRYPTO_memcmp(mac, signature.data(), mac_len) == 0;
  }
  std::string der;
  if (key.alg == Alg::kEs256) {
    // JWS carries r || s; OpenSSL verifies the DER ECDSA-Sig-Value.
    if (signature.size() != kEs256SignatureBytes) return false;
    const auto* raw = reinterpret_cast<const unsigned char*>(signature.data());
    ECDSA_SIG* sig = ECDSA_SIG_new();
    BIGNUM* r = BN_bin2bn(raw, 32, nullptr);
    BIGNUM* s = BN_bin2bn(raw + 32, 32, nullptr);
    if (sig == nullptr || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
      BN_free(r);
      BN_free(s);
      ECDSA_SIG_free(sig);
      return false;
    }
    unsigned char* out = nullptr;
    int len = i2d_ECDSA_SIG(sig, &out);
    ECDSA_SIG_free(sig);
    if (len <= 0) return false;
    der.assign(reinterpret_cast<char*>(out), static_cast<size_t>(len));
    OPENSSL_free(out);
    signature = der;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr &&
            EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key.pkey.get()) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(), data, signed_part.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

codecs::StatusOr<JwtVerifier::Verified> JwtVerifier::verifyFully(std::string_view token,
                                                                 int64_t now_s) const {
  if (token.size() > kMaxTokenBytes || !looksLikeJwt(token)) return unauthenticated("not a JWT");
  const size_t dot1 = token.find('.');
  const size_t dot2 = token.find('.', dot1 + 1);
  std::optional<std::string> header_text = base64UrlDecode(token.substr(0, dot1));
  std::optional<std::string> payload_text = base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  std::optional<std::string> signature = base64UrlDecode(token.substr(dot2 + 1));
  if (!header_text || !payload_text || !signature) return unauthenticated("bad base64url");
  codecs::StatusOr<codecs::JsonValue> header = codecs::parseJson(*header_text);
  if (!header.ok() || !header->isObject()) return unauthenticated("the header is not a JSON object");
  const codecs::JsonValue* alg_name = stringMember(*header, "alg");
  if (alg_name == nullptr) return unauthenticated("no alg");
  Alg alg;
  if (alg_name->asString() == "HS256") {
    alg = Alg::kHs256;
  } else if (alg_name->asString() == "RS256") {
    alg = Alg::kRs256;
  } else if (alg_name->asString() == "ES256") {
    alg = Alg::kEs256;
  } else {
    return unauthenticated(strCat("alg \"", alg_name->asString(), "\" is not accepted (HS256, RS256, ES256)"));
  }
  const codecs::JsonValue* kid = stringMember(*header, "kid");
  const std::string_view signed_part = token.substr(0, dot2);
  bool candidate = false, verified = false;
  for (const auto& key : keys_) {
    if (key->alg != alg || (kid != nullptr && !key->kid.empty() && key->kid != kid->asString())) continue;
    candidate = true;
    if (verifySignature(*key, signed_part, *signature)) {
      verified = true;
      break;
    }
  }
  if (!candidate) return unauthenticated(strCat("no ", alg_name->asString(), " key", kid ? " with that kid" : ""));
  if (!verified) return unauthenticated("bad signature");

  codecs::StatusOr<codecs::JsonValue> claims = codecs::parseJson(*payload_text);
  if (!claims.ok() || !claims->isObject()) return unauthenticated("the claims are not a JSON object");
  const auto leeway = static_cast<int64_t>(config_.leeway_s);
  const codecs::JsonValue* exp = claims->find("exp");
  if (exp == nullptr || !exp->isNumber()) return unauthenticated("no exp claim");
  if (static_cast<double>(now_s - leeway) >= exp->asDouble()) return unauthenticated("expired");
  // The time checks above and below as a window of whole seconds, for the cache: valid
  // while now - leeway < exp, i.e. now < ceil(exp) + leeway, and while now + leeway >= nbf,
  // i.e. now >= ceil(nbf) - leeway.
  Verified result;
  result.valid_until_s = saturatingAdd(secondsOf(std::ceil(exp->asDouble())), leeway);
  result.valid_from_s = std::numeric_limits<int64_t>::min();
  if (const codecs::JsonValue* nbf = claims->find("nbf")) {
    if (!nbf->isNumber()) return unauthenticated("nbf is not a number");
    if (static_cast<double>(now_s + leeway) < nbf->asDouble()) return unauthenticated("not valid yet (nbf)");
    result.valid_from_s = saturatingAdd(secondsOf(std::ceil(nbf->asDouble())), -leeway);
  }
  if (!config_.issuer.empty()) {
    const codecs::JsonValue* iss = stringMember(*claims, "iss");
    if (iss == nullptr || iss->asString() != config_.issuer) return unauthenticated("wrong issuer");
  }
  if (!config_.audiences.empty()) {
    auto accepted = [&](const codecs::JsonValue& v) {
      return v.isString() && std::find(config_.audiences.begin(), config_.audiences.end(),
                                       v.asString()) != config_.audiences.end();
    };
    const codecs::JsonValue* aud = claims->find("aud");
    bool ok = aud != nullptr && (accepted(*aud) || (aud->isArray() && std::any_of(aud->asArray().begin(),
                                                                                  aud->asArray().end(), accepted)));
    if (!ok) return unauthenticated("wrong audience");
  }
  const codecs::JsonValue* principal = stringMember(*claims, config_.principal_claim);
  if (principal == nullptr || principal->asString().empty()) {
    return unauthenticated(strCat("no \"", config_.principal_claim, "\" claim"));
  }
  result.principal = principal->asString();
  return result;
}

}  // namespace infergate::tls
