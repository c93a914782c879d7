// The credential checks: JWT verification (HS256, RS256, ES256 against JWKS and PEM keys,
// and every claim check), API keys from files and the environment, client certificate
// principals, key file reloads, and the access rules of API groups and routes.

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "codecs/base64.h"
#include "codecs/text.h"
#include "tls/access_policy.h"
#include "tls/authenticator.h"
#include "tls/jwt.h"

namespace infergate::tls {
namespace {

using codecs::strCat;
constexpr int64_t kNow = 1'800'000'000;

std::string b64url(std::string_view bytes) {
  std::string s = codecs::base64Encode(bytes);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return s;
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string bnBytes(EVP_PKEY* key, const char* param) {
  BIGNUM* bn = nullptr;
  EVP_PKEY_get_bn_param(key, param, &bn);
  std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  BN_free(bn);
  return out;
}

// Signs JWTs the way an identity provider does, and writes the matching JWKS.
class Issuer {
 public:
  Issuer()
      : rsa_(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})),
        ec_(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")),
        secret_(40, 's') {}

  std::string jwks() const {
    unsigned char point[65];
    size_t len = 0;
    EVP_PKEY_get_octet_string_param(ec_.get(), OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point), &len);
    std::string_view p(reinterpret_cast<char*>(point), len);
    return strCat(R"({"keys":[{"kty":"RSA","kid":"r1","use":"sig","n":")",
                  b64url(bnBytes(rsa_.get(), OSSL_PKEY_PARAM_RSA_N)), R"(","e":")",
                  b64url(bnBytes(rsa_.get(), OSSL_PKEY_PARAM_RSA_E)),
                  R"("},{"kty":"EC","kid":"e1","crv":"P-256","x":")", b64url(p.substr(1, 32)),
                  R"(","y":")", b64url(p.substr(33, 32)), R"("},{"kty":"oct","kid":"h1","alg":"HS256","k":")",
                  b64url(secret_), R"("}]})");
  }
  std::string rsaPublicPem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(bio, rsa_.get());
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(n));
    BIO_free(bio);
    return pem;
  }

  std::string token(std::string_view alg, std::string_view claims, std::string_view kid = "") const {
    std::string header = strCat(R"({"alg":")", alg, R"(","typ":"JWT")",
                                kid.empty() ? "" : strCat(R"(,"kid":")", kid, "\""), "}");
    std::string signed_part = strCat(b64url(header), ".", b64url(claims));
    return strCat(signed_part, ".", b64url(sign(alg, signed_part)));
  }

 private:
  std::string sign(std::string_view alg, std::string_view data) const {
    if (alg == "HS256") {
      unsigned char mac[32];
      unsigned int n = 0;
      HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &n);
      return std::string(reinterpret_cast<char*>(mac), n);
    }
    EVP_PKEY* key = alg == "RS256" ? rsa_.get() : ec_.get();
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    size_t len = 0;
    EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key);
    EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()), data.size());
    std::string sig(len, '\0');
    EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                   reinterpret_cast<const unsigned char*>(data.data()), data.size());
    EVP_MD_CTX_free(ctx);
    sig.resize(len);
    if (alg == "RS256") return sig;
    // DER ECDSA-Sig-Value -> r || s, 32 bytes each.
    const auto* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(es), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(es);
    return raw;
  }

  Pkey rsa_, ec_;
  std::string secret_;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/infergate-auth-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  // Writes `text` to `name` through a rename, as a secret update does.
  std::string write(std::string_view name, std::string_view text) const {
    std::string path = strCat(path_, "/", name);
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, path);
    return path;
  }

 private:
  std::string path_;
};

class JwtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.keys_file = dir_.write("jwks.json", issuer_.jwks());
    config_.issuer = "https://issuer.example";
    config_.audiences = {"infergate"};
    config_.leeway_s = 30;
    auto v = JwtVerifier::create(config_);
    ASSERT_TRUE(v.ok()) << v.status();
    verifier_ = *v;
  }
  std::string claims(std::string_view extra = "", int64_t exp = kNow + 600) const {
    return strCat(R"({"sub":"alice","iss":"https://issuer.example","aud":"infergate","exp":)", exp,
                  extra, "}");
  }
  std::string refusal(std::string_view token) const {
    auto r = verifier_->verify(token, kNow);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated);
    return std::string(codecs::messageOf(r.status()));
  }

  TempDir dir_;
  Issuer issuer_;
  config::JwtConfig config_;
  std::shared_ptr<const JwtVerifier> verifier_;
};

