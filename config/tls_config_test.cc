// TLS: `listeners.http.tls`, `listeners.grpc.tls` and `upstreams[].tls`; every key, every
// default, every error with its position, and how relative paths are resolved.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "config/config_loader.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using ClientAuth = ServerTlsConfig::ClientAuth;

constexpr std::string_view kListener = "listeners: { http: { address: \"127.0.0.1:8000\" } }\n";
constexpr std::string_view kUpstream = "upstreams: [{ name: a, protocol: builtin }]\n";
constexpr std::string_view kRoute = "routes: [{ match: { model: \"*\" }, upstream: a }]\n";

// `listeners` from line 1, then a builtin upstream `a` and a route to it.
std::string withListeners(std::string_view listeners) {
  return std::string(listeners) + std::string(kUpstream) + std::string(kRoute);
}

// Line 1 is the listener; `upstreams` from line 2 (it must define `a`), then the route.
std::string withUpstreams(std::string_view upstreams) {
  return std::string(kListener) + std::string(upstreams) + std::string(kRoute);
}

// ---- listeners ------------------------------------------------------------------------

TEST(TlsConfig, ReadsEveryListenerKey) {
  auto r = parse(withListeners(R"(listeners:
  http:
    address: "0.0.0.0:8443"
    tls:
      cert: /etc/tls/server.pem
      key: /etc/tls/server.key
      client_ca: /etc/tls/ca.pem
      client_auth: optional
      min_version: "1.3"
      ciphers: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256"
      ciphersuites: "TLS_AES_128_GCM_SHA256"
      groups: "X25519:P-256"
      watch_interval_ms: 2000
  grpc:
    address: "0.0.0.0:8001"
    tls: { cert: /etc/tls/g.pem, key: /etc/tls/g.key, client_ca: /ca.pem, client_auth: require, watch_interval_ms: 86400000 }
  metrics: { address: "0.0.0.0:8002" }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->http && r->http->tls);
  const ServerTlsConfig& h = *r->http->tls;
  EXPECT_EQ(h.cert, "/etc/tls/server.pem");
  EXPECT_EQ(h.key, "/etc/tls/server.key");
  EXPECT_EQ(h.client_ca, "/etc/tls/ca.pem");
  EXPECT_EQ(h.client_auth, ClientAuth::kOptional);
  EXPECT_EQ(h.min_version, TlsVersion::k13);
  EXPECT_EQ(h.ciphers, "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256");
  EXPECT_EQ(h.ciphersuites, "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(h.groups, "X25519:P-256");
  EXPECT_EQ(h.watch_interval_ms, 2000u);
  EXPECT_EQ(formatLocation(h.where), "test.yaml:5:7");
  EXPECT_EQ(r->http->address.port, 8443);

  ASSERT_TRUE(r->grpc && r->grpc->tls);
  const ServerTlsConfig& g = *r->grpc->tls;
  EXPECT_EQ(g.cert, "/etc/tls/g.pem");
  EXPECT_EQ(g.key, "/etc/tls/g.key");
  EXPECT_EQ(g.client_ca, "/ca.pem");
  EXPECT_EQ(g.client_auth, ClientAuth::kRequire);
  EXPECT_EQ(g.min_version, TlsVersion::k12);
  EXPECT_EQ(g.watch_interval_ms, 86400000u);
  EXPECT_EQ(formatLocation(g.where), "test.yaml:16:10");

  ASSERT_TRUE(r->metrics);
  EXPECT_FALSE(r->metrics->tls);
}

TEST(TlsConfig, ListenerDefaults) {
  auto r = parse(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: s.pem, key: s.key } }
  grpc: { address: "0.0.0.0:8001" }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->http && r->http->tls);
  const ServerTlsConfig& h = *r->http->tls;
  EXPECT_EQ(h.cert, "s.pem");
  EXPECT_EQ(h.key, "s.key");
  EXPECT_EQ(h.client_ca, "");
  EXPECT_EQ(h.client_auth, ClientAuth::kNone);
  EXPECT_EQ(h.min_version, TlsVersion::k12);
  EXPECT_EQ(h.ciphers, "");
  EXPECT_EQ(h.ciphersuites, "");
  EXPECT_EQ(h.groups, "");
  EXPECT_EQ(h.watch_interval_ms, 5000u);
  EXPECT_EQ(formatLocation(h.where), "test.yaml:2:41");
  ASSERT_TRUE(r->grpc);
  EXPECT_FALSE(r->grpc->tls);  // not written: plaintext
}

