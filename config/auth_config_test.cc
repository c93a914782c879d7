// Security: `auth` (principals, jwt, api_key_header, api_groups), `routes[].auth`,
// `rate_limits` and `listeners.*.public`; every key, the defaults, and the errors with
// their positions.

#include <gtest/gtest.h>

#include <string>

#include "config/config_loader.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using Allow = AccessRule::Allow;

constexpr std::string_view kHead =
    "listeners: { http: { address: \"127.0.0.1:8000\" } }\n"
    "upstreams: [{ name: a, protocol: builtin }]\n"
    "routes: [{ match: { model: \"*\" }, upstream: a }]\n";

// The listener, upstream and route on lines 1-3, then `tail` from line 4.
std::string withTail(std::string_view tail) { return std::string(kHead) + std::string(tail); }

TEST(AuthConfig, ReadsEveryKey) {
  auto r = parse(R"(listeners:
  http: { address: "127.0.0.1:8000", tls: { cert: c.pem, key: k.pem, client_ca: ca.pem, client_auth: optional } }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a }]
auth:
  principals:
    - { name: ci, api_keys_file: /etc/keys/ci }
    - { name: web, api_key_env: WEB_KEY }
    - name: ops
      client_cert: { subject: "CN=ops,O=Example", common_name: ops, dns: ops.example.com, uri: "spiffe://example/ops" }
  jwt:
    keys_file: jwks.json
    issuer: https://issuer.example
    audiences: [infergate, triton]
    principal_claim: client_id
    leeway_s: 5
  api_key_header: X-API-Key
  api_groups:
    inference: authenticated
    model-repository: { allow: [ops], listeners: [grpc] }
    shared-memory: deny
    health: public
    statistics: [ci, web]
    admin: { allow: [ops] }
  watch_interval_ms: 2000
rate_limits:
  - { per: principal, requests_per_second: 50, burst: 100 }
  - { model: simple, per: [principal, model], requests_per_second: 0.5 }
  - { principal: ci, requests_per_second: 2.5 }
)");
  ASSERT_TRUE(r.ok()) << r.status();
  const AuthConfig& a = r->auth;
  ASSERT_EQ(a.principals.size(), 3u);
  EXPECT_EQ(a.principals[0].name, "ci");
  EXPECT_EQ(a.principals[0].api_keys_file, "/etc/keys/ci");
  EXPECT_EQ(a.principals[1].api_key_env, "WEB_KEY");
  ASSERT_TRUE(a.principals[2].client_cert);
  EXPECT_EQ(a.principals[2].client_cert->subject, "CN=ops,O=Example");
  EXPECT_EQ(a.principals[2].client_cert->common_name, "ops");
  EXPECT_EQ(a.principals[2].client_cert->dns, "ops.example.com");
  EXPECT_EQ(a.principals[2].client_cert->uri, "spiffe://example/ops");
  ASSERT_TRUE(a.jwt);
  EXPECT_EQ(a.jwt->keys_file, "jwks.json");
  EXPECT_EQ(a.jwt->issuer, "https://issuer.example");
  EXPECT_EQ(a.jwt->audiences, (std::vector<std::string>{"infergate", "triton"}));
  EXPECT_EQ(a.jwt->principal_claim, "client_id");
  EXPECT_EQ(a.jwt->leeway_s, 5u);
  EXPECT_EQ(a.api_key_header, "x-api-key");
  EXPECT_EQ(a.watch_interval_ms, 2000u);

  ASSERT_TRUE(a.rule(ApiGroup::kInference));
  EXPECT_EQ(a.rule(ApiGroup::kInference)->allow, Allow::kAuthenticated);
  ASSERT_TRUE(a.rule(ApiGroup::kAdmin));
  EXPECT_EQ(a.rule(ApiGroup::kAdmin)->principals, std::vector<std::string>{"ops"});
  const std::optional<AccessRule>& repo = a.rule(ApiGroup::kModelRepository);
  ASSERT_TRUE(repo);
  EXPECT_EQ(repo->allow, Allow::kPrincipals);
  EXPECT_EQ(repo->principals, std::vector<std::string>{"ops"});
  EXPECT_FALSE(repo->http);
  EXPECT_TRUE(repo->grpc);
  EXPECT_EQ(a.rule(ApiGroup::kSharedMemory)->allow, Allow::kNobody);
  EXPECT_EQ(a.rule(ApiGroup::kHealth)->allow, Allow::kAnyone);
  EXPECT_EQ(a.rule(ApiGroup::kStatistics)->principals, (std::vector<std::string>{"ci", "web"}));
  EXPECT_FALSE(a.rule(ApiGroup::kMetadata)) << "not written: the default applies";

  ASSERT_EQ(r->rate_limits.size(), 3u);
  EXPECT_TRUE(r->rate_limits[0].per_principal);
  EXPECT_FALSE(r->rate_limits[0].per_model);
  EXPECT_EQ(r->rate_limits[0].requests_per_second, 50);
  EXPECT_EQ(r->rate_limits[0].burst, 100u);
  EXPECT_EQ(r->rate_limits[1].model, "simple");
  EXPECT_TRUE(r->rate_limits[1].per_principal && r->rate_limits[1].per_model);
  EXPECT_EQ(r->rate_limits[1].burst, 1u) << "burst defaults to the rate rounded up, at least 1";
  EXPECT_EQ(r->rate_limits[2].principal, "ci");
  EXPECT_EQ(r->rate_limits[2].burst, 3u);
}