TEST_F(JwtTest, VerifiesEachAlgorithmAgainstItsJwksKey) {
  EXPECT_EQ(verifier_->keyCount(), 3u);
  for (std::string_view alg : {"HS256", "RS256", "ES256"}) {
    auto r = verifier_->verify(issuer_.token(alg, claims()), kNow);
    ASSERT_TRUE(r.ok()) << alg << ": " << r.status();
    EXPECT_EQ(*r, "alice");
  }
  auto with_kid = verifier_->verify(issuer_.token("RS256", claims(), "r1"), kNow);
  EXPECT_TRUE(with_kid.ok()) << with_kid.status();
  EXPECT_NE(refusal(issuer_.token("RS256", claims(), "e1")).find("no RS256 key with that kid"), std::string::npos);
}

TEST_F(JwtTest, RefusesTamperedTokensAndForeignAlgorithms) {
  std::string token = issuer_.token("RS256", claims());
  // Another subject under the original signature.
  std::string forged = token;
  const size_t dot1 = forged.find('.'), dot2 = forged.rfind('.');
  forged.replace(dot1 + 1, dot2 - dot1 - 1,
                 b64url(R"({"sub":"mallory","iss":"https://issuer.example","aud":"infergate","exp":1800000600})"));
  EXPECT_NE(refusal(forged).find("bad signature"), std::string::npos);
  // alg "none" with no signature, and an unknown alg.
  std::string none = strCat(b64url(R"({"alg":"none"})"), ".", b64url(claims()), ".");
  EXPECT_NE(refusal(none).find("not a JWT"), std::string::npos);
  std::string none_sig = strCat(b64url(R"({"alg":"none"})"), ".", b64url(claims()), ".AA");
  EXPECT_NE(refusal(none_sig).find("alg \"none\" is not accepted"), std::string::npos);
  EXPECT_NE(refusal("a.b").find("not a JWT"), std::string::npos);
  EXPECT_NE(refusal("a.b.c d").find("not a JWT"), std::string::npos);
}

TEST_F(JwtTest, ChecksTheClaims) {
  EXPECT_NE(refusal(issuer_.token("ES256", claims("", kNow - 31))).find("expired"), std::string::npos);
  EXPECT_TRUE(verifier_->verify(issuer_.token("ES256", claims("", kNow - 29)), kNow).ok()) << "within the leeway";
  EXPECT_NE(refusal(issuer_.token("HS256", strCat(R"({"sub":"alice","iss":"https://issuer.example","aud":"infergate"})")))
                .find("no exp"),
            std::string::npos);
  EXPECT_NE(refusal(issuer_.token("HS256", claims(strCat(R"(,"nbf":)", kNow + 100)))).find("nbf"),
            std::string::npos);
  EXPECT_NE(refusal(issuer_.token("HS256", R"({"sub":"alice","iss":"https://other","aud":"infergate","exp":1800000600})"))
                .find("wrong issuer"),
            std::string::npos);
  EXPECT_NE(refusal(issuer_.token("HS256", R"({"sub":"alice","iss":"https://issuer.example","aud":["x","y"],"exp":1800000600})"))
                .find("wrong audience"),
            std::string::npos);
  auto in_list = verifier_->verify(
      issuer_.token("HS256", R"({"sub":"alice","iss":"https://issuer.example","aud":["x","infergate"],"exp":1800000600})"),
      kNow);
  EXPECT_TRUE(in_list.ok()) << in_list.status();
  EXPECT_NE(refusal(issuer_.token("HS256", R"({"iss":"https://issuer.example","aud":"infergate","exp":1800000600})"))
                .find("no \"sub\" claim"),
            std::string::npos);
}

TEST_F(JwtTest, ARememberedTokenStillMeetsTheClockAndTheVerifierThatSawIt) {
  const std::string token = issuer_.token("RS256", claims(R"(,"nbf":1800000100)", kNow + 600));
  // nbf kNow+100 with 30 s of leeway: valid from kNow+70; exp kNow+600: until kNow+630.
  EXPECT_NE(refusal(token).find("not valid yet"), std::string::npos);
  const uint64_t hits = JwtVerifier::cacheHitsOnThisThread();
  auto first = verifier_->verify(token, kNow + 70);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = verifier_->verify(token, kNow + 629);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, "alice");
  EXPECT_EQ(JwtVerifier::cacheHitsOnThisThread(), hits + 1) << "the second check was remembered";
  // Remembered or not, the clock decides: the same refusals as a first check.
  auto late = verifier_->verify(token, kNow + 630);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(codecs::messageOf(late.status()).find("expired"), std::string::npos);
  auto early = verifier_->verify(token, kNow + 69);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(codecs::messageOf(early.status()).find("not valid yet"), std::string::npos);
  // A verifier with other keys (a reload) does not take this thread's memory of the token.
  ASSERT_TRUE(verifier_->verify(token, kNow + 100).ok());
  Issuer other;
  config::JwtConfig rotated = config_;
  rotated.keys_file = dir_.write("rotated.json", other.jwks());
  auto v = JwtVerifier::create(rotated);
  ASSERT_TRUE(v.ok()) << v.status();
  auto foreign = (*v)->verify(token, kNow + 100);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(codecs::messageOf(foreign.status()).find("bad signature"), std::string::npos);
}

TEST_F(JwtTest, APemPublicKeyServesItsOwnAlgorithmOnly) {
  config::JwtConfig pem = config_;
  pem.keys_file = dir_.write("key.pem", issuer_.rsaPublicPem());
  auto v = JwtVerifier::create(pem);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE((*v)->verify(issuer_.token("RS256", claims()), kNow).ok());
  // An HMAC token "signed" with the public key text must not pass (alg confusion).
  auto r = (*v)->verify(issuer_.token("HS256", claims()), kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(codecs::messageOf(r.status()).find("no HS256 key"), std::string::npos);
}

TEST_F(JwtTest, BadKeyFilesNameTheProblem) {
  auto error = [&](std::string_view text) {
    config::JwtConfig c = config_;
    c.keys_file = dir_.write("bad.json", text);
    auto v = JwtVerifier::create(c);
    EXPECT_FALSE(v.ok());
    return v.ok() ? std::string() : std::string(codecs::messageOf(v.status()));
  };
  EXPECT_NE(error("{}").find("needs a \"keys\" array"), std::string::npos);
  EXPECT_NE(error("not json").find("neither a PEM public key nor JSON"), std::string::npos);
  EXPECT_NE(error(R"({"keys":[{"kty":"oct","k":"c2hvcnQ"}]})").find("at least 32 bytes"), std::string::npos);
  EXPECT_NE(error(R"({"keys":[{"kty":"EC","crv":"P-384","x":"a","y":"b"}]})").find("P-256"), std::string::npos);
  EXPECT_NE(error(R"({"keys":[{"kty":"RSA","n":"","e":"AQAB"}]})").find("do not form a key"), std::string::npos);
  std::string missing = error(R"({"keys":[]})");
  EXPECT_EQ(missing.rfind("auth.jwt.keys_file: ", 0), 0u) << missing;
  config::JwtConfig absent = config_;
  absent.keys_file = "/nonexistent/jwks.json";
  auto v = JwtVerifier::create(absent);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(codecs::messageOf(v.status()).find("/nonexistent/jwks.json"), std::string::npos);
}

TEST(LooksLikeJwt, ShapeOnly) {
  EXPECT_TRUE(looksLikeJwt("eyJh.eyJz.c2ln"));
  EXPECT_FALSE(looksLikeJwt("plain-api-key-0123456789"));
  EXPECT_FALSE(looksLikeJwt(".a.b"));
  EXPECT_FALSE(looksLikeJwt("a.b.c.d"));
  EXPECT_FALSE(looksLikeJwt("a.b=.c"));
}

// ---- Authenticator ------------------------------------------------------------------

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("INFERGATE_TEST_WEB_KEY", "web-key-0123456789abcdef", 1);
    config::PrincipalConfig ci{.name = "ci", .api_keys_file = dir_.write("ci.keys", "# CI keys\n\nci-key-0123456789abcdef\n  ci-key-second-0123456789  \n")};
    config::PrincipalConfig web{.name = "web", .api_key_env = "INFERGATE_TEST_WEB_KEY"};
    config::PrincipalConfig ops{.name = "ops", .client_cert = config::ClientCertMatch{.common_name = "ops", .dns = "ops.example.com"}};
    config_.principals = {ci, web, ops};
    config_.jwt = config::JwtConfig{.keys_file = dir_.write("jwks.json", issuer_.jwks())};
  }
  codecs::StatusOr<std::optional<Principal>> auth(std::string_view authorization, std::string_view api_key = "",
                                                  const PeerIdentity* peer = nullptr) {
    auto a = Authenticator::create(config_);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return a.status();
    return (*a)->authenticate(PresentedCredentials{authorization, api_key, peer}, kNow);
  }

  TempDir dir_;
  Issuer issuer_;
  config::AuthConfig config_;
};

TEST_F(AuthenticatorTest, NamesThePrincipalOfEachCredential) {
  auto ci = auth("Bearer ci-key-0123456789abcdef");
  ASSERT_TRUE(ci.ok() && *ci) << ci.status();
  EXPECT_EQ((*ci)->name, "ci");
  EXPECT_EQ((*ci)->method, Principal::Method::kApiKey);
  auto second = auth("bearer   ci-key-second-0123456789");
  ASSERT_TRUE(second.ok() && *second);
  EXPECT_EQ((*second)->name, "ci");
  auto web = auth("Bearer web-key-0123456789abcdef");
  ASSERT_TRUE(web.ok() && *web);
  EXPECT_EQ((*web)->name, "web");

  auto jwt = auth(strCat("Bearer ", issuer_.token("ES256", R"({"sub":"svc-7","exp":1800000600})")));
  ASSERT_TRUE(jwt.ok() && *jwt) << jwt.status();
  EXPECT_EQ((*jwt)->name, "svc-7");
  EXPECT_EQ((*jwt)->method, Principal::Method::kJwt);

  PeerIdentity peer{.subject = "CN=ops", .common_name = "ops", .dns_names = {"x", "ops.example.com"}};
  auto cert = auth("", "", &peer);
  ASSERT_TRUE(cert.ok() && *cert);
  EXPECT_EQ((*cert)->name, "ops");
  EXPECT_EQ((*cert)->method, Principal::Method::kClientCertificate);
  PeerIdentity other{.subject = "CN=ops", .common_name = "ops", .dns_names = {"ops.evil.com"}};
  auto unmatched = auth("", "", &other);
  ASSERT_TRUE(unmatched.ok());
  EXPECT_FALSE(*unmatched) << "every field given must match";

  auto none = auth("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
}

TEST_F(AuthenticatorTest, RefusesWrongCredentialsWithoutEchoingThem) {
  for (std::string_view bad : {"Bearer ci-key-0123456789abcdeX", "Basic Y2k6a2V5", "Bearer"}) {
    auto r = auth(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(codecs::messageOf(r.status()).find("0123456789"), std::string::npos);
  }
  config_.api_key_header = "x-api-key";
  auto header = auth("", "ci-key-0123456789abcdef");
  ASSERT_TRUE(header.ok() && *header);
  EXPECT_EQ((*header)->name, "ci");
  auto wrong = auth("", "nope-nope-nope-nope");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  // A bad token with a good certificate is still refused: the client chose the token.
  PeerIdentity peer{.common_name = "ops", .dns_names = {"ops.example.com"}};
  EXPECT_FALSE(auth("Bearer wrong-wrong-wrong-wrong", "", &peer).ok());
}

TEST_F(AuthenticatorTest, BadKeySourcesAreNamed) {
  auto error = [&](config::PrincipalConfig p) {
    config_.principals = {std::move(p)};
    auto a = Authenticator::create(config_);
    EXPECT_FALSE(a.ok());
    return a.ok() ? std::string() : std::string(codecs::messageOf(a.status()));
  };
  EXPECT_NE(error({.name = "a", .api_keys_file = dir_.write("empty", "# nothing\n")}).find("auth.principals[a].api_keys_file: "), std::string::npos);
  EXPECT_NE(error({.name = "a", .api_keys_file = dir_.write("short", "abc\n")}).find("a key of 3 bytes"), std::string::npos);
  EXPECT_NE(error({.name = "a", .api_key_env = "INFERGATE_TEST_UNSET_VAR"}).find("$INFERGATE_TEST_UNSET_VAR is not set"), std::string::npos);
  EXPECT_NE(error({.name = "a", .api_keys_file = "/nonexistent/keys"}).find("/nonexistent/keys"), std::string::npos);
  config_.principals = {config::PrincipalConfig{.name = "a", .api_key_env = "INFERGATE_TEST_WEB_KEY"},
                        config::PrincipalConfig{.name = "b", .api_key_env = "INFERGATE_TEST_WEB_KEY"}};
  auto shared = Authenticator::create(config_);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(codecs::messageOf(shared.status()).find("is also a key of \"a\""), std::string::npos);
}

TEST_F(AuthenticatorTest, SourceReloadsChangedKeyFilesAndKeepsTheLastGoodOne) {
  auto source = AuthenticatorSource::create(config_);
  ASSERT_TRUE(source.ok()) << source.status();
  auto who = [&](std::string_view key) -> std::string {
    auto r = (*source)->current()->authenticate(PresentedCredentials{key}, kNow);
    return r.ok() && *r ? (*r)->name : "refused";
  };
  bool changed = true;
  ASSERT_TRUE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(who("Bearer ci-key-0123456789abcdef"), "ci");

  dir_.write("ci.keys", "ci-key-rotated-0123456789\n");
  ASSERT_TRUE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(who("Bearer ci-key-0123456789abcdef"), "refused");
  EXPECT_EQ(who("Bearer ci-key-rotated-0123456789"), "ci");

  dir_.write("ci.keys", "short\n");
  EXPECT_FALSE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(who("Bearer ci-key-rotated-0123456789"), "ci") << "the last good keys keep serving";
  ASSERT_TRUE((*source)->reloadIfChanged(&changed).ok());
  EXPECT_FALSE(changed) << "the same bad file is not tried again";
}

TEST(Authenticator, WithoutCredentialsConfiguredNothingPresentedIsLookedAt) {
  auto a = Authenticator::create(config::AuthConfig{});
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE((*a)->configured());
  auto r = (*a)->authenticate(PresentedCredentials{"Bearer meant-for-the-upstream", "x"}, kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
}

TEST(BearerToken, SchemeIsCaseInsensitive) {
  EXPECT_EQ(bearerToken("Bearer abc"), "abc");
  EXPECT_EQ(bearerToken("BEARER  abc "), "abc");
  EXPECT_EQ(bearerToken("Basic abc"), "");
  EXPECT_EQ(bearerToken("Bearer"), "");
}

// ---- access rules -------------------------------------------------------------------

using config::AccessRule;
using config::ApiGroup;

TEST(AccessPolicy, DefaultsRefuseSensitiveGroupsOnPublicListenersOnly) {
  config::AuthConfig none;
  auto check = [&](ApiGroup g, bool write, bool is_public) {
    return authorizeGroup(none, AccessRequest{g, write, Listener::kHttp, is_public}, nullptr).code();
  };
  for (ApiGroup g : {ApiGroup::kSharedMemory, ApiGroup::kTrace, ApiGroup::kLogging}) {
    EXPECT_EQ(check(g, false, true), absl::StatusCode::kPermissionDenied) << config::apiGroupName(g);
    EXPECT_EQ(check(g, true, false), absl::StatusCode::kOk) << config::apiGroupName(g);
  }
  EXPECT_EQ(check(ApiGroup::kModelRepository, true, true), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(check(ApiGroup::kModelRepository, false, true), absl::StatusCode::kOk) << "the index stays readable";
  for (ApiGroup g : {ApiGroup::kHealth, ApiGroup::kMetadata, ApiGroup::kInference, ApiGroup::kModelConfig,
                     ApiGroup::kStatistics}) {
    EXPECT_EQ(check(g, false, true), absl::StatusCode::kOk) << config::apiGroupName(g);
  }
  codecs::Status s = authorizeGroup(none, AccessRequest{ApiGroup::kLogging, true, Listener::kGrpc, true}, nullptr);
  EXPECT_EQ(codecs::messageOf(s),
            "API group 'logging' is not served on a public listener unless auth.api_groups allows it");
}

TEST(AccessPolicy, TheAdminApiIsPrivateByDefaultAndItsRuleIgnoresListeners) {
  config::AuthConfig auth;
  auto check = [&](bool is_public, const Principal* who) {
    return authorizeGroup(auth, AccessRequest{ApiGroup::kAdmin, false, Listener::kMetrics, is_public}, who);
  };
  EXPECT_TRUE(check(false, nullptr).ok());
  codecs::Status refused = check(true, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(codecs::messageOf(refused),
            "API group 'admin' is not served on a public listener unless auth.api_groups allows it");
  // A rule decides wherever the caller is; `listeners` (http / grpc) is not the metrics one.
  Principal ops{"ops"}, web{"web"};
  auth.api_groups[static_cast<size_t>(ApiGroup::kAdmin)] =
      AccessRule{.allow = AccessRule::Allow::kPrincipals, .principals = {"ops"}, .http = false, .grpc = false};
  EXPECT_TRUE(check(true, &ops).ok());
  EXPECT_EQ(check(false, &web).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(codecs::messageOf(check(false, &web)), "principal 'web' may not use API group 'admin'");
  EXPECT_EQ(check(false, nullptr).code(), absl::StatusCode::kUnauthenticated);
}

TEST(AccessPolicy, RulesByPrincipalAndListener) {
  Principal ci{"ci"}, web{"web"};
  AccessRule rule{.allow = AccessRule::Allow::kPrincipals, .principals = {"ci"}, .http = false, .grpc = true};
  EXPECT_TRUE(authorizeRule(rule, "route 'r'", Listener::kGrpc, &ci).ok());
  codecs::Status other = authorizeRule(rule, "route 'r'", Listener::kGrpc, &web);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(codecs::messageOf(other), "principal 'web' may not use route 'r'");
  EXPECT_EQ(authorizeRule(rule, "route 'r'", Listener::kGrpc, nullptr).code(), absl::StatusCode::kUnauthenticated);
  codecs::Status http = authorizeRule(rule, "route 'r'", Listener::kHttp, &ci);
  EXPECT_EQ(codecs::messageOf(http), "route 'r' is not served on the http listener");

  AccessRule anon{.allow = AccessRule::Allow::kPrincipals, .principals = {"anonymous"}};
  EXPECT_TRUE(authorizeRule(anon, "x", Listener::kHttp, nullptr).ok());
  EXPECT_EQ(authorizeRule(anon, "x", Listener::kHttp, &ci).code(), absl::StatusCode::kPermissionDenied);

  AccessRule authenticated{.allow = AccessRule::Allow::kAuthenticated};
  EXPECT_TRUE(authorizeRule(authenticated, "x", Listener::kHttp, &web).ok());
  EXPECT_EQ(authorizeRule(authenticated, "x", Listener::kHttp, nullptr).code(), absl::StatusCode::kUnauthenticated);
  AccessRule deny{.allow = AccessRule::Allow::kNobody};
  EXPECT_EQ(authorizeRule(deny, "x", Listener::kHttp, &ci).code(), absl::StatusCode::kPermissionDenied);

  // A written rule replaces the default, also on a public listener.
  config::AuthConfig auth;
  auth.api_groups[static_cast<size_t>(ApiGroup::kSharedMemory)] = AccessRule{.allow = AccessRule::Allow::kAnyone};
  EXPECT_TRUE(authorizeGroup(auth, AccessRequest{ApiGroup::kSharedMemory, true, Listener::kHttp, true}, nullptr).ok());
}

}  // namespace
}  // namespace infergate::tls