TEST(TlsConfig, ClientCaWithoutClientAuthIsKeptAndAuthIsNone) {
  auto r = parse(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: s.pem, key: s.key, client_ca: ca.pem, client_auth: none, min_version: "1.2" } }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->http->tls->client_ca, "ca.pem");
  EXPECT_EQ(r->http->tls->client_auth, ClientAuth::kNone);
  EXPECT_EQ(r->http->tls->min_version, TlsVersion::k12);
}

TEST(TlsConfig, ListenerTlsNeedsCertAndKey) {
  expectErrors(withListeners(R"(listeners:
  http:
    address: "0.0.0.0:8443"
    tls: {}
  grpc: { address: "0.0.0.0:8001", tls: { key: k.pem } }
)"),
               {"test.yaml:4:10: listeners.http.tls.cert: missing required key \"cert\" (a PEM "
                "certificate chain file)",
                "test.yaml:4:10: listeners.http.tls.key: missing required key \"key\" (a PEM "
                "private key file)",
                "test.yaml:5:41: listeners.grpc.tls.cert: missing required key \"cert\" (a PEM "
                "certificate chain file)"});
}

TEST(TlsConfig, ListenerTlsMustBeAMappingOfKnownKeys) {
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: true }
  grpc: { address: "0.0.0.0:8001", tls: { cert: c.pem, key: k.pem, ca: ca.pem } }
  metrics: { address: "0.0.0.0:8002", tls: { cert: c.pem, key: k.pem, client_auth: sometimes } }
)"),
               {"test.yaml:2:41: listeners.http.tls: expected a mapping, got a boolean",
                "test.yaml:3:68: listeners.grpc.tls.ca: unknown key \"ca\" (allowed: cert, key, "
                "client_ca, client_auth, min_version, ciphers, ciphersuites, groups, "
                "watch_interval_ms)",
                "test.yaml:4:84: listeners.metrics.tls.client_auth: unknown client_auth \"sometimes\" "
                "(allowed: none, optional, require)"});
}

// The metrics listener (with the admin API) takes the same `tls` as the HTTP listener, and
// still no `public`.
TEST(TlsConfig, TheMetricsListenerTakesTls) {
  auto c = parse(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8000" }
  metrics:
    address: "0.0.0.0:8002"
    tls: { cert: m.pem, key: m.key, client_ca: ops-ca.pem, client_auth: require, min_version: "1.3" }
)"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->metrics && c->metrics->tls);
  EXPECT_EQ(c->metrics->tls->cert, "m.pem");
  EXPECT_EQ(c->metrics->tls->key, "m.key");
  EXPECT_EQ(c->metrics->tls->client_ca, "ops-ca.pem");
  EXPECT_EQ(c->metrics->tls->client_auth, ClientAuth::kRequire);
  EXPECT_EQ(c->metrics->tls->min_version, TlsVersion::k13);
  EXPECT_FALSE(c->http->tls);
  // `public` decides the admin API's default there (auth.api_groups.admin); `server` is gRPC's.
  auto open = parse(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8000" }
  metrics: { address: "0.0.0.0:8002", public: false }
)"));
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_FALSE(open->metrics->isPublic());
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8000" }
  metrics: { address: "0.0.0.0:8002", server: native }
)"),
               {"test.yaml:3:39: listeners.metrics.server: unknown key \"server\" (allowed: address, tls, "
                "public)"});
}

