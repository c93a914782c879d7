// The security sections: `auth` (principals and their credentials, JWT, the API groups'
// access rules), `rate_limits`, and the access rule a route may carry. Cross-checks that
// need the whole file (principal names a rule uses, a client certificate rule without a
// listener asking for client certificates) are in checkAuth below.

#include <cmath>
#include <set>

#include "codecs/text.h"
#include "config/section_readers.h"

namespace infergate::config {
namespace {

using codecs::strCat;

constexpr uint64_t kMinWatchIntervalMs = 1000;
constexpr uint64_t kMaxLeewaySeconds = 3600;
constexpr double kMaxRequestsPerSecond = 1e9;
constexpr size_t kMaxRateLimits = 256;  // the limiter keys buckets by a one-byte rule index

// A principal name: printable ASCII without spaces (it lands in logs and metrics labels).
std::string principalNameProblem(std::string_view name) {
  if (name.empty()) return "a principal name must not be empty";
  if (name.size() > 128) return "a principal name is at most 128 characters";
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return strCat("\"", name, "\": a principal name has no spaces or control characters");
    }
  }
  if (name == "anonymous") return "\"anonymous\" names requests without credentials; choose another name";
  return "";
}

std::optional<std::string> readNonEmpty(YamlReader& reader, const YamlValue& value,
                                        std::string_view what) {
  std::optional<std::string> text = reader.string(value);
  if (!text) return std::nullopt;
  if (text->empty()) {
    reader.error(value, strCat(what, " must not be empty"));
    return std::nullopt;
  }
  return text;
}

std::optional<ClientCertMatch> readClientCert(YamlReader& reader, const YamlValue& value) {
  std::optional<YamlMap> map = reader.mapping(value, {"subject", "common_name", "dns", "uri"});
  if (!map) return std::nullopt;
  ClientCertMatch match;
  bool any = false;
  for (auto [key, field] : {std::pair{"subject", &match.subject},
                            std::pair{"common_name", &match.common_name},
                            std::pair{"dns", &match.dns}, std::pair{"uri", &match.uri}}) {
    if (const YamlValue* v = map->find(key)) {
      if (auto text = readNonEmpty(reader, *v, key)) {
        *field = std::move(*text);
        any = true;
      }
    }
  }
  if (!any && map->entries.empty()) {
    reader.error(value, "give at least one of subject, common_name, dns, uri");
    return std::nullopt;
  }
  return any ? std::optional<ClientCertMatch>(std::move(match)) : std::nullopt;
}

std::optional<PrincipalConfig> readPrincipal(YamlReader& reader, const YamlValue& value) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"name", "api_keys_file", "api_key_env", "client_cert"});
  if (!map) return std::nullopt;
  PrincipalConfig p;
  p.where = map->where;
  const YamlValue* name = reader.require(*map, "name");
  if (name) {
    if (std::optional<std::string> text = reader.string(*name)) {
      if (std::string problem = principalNameProblem(*text); !problem.empty()) {
        reader.error(*name, problem);
      } else {
        p.name = std::move(*text);
      }
    }
  }
  if (const YamlValue* v = map->find("api_keys_file")) {
    if (auto path = readConfigPath(reader, *v)) p.api_keys_file = std::move(*path);
  }
  if (const YamlValue* v = map->find("api_key_env")) {
    if (auto text = readNonEmpty(reader, *v, "api_key_env")) {
      if (text->find('=') != std::string::npos) {
        reader.error(*v, strCat("\"", *text, "\" is not an environment variable name"));
      } else {
        p.api_key_env = std::move(*text);
      }
    }
  }
  if (const YamlValue* v = map->find("client_cert")) p.client_cert = readClientCert(reader, *v);
  if (!map->find("api_keys_file") && !map->find("api_key_env") && !map->find("client_cert")) {
    reader.error(map->where, value.path,
                 "a principal needs a credential: api_keys_file, api_key_env or client_cert");
  }
  if (p.name.empty()) return std::nullopt;
  return p;
}

