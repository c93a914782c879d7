#include "tls/authenticator.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "codecs/text.h"
#include "config/text_file.h"

namespace infergate::tls {
namespace {

using codecs::strCat;

constexpr size_t kMaxKeyFileBytes = 4 * 1024 * 1024;
constexpr size_t kMinKeyBytes = 16;  // shorter keys are guessable
constexpr size_t kMaxKeyBytes = 4096;

bool certificateMatches(const config::ClientCertMatch& m, const PeerIdentity& peer) {
  auto contains = [](const std::vector<std::string>& list, const std::string& v) {
    return std::find(list.begin(), list.end(), v) != list.end();
  };
  return (m.subject.empty() || m.subject == peer.subject) &&
         (m.common_name.empty() || m.common_name == peer.common_name) &&
         (m.dns.empty() || contains(peer.dns_names, m.dns)) &&
         (m.uri.empty() || contains(peer.uris, m.uri));
}

}  // namespace

const char* methodName(Principal::Method method) {
  switch (method) {
    case Principal::Method::kApiKey: return "api_key";
    case Principal::Method::kJwt: return "jwt";
    case Principal::Method::kClientCertificate: return "client_cert";
  }
  return "unknown";
}

std::string_view bearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !codecs::equalsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return {};
  }
  return codecs::trimAscii(authorization.substr(kScheme.size()));
}

size_t Authenticator::DigestHash::operator()(const Digest& d) const {
  size_t h;
  std::memcpy(&h, d.data(), sizeof(h));  // a SHA-256 prefix is already uniform
  return h;
}

codecs::Status Authenticator::addKey(std::string_view key, const std::string& principal,
                                     std::string_view where) {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(strCat(where, ": a key of ", key.size(), " bytes; keys are ",
                                             kMinKeyBytes, " to ", kMaxKeyBytes, " bytes"));
  }
  for (char c : key) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return absl::InvalidArgumentError(strCat(where, ": a key has a space or control character"));
    }
  }
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
  auto [it, inserted] = keys_.emplace(digest, principal);
  if (!inserted && it->second != principal) {
    return absl::InvalidArgumentError(
        strCat(where, ": a key of principal \"", principal, "\" is also a key of \"", it->second, "\""));
  }
  return absl::OkStatus();
}

codecs::StatusOr<std::shared_ptr<const Authenticator>> Authenticator::create(const config::AuthConfig& config) {
  std::shared_ptr<Authenticator> self(new Authenticator(config));
  for (const config::PrincipalConfig& p : self->config_.principals) {
    const std::string where = strCat("auth.principals[", p.name, "]");
    if (!p.api_keys_file.empty()) {
      self->stamps_.emplace_back(p.api_keys_file, stampOf(p.api_keys_file));
      codecs::StatusOr<std::string> text = config::readTextFile(p.api_keys_file, kMaxKeyFileBytes);
      if (!text.ok()) {
        return absl::InvalidArgumentError(strCat(where, ".api_keys_file: ", codecs::messageOf(text.status())));
      }
      const std::string file_where = strCat(where, ".api_keys_file: ", p.api_keys_file);
      size_t count = 0;
      for (std::string_view line : codecs::splitOn(*text, '\n')) {
        line = codecs::trimAscii(line);
        if (line.empty() || line.front() == '#') continue;
        INFERGATE_RETURN_IF_ERROR(self->addKey(line, p.name, file_where));
        ++count;
      }
      if (count == 0) return absl::InvalidArgumentError(strCat(file_where, ": no key in the file"));
    }
    if (!p.api_key_env.empty()) {
      const char* value = std::getenv(p.api_key_env.c_str());
      const std::string env_where = strCat(where, ".api_key_env: $", p.api_key_env);
      if (value == nullptr || *value == '\0') {
        return absl::InvalidArgumentError(strCat(env_where, " is not set"));
      }
      INFERGATE_RETURN_IF_ERROR(self->addKey(codecs::trimAscii(value), p.name, env_where));
    }
    if (p.client_cert) self->certs_.push_back(&p);
  }
  if (self->config_.jwt) {
    self->stamps_.emplace_back(self->config_.jwt->keys_file, stampOf(self->config_.jwt->keys_file));
    INFERGATE_ASSIGN_OR_RETURN(self->jwt_, JwtVerifier::create(*self->config_.jwt));
  }
  return std::shared_ptr<const Authenticator>(std::move(self));
}

codecs::StatusOr<std::optional<Principal>> Authenticator::byKey(std::string_view key) const {
  if (key.size() <= kMaxKeyBytes) {
    Digest digest;
    SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
    // The lookup compares digests, never the key itself: how long it takes tells an
    // attacker nothing about how close a guess is to a stored key.
    auto it = keys_.find(digest);
    if (it != keys_.end()) {
      return std::optional<Principal>(Principal{it->second, Principal::Method::kApiKey});
    }
  }
  return absl::UnauthenticatedError("invalid API key");
}

codecs::StatusOr<std::optional<Principal>> Authenticator::authenticate(
    const PresentedCredentials& presented, int64_t now_s) const {
  // Without credentials configured, an Authorization header is the upstream's business
  // (forwarded when forward.headers says so), not the gateway's.
  if (!configured()) return std::optional<Principal>();
  if (!presented.authorization.empty()) {
    std::string_view token = bearerToken(presented.authorization);
    if (token.empty()) {
      return absl::UnauthenticatedError("the Authorization header must be \"Bearer <token>\"");
    }
    if (jwt_ != nullptr && looksLikeJwt(token)) {
      INFERGATE_ASSIGN_OR_RETURN(std::string name, jwt_->verify(token, now_s));
      return std::optional<Principal>(Principal{std::move(name), Principal::Method::kJwt});
    }
    return byKey(token);
  }
  if (!presented.api_key.empty()) return byKey(presented.api_key);
  if (presented.peer != nullptr) {
    for (const config::PrincipalConfig* p : certs_) {
      if (certificateMatches(*p->client_cert, *presented.peer)) {
        return std::optional<Principal>(Principal{p->name, Principal::Method::kClientCertificate});
      }
    }
  }
  return std::optional<Principal>();
}

codecs::StatusOr<std::shared_ptr<AuthenticatorSource>> AuthenticatorSource::create(
    const config::AuthConfig& config) {
  std::shared_ptr<AuthenticatorSource> source(new AuthenticatorSource());
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const Authenticator> first, Authenticator::create(config));
  source->current_.store(std::move(first));
  return source;
}

std::shared_ptr<const Authenticator> AuthenticatorSource::current() const {
  return current_.load();
}

codecs::Status AuthenticatorSource::update(const config::AuthConfig& config) {
  codecs::StatusOr<std::shared_ptr<const Authenticator>> next = Authenticator::create(config);
  if (!next.ok()) return next.status();
  install(std::move(*next));
  return absl::OkStatus();
}

void AuthenticatorSource::install(std::shared_ptr<const Authenticator> next) {
  current_.store(std::move(next));
  failed_stamps_.clear();
}

codecs::Status AuthenticatorSource::reloadIfChanged(bool* changed) {
  *changed = false;
  std::shared_ptr<const Authenticator> now = current();
  FileStamps stamps;
  bool differs = false;
  for (const auto& [path, stamp] : now->stamps()) {
    stamps.emplace_back(path, stampOf(path));
    differs |= !(stamps.back().second == stamp);
  }
  if (!differs || stamps == failed_stamps_) return absl::OkStatus();
  *changed = true;
  codecs::Status status = update(now->config());
  failed_stamps_ = status.ok() ? FileStamps() : std::move(stamps);
  return status;
}

}  // namespace infergate::tls