TEST(TlsConfig, EmptyAndNullPathsAreRefused) {
  expectErrors(withListeners(R"(listeners:
  http:
    address: "0.0.0.0:8443"
    tls:
      cert: ""
      key:
      client_ca: ''
)"),
               {"test.yaml:5:13: listeners.http.tls.cert: a path is required",
                "test.yaml:6:7: listeners.http.tls.key: expected a string, got null",
                "test.yaml:7:18: listeners.http.tls.client_ca: a path is required"});
}

TEST(TlsConfig, ClientAuthNeedsClientCa) {
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: c.pem, key: k.pem, client_auth: optional } }
  grpc: { address: "0.0.0.0:8001", tls: { cert: c.pem, key: k.pem, client_auth: require } }
)"),
               {"test.yaml:2:81: listeners.http.tls.client_auth: \"optional\" needs client_ca "
                "(the CA bundle that verifies client certificates)",
                "test.yaml:3:81: listeners.grpc.tls.client_auth: \"require\" needs client_ca "
                "(the CA bundle that verifies client certificates)"});
}

TEST(TlsConfig, AClientCaWrittenButRefusedIsNotAlsoMissing) {
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: c.pem, key: k.pem, client_ca: "", client_auth: require } }
)"),
               {"test.yaml:2:79: listeners.http.tls.client_ca: a path is required"});
}

TEST(TlsConfig, RefusesUnknownChoices) {
  expectErrors(withListeners(R"(listeners:
  http:
    address: "0.0.0.0:8443"
    tls:
      cert: c.pem
      key: k.pem
      client_auth: always
      min_version: "1.1"
)"),
               {"test.yaml:7:20: listeners.http.tls.client_auth: unknown client_auth \"always\" "
                "(allowed: none, optional, require)",
                "test.yaml:8:20: listeners.http.tls.min_version: unknown min_version \"1.1\" "
                "(allowed: 1.2, 1.3)"});
}

TEST(TlsConfig, AnUnquotedVersionIsAFloatAndMustBeQuoted) {
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: c.pem, key: k.pem, min_version: 1.2 } }
)"),
               {"test.yaml:2:81: listeners.http.tls.min_version: expected a string, got a "
                "float: write \"1.2\" (quoted)"});
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: c.pem, key: k.pem, min_version: 1.3 } }
)"),
               {"test.yaml:2:81: listeners.http.tls.min_version: expected a string, got a "
                "float: write \"1.3\" (quoted)"});
  // Any other number is simply not a version.
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: c.pem, key: k.pem, min_version: 1.0 } }
)"),
               {"test.yaml:2:81: listeners.http.tls.min_version: unknown min_version \"1.0\" "
                "(allowed: 1.2, 1.3)"});
}

TEST(TlsConfig, CipherSettingsMustNotBeEmpty) {
  expectErrors(withListeners(R"(listeners:
  http:
    address: "0.0.0.0:8443"
    tls:
      cert: c.pem
      key: k.pem
      ciphers: ""
      ciphersuites: ""
      groups: ""
)"),
               {"test.yaml:7:16: listeners.http.tls.ciphers: leave ciphers out for OpenSSL's "
                "defaults",
                "test.yaml:8:21: listeners.http.tls.ciphersuites: leave ciphersuites out for "
                "OpenSSL's defaults",
                "test.yaml:9:15: listeners.http.tls.groups: leave groups out for OpenSSL's "
                "defaults"});
}

TEST(TlsConfig, WatchIntervalIsBetweenOneSecondAndADay) {
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: c.pem, key: k.pem, watch_interval_ms: 999 } }
  grpc: { address: "0.0.0.0:8001", tls: { cert: c.pem, key: k.pem, watch_interval_ms: 86400001 } }
)"),
               {"test.yaml:2:87: listeners.http.tls.watch_interval_ms: must be between 1000 and "
                "86400000, got 999",
                "test.yaml:3:87: listeners.grpc.tls.watch_interval_ms: must be between 1000 and "
                "86400000, got 86400001"});
}