std::optional<JwtConfig> readJwt(YamlReader& reader, const YamlValue& value) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"keys_file", "issuer", "audiences", "principal_claim", "leeway_s"});
  if (!map) return std::nullopt;
  JwtConfig jwt;
  jwt.where = map->where;
  if (const YamlValue* v = reader.require(*map, "keys_file", "a JWKS document or a PEM public key")) {
    if (auto path = readConfigPath(reader, *v)) jwt.keys_file = std::move(*path);
  }
  if (const YamlValue* v = map->find("issuer")) {
    if (auto text = readNonEmpty(reader, *v, "issuer")) jwt.issuer = std::move(*text);
  }
  if (const YamlValue* v = map->find("audiences")) {
    if (auto items = reader.sequence(*v)) {
      for (const YamlValue& item : *items) {
        if (auto text = readNonEmpty(reader, item, "an audience")) jwt.audiences.push_back(std::move(*text));
      }
      if (items->empty()) reader.error(*v, "leave audiences out to accept any audience");
    }
  }
  if (const YamlValue* v = map->find("principal_claim")) {
    if (auto text = readNonEmpty(reader, *v, "principal_claim")) jwt.principal_claim = std::move(*text);
  }
  if (const YamlValue* v = map->find("leeway_s")) {
    if (auto n = reader.unsignedInteger(*v, 0, kMaxLeewaySeconds)) jwt.leeway_s = *n;
  }
  return jwt;
}

// `listeners: [http, grpc]` of an access rule; unlike shm's, an empty list is refused.
void readRuleListeners(YamlReader& reader, const YamlValue& value, AccessRule& rule) {
  if (readListenerList(reader, value, rule.http, rule.grpc) == size_t{0}) {
    reader.error(value, "no listener: write allow: deny to refuse the group everywhere");
  }
}

// `allow`: public | authenticated | deny | [principal, ...].
bool readAllow(YamlReader& reader, const YamlValue& value, AccessRule& rule) {
  using Allow = AccessRule::Allow;
  if (value.node.IsSequence()) {
    std::optional<std::vector<YamlValue>> items = reader.sequence(value);
    if (!items) return false;
    if (items->empty()) {
      reader.error(value, "an empty list admits nobody: write deny");
      return false;
    }
    rule.allow = Allow::kPrincipals;
    std::set<std::string> seen;
    for (const YamlValue& item : *items) {
      std::optional<std::string> text = reader.string(item);
      if (!text) continue;
      if (std::string problem = principalNameProblem(*text);
          !problem.empty() && *text != "anonymous") {
        reader.error(item, problem);
      } else if (!seen.insert(*text).second) {
        reader.error(item, strCat("principal \"", *text, "\" is listed twice"));
      } else {
        rule.principals.push_back(std::move(*text));
      }
    }
    return true;
  }
  std::optional<std::string> text = reader.string(value);
  if (!text) return false;
  if (*text == "public") {
    rule.allow = Allow::kAnyone;
  } else if (*text == "authenticated") {
    rule.allow = Allow::kAuthenticated;
  } else if (*text == "deny") {
    rule.allow = Allow::kNobody;
  } else {
    reader.error(value, strCat("unknown access \"", *text,
                               "\" (allowed: public, authenticated, deny, or a list of principals)"));
    return false;
  }
  return true;
}