TEST(AuthConfig, NoSectionMeansNoPrincipalsAndDefaultRules) {
  auto r = parse(kHead);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->auth.principals.empty());
  EXPECT_FALSE(r->auth.jwt);
  for (size_t i = 0; i < kApiGroupCount; ++i) EXPECT_FALSE(r->auth.api_groups[i]);
  EXPECT_TRUE(r->rate_limits.empty());
  EXPECT_FALSE(r->routes[0].auth);
}

TEST(AuthConfig, RouteAuth) {
  auto r = parse(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: a, protocol: builtin }]
auth: { principals: [{ name: ci, api_key_env: K }] }
routes:
  - { match: { model: secret }, upstream: a, auth: [ci] }
  - { match: { model: "*" }, upstream: a, auth: { allow: authenticated, listeners: [http] } }
)");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->routes[0].auth);
  EXPECT_EQ(r->routes[0].auth->principals, std::vector<std::string>{"ci"});
  ASSERT_TRUE(r->routes[1].auth);
  EXPECT_EQ(r->routes[1].auth->allow, Allow::kAuthenticated);
  EXPECT_TRUE(r->routes[1].auth->http);
  EXPECT_FALSE(r->routes[1].auth->grpc);
}

TEST(AuthConfig, ListenerPublicByAddressUnlessWritten) {
  auto r = parse(R"(listeners:
  http: { address: "0.0.0.0:8000" }
  grpc: { address: "127.0.0.1:8001" }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a }]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->http->isPublic());
  EXPECT_FALSE(r->grpc->isPublic());

  auto w = parse(R"(listeners:
  http: { address: "0.0.0.0:8000", public: false }
  grpc: { address: "127.0.0.1:8001", public: true }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a }]
)");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->http->isPublic());
  EXPECT_TRUE(w->grpc->isPublic());
}

TEST(AuthConfig, PublicByDefaultFollowsTheAddress) {
  auto isPublic = [](ListenAddress::Kind kind, std::string host) {
    ListenAddress a;
    a.kind = kind;
    a.host = std::move(host);
    return ListenerConfig::publicByDefault(a);
  };
  using Kind = ListenAddress::Kind;
  EXPECT_FALSE(isPublic(Kind::kTcp, "127.0.0.1"));
  EXPECT_FALSE(isPublic(Kind::kTcp, "127.10.0.3"));
  EXPECT_FALSE(isPublic(Kind::kTcp, "::1"));
  EXPECT_FALSE(isPublic(Kind::kTcp, "::ffff:127.0.0.1"));
  EXPECT_FALSE(isPublic(Kind::kTcp, "localhost"));
  EXPECT_FALSE(isPublic(Kind::kUnix, ""));
  EXPECT_TRUE(isPublic(Kind::kTcp, "0.0.0.0"));
  EXPECT_TRUE(isPublic(Kind::kTcp, "::"));
  EXPECT_TRUE(isPublic(Kind::kTcp, "10.0.0.7"));
  EXPECT_TRUE(isPublic(Kind::kTcp, "127.example.com")) << "a name, not a loopback literal";
}