TEST(TlsConfig, TheGrpcListenerOnGrpcppRefusesVersionCipherAndGroupSettings) {
  expectErrors(withListeners(R"(listeners:
  grpc:
    address: "0.0.0.0:8001"
    server: grpc++
    tls:
      cert: c.pem
      key: k.pem
      min_version: "1.3"
      ciphers: "ECDHE-RSA-AES128-GCM-SHA256"
      ciphersuites: "TLS_AES_128_GCM_SHA256"
      groups: X25519
)"),
               {"test.yaml:8:20: listeners.grpc.tls.min_version: the gRPC listener on server: grpc++ "
                "cannot set min_version (grpc offers no per-server cipher, group or version setting); "
                "remove it, or leave server native",
                "test.yaml:9:16: listeners.grpc.tls.ciphers: the gRPC listener on server: grpc++ cannot "
                "set ciphers (grpc offers no per-server cipher, group or version setting); remove it, "
                "or leave server native",
                "test.yaml:10:21: listeners.grpc.tls.ciphersuites: the gRPC listener on server: grpc++ "
                "cannot set ciphersuites (grpc offers no per-server cipher, group or version setting); "
                "remove it, or leave server native",
                "test.yaml:11:15: listeners.grpc.tls.groups: the gRPC listener on server: grpc++ cannot "
                "set groups (grpc offers no per-server cipher, group or version setting); remove it, "
                "or leave server native"});
}

TEST(TlsConfig, TheNativeGrpcListenerTakesVersionCipherAndGroupSettings) {
  auto r = parse(withListeners(R"(listeners:
  grpc:
    address: "0.0.0.0:8001"
    tls:
      cert: c.pem
      key: k.pem
      min_version: "1.3"
      ciphers: "ECDHE-RSA-AES128-GCM-SHA256"
      ciphersuites: "TLS_AES_128_GCM_SHA256"
      groups: X25519
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->grpc && r->grpc->tls);
  EXPECT_TRUE(r->grpc->native_grpc_server);
  const ServerTlsConfig& tls = *r->grpc->tls;
  EXPECT_EQ(tls.min_version, TlsVersion::k13);
  EXPECT_EQ(tls.ciphers, "ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_EQ(tls.ciphersuites, "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(tls.groups, "X25519");
}

TEST(TlsConfig, TlsMistakesAreReportedWithABadAddress) {
  expectErrors(withListeners(R"(listeners:
  http: { address: "0.0.0.0:70000", tls: { cert: c.pem } }
)"),
               {"test.yaml:2:20: listeners.http.address: port 70000 is out of range (0-65535)",
                "test.yaml:2:42: listeners.http.tls.key: missing required key \"key\" (a PEM "
                "private key file)"});
}

// ---- upstreams ------------------------------------------------------------------------

TEST(TlsConfig, ReadsEveryUpstreamKey) {
  auto r = parse(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["triton.internal:8001"]
    tls:
      ca: /etc/tls/ca.pem
      server_name: triton.internal
      cert: /etc/tls/client.pem
      key: /etc/tls/client.key
      insecure_skip_verify: false
  - name: b
    protocol: http
    endpoints: ["10.0.0.2:8000"]
    tls: { insecure_skip_verify: true, cert: /c.pem, key: /k.pem }
  - name: c
    protocol: http
    endpoints: ["10.0.0.3:8000"]
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->upstreams.size(), 3u);
  ASSERT_TRUE(r->upstreams[0].tls);
  const UpstreamTlsConfig& a = *r->upstreams[0].tls;
  EXPECT_EQ(a.ca, "/etc/tls/ca.pem");
  EXPECT_EQ(a.server_name, "triton.internal");
  EXPECT_EQ(a.cert, "/etc/tls/client.pem");
  EXPECT_EQ(a.key, "/etc/tls/client.key");
  EXPECT_FALSE(a.insecure_skip_verify);
  EXPECT_EQ(formatLocation(a.where), "test.yaml:7:7");

  ASSERT_TRUE(r->upstreams[1].tls);
  const UpstreamTlsConfig& b = *r->upstreams[1].tls;
  EXPECT_TRUE(b.insecure_skip_verify);
  EXPECT_EQ(b.ca, "");
  EXPECT_EQ(b.server_name, "");
  EXPECT_EQ(b.cert, "/c.pem");
  EXPECT_EQ(b.key, "/k.pem");
  EXPECT_EQ(formatLocation(b.where), "test.yaml:15:10");

  EXPECT_FALSE(r->upstreams[2].tls);  // not written: plaintext
}

TEST(TlsConfig, AnEmptyUpstreamTlsMappingKeepsEveryDefault) {
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.2:8001"], tls: {} }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->upstreams[0].tls);
  const UpstreamTlsConfig& t = *r->upstreams[0].tls;
  EXPECT_EQ(t.ca, "");
  EXPECT_EQ(t.server_name, "");
  EXPECT_EQ(t.cert, "");
  EXPECT_EQ(t.key, "");
  EXPECT_FALSE(t.insecure_skip_verify);
  EXPECT_EQ(formatLocation(t.where), "test.yaml:3:67");
}

TEST(TlsConfig, TlsAppliesToRemoteUpstreamsOnly) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: builtin, tls: { ca: ca.pem } }
)"),
               {"test.yaml:3:40: upstreams[0].tls: tls applies to grpc and http upstreams only"});
}