std::optional<RateLimitConfig> readRateLimit(YamlReader& reader, const YamlValue& value) {
  std::optional<YamlMap> map =
      reader.mapping(value, {"principal", "model", "per", "requests_per_second", "burst"});
  if (!map) return std::nullopt;
  RateLimitConfig limit;
  limit.where = map->where;
  bool ok = true;
  if (const YamlValue* v = map->find("principal")) {
    if (auto text = readNonEmpty(reader, *v, "principal")) limit.principal = std::move(*text);
  }
  if (const YamlValue* v = map->find("model")) {
    if (auto text = readNonEmpty(reader, *v, "model")) limit.model = std::move(*text);
  }
  if (const YamlValue* v = map->find("per")) {
    std::vector<YamlValue> items;
    if (v->node.IsSequence()) {
      if (auto read = reader.sequence(*v)) items = std::move(*read);
    } else {
      items.push_back(*v);
    }
    for (const YamlValue& item : items) {
      std::optional<std::string> text = reader.string(item);
      if (!text) continue;
      if (*text == "principal") {
        limit.per_principal = true;
      } else if (*text == "model") {
        limit.per_model = true;
      } else {
        reader.error(item, strCat("unknown per \"", *text, "\" (allowed: principal, model)"));
      }
    }
  }
  if (const YamlValue* v = reader.require(*map, "requests_per_second", "the bucket's refill rate, e.g. 100")) {
    std::optional<double> rate;
    if (v->node.IsScalar()) {
      std::string_view kind = kindOf(v->node);
      if (kind == "an integer" || kind == "a float") {
        char* end = nullptr;
        double d = std::strtod(v->node.Scalar().c_str(), &end);
        if (end != nullptr && *end == '\0' && std::isfinite(d)) rate = d;
      }
    }
    if (!rate) {
      reader.error(*v, strCat("expected a number, got ", kindOf(v->node)));
      ok = false;
    } else if (*rate <= 0 || *rate > kMaxRequestsPerSecond) {
      reader.error(*v, strCat("must be above 0 and at most 1e9, got ", v->node.Scalar()));
      ok = false;
    } else {
      limit.requests_per_second = *rate;
    }
  } else {
    ok = false;
  }
  if (const YamlValue* v = map->find("burst")) {
    if (auto n = reader.unsignedInteger(*v, 1, 1000000000)) limit.burst = static_cast<uint32_t>(*n);
  }
  if (!ok) return std::nullopt;
  if (limit.burst == 0) {
    limit.burst = static_cast<uint32_t>(std::max(1.0, std::ceil(limit.requests_per_second)));
  }
  return limit;
}

}  // namespace

std::optional<size_t> readListenerList(YamlReader& reader, const YamlValue& value, bool& http, bool& grpc) {
  std::optional<std::vector<YamlValue>> items = reader.sequence(value);
  if (!items) return std::nullopt;
  http = false;
  grpc = false;
  for (const YamlValue& item : *items) {
    std::optional<std::string> text = reader.string(item);
    if (!text) continue;
    bool* flag = *text == "http" ? &http : *text == "grpc" ? &grpc : nullptr;
    if (!flag) {
      reader.error(item, strCat("unknown listener \"", *text, "\" (allowed: http, grpc)"));
    } else if (*flag) {
      reader.error(item, strCat("listener \"", *text, "\" is listed twice"));
    } else {
      *flag = true;
    }
  }
  return items->size();
}

std::optional<AccessRule> readAccessRule(YamlReader& reader, const YamlValue& value, bool listeners_allowed) {
  AccessRule rule;
  rule.where = value.where;
  if (!value.node.IsMap()) {
    if (!readAllow(reader, value, rule)) return std::nullopt;
    return rule;
  }
  std::optional<YamlMap> map = reader.mapping(value, {"allow", "listeners"});
  if (!map) return std::nullopt;
  bool ok = true;
  if (const YamlValue* v = reader.require(*map, "allow", "public, authenticated, deny or a list of principals")) {
    ok = readAllow(reader, *v, rule);
  } else {
    ok = false;
  }
  if (const YamlValue* v = map->find("listeners")) {
    if (listeners_allowed) {
      readRuleListeners(reader, *v, rule);
    } else {
      reader.error(*v, "the admin API is served on the metrics listener only: no listeners here");
    }
  }
  if (!ok) return std::nullopt;
  return rule;
}