TEST(AuthConfig, Errors) {
  expectErrors(withTail(R"(auth:
  principals:
    - { name: ci }
    - { name: "two words", api_key_env: K }
    - { name: anonymous, api_key_env: K }
    - { name: web, api_key_env: "A=B" }
    - { name: web, api_key_env: K2 }
    - { name: ops, client_cert: {} }
  api_key_header: Authorization
  api_groups:
    inference: maybe
    everything: deny
    statistics: []
    trace: { allow: [ci], listeners: [http, http] }
    logging: { listeners: [grpc] }
    admin: { allow: [ci], listeners: [http] }
  watch_interval_ms: 10
)"),
               {
                   "test.yaml:6:7: auth.principals[0]: a principal needs a credential: "
                   "api_keys_file, api_key_env or client_cert",
                   "test.yaml:7:15: auth.principals[1].name: \"two words\": a principal name has "
                   "no spaces or control characters",
                   "test.yaml:8:15: auth.principals[2].name: \"anonymous\" names requests "
                   "without credentials; choose another name",
                   "test.yaml:9:33: auth.principals[3].api_key_env: \"A=B\" is not an "
                   "environment variable name",
                   "test.yaml:10:7: auth.principals[4]: principal \"web\" is defined twice",
                   "test.yaml:11:33: auth.principals[5].client_cert: give at least one of "
                   "subject, common_name, dns, uri",
                   "test.yaml:12:19: auth.api_key_header: Authorization is always read (as "
                   "\"Bearer <key>\"); name another header",
                   "test.yaml:14:16: auth.api_groups.inference: unknown access \"maybe\" "
                   "(allowed: public, authenticated, deny, or a list of principals)",
                   "test.yaml:15:5: auth.api_groups.everything: unknown API group "
                   "\"everything\" (allowed: health, metadata, inference, shared-memory, "
                   "model-config, model-repository, statistics, trace, logging, admin)",
                   "test.yaml:16:17: auth.api_groups.statistics: an empty list admits nobody: "
                   "write deny",
                   "test.yaml:17:45: auth.api_groups.trace.listeners[1]: listener \"http\" is "
                   "listed twice",
                   "test.yaml:18:14: auth.api_groups.logging.allow: missing required key \"allow\" "
                   "(public, authenticated, deny or a list of principals)",
                   "test.yaml:19:38: auth.api_groups.admin.listeners: the admin API is served "
                   "on the metrics listener only: no listeners here",
                   "test.yaml:20:22: auth.watch_interval_ms: must be between 1000 and "
                   "86400000, got 10",
               });
}

TEST(AuthConfig, RulesMustNameDefinedPrincipalsWithoutJwt) {
  expectErrors(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a, auth: [nobody, anonymous] }]
auth:
  principals: [{ name: ci, api_key_env: K }]
  api_groups: { inference: [ci, ghost] }
rate_limits: [{ principal: phantom, requests_per_second: 1 }]
)",
               {
                   "test.yaml:3:54: routes[0].auth: principal \"nobody\" is not defined in "
                   "auth.principals",
                   "test.yaml:6:28: auth.api_groups.inference: principal \"ghost\" is not "
                   "defined in auth.principals",
                   "test.yaml:7:15: rate_limits[0].principal: principal \"phantom\" is not "
                   "defined in auth.principals",
               });
  // With JWT the names may be token subjects.
  auto r = parse(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a, auth: [nobody] }]
auth: { jwt: { keys_file: /k.json }, api_groups: { inference: [ghost] } }
)");
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(AuthConfig, ClientCertPrincipalNeedsAListenerAskingForCertificates) {
  expectOnlyError(withTail(R"(auth:
  principals: [{ name: ops, client_cert: { common_name: ops } }]
)"),
                  "test.yaml:5:16: auth.principals[ops].client_cert: ",
                  "no listener asks for client certificates");
}

TEST(AuthConfig, RateLimitErrors) {
  expectErrors(withTail(R"(rate_limits:
  - { per: tenant, requests_per_second: 1 }
  - { requests_per_second: 0 }
  - { requests_per_second: fast }
  - { burst: 3 }
  - { requests_per_second: 1, burst: 0 }
)"),
               {
                   "test.yaml:5:12: rate_limits[0].per: unknown per \"tenant\" (allowed: "
                   "principal, model)",
                   "test.yaml:6:28: rate_limits[1].requests_per_second: must be above 0 and "
                   "at most 1e9, got 0",
                   "test.yaml:7:28: rate_limits[2].requests_per_second: expected a number, "
                   "got a string",
                   "test.yaml:8:5: rate_limits[3].requests_per_second: missing required key "
                   "\"requests_per_second\" (the bucket's refill rate, e.g. 100)",
                   "test.yaml:9:38: rate_limits[4].burst: must be between 1 and 1000000000, "
                   "got 0",
               });
}

TEST(AuthConfig, JwtErrors) {
  expectErrors(withTail(R"(auth:
  jwt: { issuer: "", audiences: [], leeway_s: 7200 }
)"),
               {
                   "test.yaml:5:8: auth.jwt.keys_file: missing required key \"keys_file\" (a JWKS "
                   "document or a PEM public key)",
                   "test.yaml:5:18: auth.jwt.issuer: issuer must not be empty",
                   "test.yaml:5:33: auth.jwt.audiences: leave audiences out to accept any "
                   "audience",
                   "test.yaml:5:47: auth.jwt.leeway_s: must be between 0 and 3600, got 7200",
               });
}

}  // namespace
}  // namespace infergate::config