TEST(TlsConfig, UpstreamTlsMustBeAMappingOfKnownKeys) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.2:8001"], tls: on }
  - { name: b, protocol: http, endpoints: ["10.0.0.3:8000"], tls: { client_ca: ca.pem } }
)"),
               {"test.yaml:3:67: upstreams[0].tls: expected a mapping, got a string",
                "test.yaml:4:69: upstreams[1].tls.client_ca: unknown key \"client_ca\" (allowed: "
                "ca, server_name, cert, key, insecure_skip_verify)"});
}

TEST(TlsConfig, ClientCertAndKeyGoTogether) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.2:8001"], tls: { cert: c.pem } }
  - { name: b, protocol: http, endpoints: ["10.0.0.3:8000"], tls: { key: k.pem } }
)"),
               {"test.yaml:3:75: upstreams[0].tls.cert: give cert and key together",
                "test.yaml:4:74: upstreams[1].tls.key: give cert and key together"});
}

TEST(TlsConfig, InsecureSkipVerifyRefusesWhatItWouldIgnore) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["10.0.0.2:8001"]
    tls: { ca: ca.pem, insecure_skip_verify: true }
  - name: b
    protocol: http
    endpoints: ["10.0.0.3:8000"]
    tls: { server_name: triton, insecure_skip_verify: true }
  - name: c
    protocol: http
    endpoints: ["10.0.0.4:8000"]
    tls: { ca: ca.pem, insecure_skip_verify: yes }
)"),
               {"test.yaml:6:46: upstreams[0].tls.insecure_skip_verify: insecure_skip_verify "
                "verifies nothing: leave out ca and server_name, or set it false",
                "test.yaml:10:55: upstreams[1].tls.insecure_skip_verify: insecure_skip_verify "
                "verifies nothing: leave out ca and server_name, or set it false",
                "test.yaml:14:46: upstreams[2].tls.insecure_skip_verify: expected a boolean, got "
                "a string"});
}

TEST(TlsConfig, ServerNameIsNonEmptyWithoutWhitespace) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.2:8001"], tls: { server_name: "" } }
  - { name: b, protocol: grpc, endpoints: ["10.0.0.3:8001"], tls: { server_name: "tri ton" } }
  - { name: c, protocol: grpc, endpoints: ["10.0.0.4:8001"], tls: { server_name: "triton\t" } }
)"),
               {"test.yaml:3:82: upstreams[0].tls.server_name: leave server_name out to use "
                "each endpoint's host",
                "test.yaml:4:82: upstreams[1].tls.server_name: \"tri ton\" has whitespace or a "
                "control character; a server name has none",
                // The tab quoted back escaped (config errors are one printable line each).
                "test.yaml:5:82: upstreams[2].tls.server_name: \"triton\\x09\" has whitespace or "
                "a control character; a server name has none"});
}