void readAuth(YamlReader& reader, const YamlValue& value, AuthConfig& auth) {
  std::optional<YamlMap> map = reader.mapping(
      value, {"principals", "jwt", "api_key_header", "api_groups", "watch_interval_ms"});
  if (!map) return;
  auth.where = map->where;
  if (const YamlValue* v = map->find("principals")) {
    if (auto items = reader.sequence(*v)) {
      std::set<std::string> names;
      for (const YamlValue& item : *items) {
        std::optional<PrincipalConfig> p = readPrincipal(reader, item);
        if (!p) continue;
        if (!names.insert(p->name).second) {
          reader.error(item, strCat("principal \"", p->name, "\" is defined twice"));
          continue;
        }
        auth.principals.push_back(std::move(*p));
      }
    }
  }
  if (const YamlValue* v = map->find("jwt")) auth.jwt = readJwt(reader, *v);
  if (const YamlValue* v = map->find("api_key_header")) {
    if (auto text = readNonEmpty(reader, *v, "api_key_header")) {
      std::string lower = asciiLowercase(*text);
      if (std::string problem = headerNameProblem(*text); !problem.empty()) {
        reader.error(*v, problem);
      } else if (lower == "authorization") {
        reader.error(*v, "Authorization is always read (as \"Bearer <key>\"); name another header");
      } else {
        auth.api_key_header = std::move(lower);
      }
    }
  }
  if (const YamlValue* v = map->find("api_groups")) {
    if (std::optional<YamlMap> groups = reader.anyMapping(*v)) {
      for (const YamlMap::Entry& entry : groups->entries) {
        std::optional<ApiGroup> group = apiGroupNamed(entry.key);
        if (!group) {
          std::string names;
          for (size_t i = 0; i < kApiGroupCount; ++i) {
            names += strCat(i ? ", " : "", apiGroupName(static_cast<ApiGroup>(i)));
          }
          reader.error(entry.key_where, entry.value.path,
                       strCat("unknown API group \"", entry.key, "\" (allowed: ", names, ")"));
          continue;
        }
        auth.api_groups[static_cast<size_t>(*group)] =
            readAccessRule(reader, entry.value, /*listeners_allowed=*/*group != ApiGroup::kAdmin);
      }
    }
  }
  if (const YamlValue* v = map->find("watch_interval_ms")) {
    if (auto n = reader.unsignedInteger(*v, kMinWatchIntervalMs, kMaxTimeoutMs)) auth.watch_interval_ms = *n;
  }
}

void readRateLimits(YamlReader& reader, const YamlValue& value, std::vector<RateLimitConfig>& out) {
  std::optional<std::vector<YamlValue>> items = reader.sequence(value);
  if (!items) return;
  if (items->size() > kMaxRateLimits) {
    reader.error(value, strCat("at most ", kMaxRateLimits, " rate limits, got ", items->size()));
    return;
  }
  for (const YamlValue& item : *items) {
    if (std::optional<RateLimitConfig> limit = readRateLimit(reader, item)) out.push_back(std::move(*limit));
  }
}

void checkAuth(const GatewayConfig& config, ConfigErrors& errors) {
  const AuthConfig& auth = config.auth;
  std::set<std::string_view> names;
  for (const PrincipalConfig& p : auth.principals) names.insert(p.name);
  // With JWT, a rule may name a token's subject, which the file cannot know.
  auto checkNames = [&](const AccessRule& rule, std::string_view path) {
    if (auth.jwt) return;
    for (const std::string& name : rule.principals) {
      if (name != "anonymous" && !names.contains(name)) {
        errors.add(rule.where, std::string(path),
                   strCat("principal \"", name, "\" is not defined in auth.principals"));
      }
    }
  };
  for (size_t i = 0; i < kApiGroupCount; ++i) {
    if (const std::optional<AccessRule>& rule = auth.api_groups[i]) {
      checkNames(*rule, strCat("auth.api_groups.", apiGroupName(static_cast<ApiGroup>(i))));
    }
  }
  for (size_t i = 0; i < config.routes.size(); ++i) {
    if (config.routes[i].auth) checkNames(*config.routes[i].auth, strCat("routes[", i, "].auth"));
  }
  for (size_t i = 0; i < config.rate_limits.size(); ++i) {
    const RateLimitConfig& limit = config.rate_limits[i];
    if (!auth.jwt && !limit.principal.empty() && limit.principal != "anonymous" &&
        !names.contains(limit.principal)) {
      errors.add(limit.where, strCat("rate_limits[", i, "].principal"),
                 strCat("principal \"", limit.principal, "\" is not defined in auth.principals"));
    }
  }
  // A certificate can only name a principal on a listener that asks for one.
  auto asksForCertificates = [](const std::optional<ListenerConfig>& l) {
    return l && l->tls && l->tls->client_auth != ServerTlsConfig::ClientAuth::kNone;
  };
  if (!asksForCertificates(config.http) && !asksForCertificates(config.grpc) &&
      !asksForCertificates(config.metrics)) {
    for (const PrincipalConfig& p : auth.principals) {
      if (p.client_cert) {
        errors.add(p.where, strCat("auth.principals[", p.name, "].client_cert"),
                   "no listener asks for client certificates: set client_auth (optional or "
                   "require) with client_ca on the http, grpc or metrics listener's tls");
      }
    }
  }
}

}  // namespace infergate::config