TEST(TlsConfig, UpstreamPathsMustNotBeEmpty) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.2:8001"], tls: { ca: "", cert: "", key: k.pem } }
)"),
               {"test.yaml:3:73: upstreams[0].tls.ca: a path is required",
                "test.yaml:3:83: upstreams[0].tls.cert: a path is required"});
}

// ---- paths ----------------------------------------------------------------------------

constexpr std::string_view kTlsPaths = R"(listeners:
  http:
    address: "0.0.0.0:8443"
    tls: { cert: tls/server.pem, key: /secrets/server.key, client_ca: ../ca/ca.pem }
upstreams:
  - name: a
    protocol: grpc
    endpoints: ["10.0.0.2:8001"]
    tls: { ca: tls/upstream-ca.pem, cert: /secrets/client.pem, key: client.key }
routes: [{ match: { model: "*" }, upstream: a }]
)";

TEST(TlsConfig, RelativePathsAreResolvedAgainstTheConfigFilesDirectory) {
  auto r = parseConfig(kTlsPaths, "/etc/infergate/infergate.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  const ServerTlsConfig& s = *r->http->tls;
  EXPECT_EQ(s.cert, "/etc/infergate/tls/server.pem");
  EXPECT_EQ(s.key, "/secrets/server.key");  // absolute: untouched
  EXPECT_EQ(s.client_ca, "/etc/infergate/../ca/ca.pem");
  const UpstreamTlsConfig& u = *r->upstreams[0].tls;
  EXPECT_EQ(u.ca, "/etc/infergate/tls/upstream-ca.pem");
  EXPECT_EQ(u.cert, "/secrets/client.pem");
  EXPECT_EQ(u.key, "/etc/infergate/client.key");
  EXPECT_EQ(s.where.file, "/etc/infergate/infergate.yaml");
}

TEST(TlsConfig, ARelativeConfigPathKeepsItsDirectory) {
  auto r = parseConfig(kTlsPaths, "deploy/gw.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->http->tls->cert, "deploy/tls/server.pem");
  EXPECT_EQ(r->http->tls->key, "/secrets/server.key");
  EXPECT_EQ(r->upstreams[0].tls->key, "deploy/client.key");
}

TEST(TlsConfig, ASourceWithoutADirectoryLeavesPathsAsWritten) {
  auto r = parseConfig(kTlsPaths, "demo.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->http->tls->cert, "tls/server.pem");
  EXPECT_EQ(r->http->tls->client_ca, "../ca/ca.pem");
  EXPECT_EQ(r->upstreams[0].tls->ca, "tls/upstream-ca.pem");
  EXPECT_EQ(r->upstreams[0].tls->key, "client.key");
}

TEST(TlsConfig, ALoadedFileResolvesAgainstItsOwnDirectory) {
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/') dir += '/';
  std::string path = dir + "tls_config_test.yaml";
  {
    std::ofstream f(path);
    f << kTlsPaths;
  }
  auto r = loadConfigFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->http->tls->cert, dir + "tls/server.pem");
  EXPECT_EQ(r->upstreams[0].tls->key, dir + "client.key");
}

TEST(TlsConfig, ErrorsNameTheConfigFileAsGiven) {
  auto r = parseConfig(R"(listeners:
  http: { address: "0.0.0.0:8443", tls: { cert: "", key: k.pem } }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a }]
)",
                       "/etc/infergate/infergate.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(codecs::messageOf(r.status()),
            "/etc/infergate/infergate.yaml:2:49: listeners.http.tls.cert: a path is required");
}

}  // namespace
}  // namespace infergate::config
