// The routing schema: remote upstreams, route matches, splits, rewrites, mirrors,
// forward and readiness; every key read and every error it can give, with its position.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config_loader.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using Model = RouteMatch::Model;
using Protocol = UpstreamConfig::Protocol;

// Line 1 of every file below; what the test is about starts on line 2.
std::string file(std::string_view rest) {
  return "listeners: { http: { address: \"127.0.0.1:8000\" } }\n" + std::string(rest);
}

// A file whose upstreams section is `upstreams` (from line 2) and whose one route sends
// everything to the first upstream, named `a`.
std::string withUpstreams(std::string_view upstreams) {
  return file(upstreams) + "routes: [{ match: { model: \"*\" }, upstream: a }]\n";
}

// Upstreams a, b and c (line 2), then `routes` from line 3.
std::string withRoutes(std::string_view routes) {
  return file(
      "upstreams: [{ name: a, protocol: builtin }, { name: b, protocol: builtin }, { name: c, "
      "protocol: builtin }]\n" +
      std::string(routes));
}

// ---- upstreams ------------------------------------------------------------------------

TEST(RoutingConfig, ReadsEveryKeyOfRemoteUpstreams) {
  auto r = parse(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["127.0.0.1:9001", "[::1]:9001", "unix:/run/triton.sock", "triton.local:8001"]
    timeout_ms: 30000
    connect_timeout_ms: 1500
    channels: 4
    headers: { Authorization: "Bearer x", x-tenant: beta }
  - name: b
    protocol: http
    endpoints: ["10.0.0.2:8000"]
    http_format: json
    max_connections: 128
    timeout_ms: 0
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->upstreams.size(), 2u);
  const UpstreamConfig& a = r->upstreams[0];
  EXPECT_EQ(a.protocol, Protocol::kGrpc);
  EXPECT_TRUE(a.isRemote());
  ASSERT_EQ(a.endpoints.size(), 4u);
  EXPECT_EQ(a.endpoints[0].kind, ListenAddress::Kind::kTcp);
  EXPECT_EQ(a.endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(a.endpoints[0].port, 9001);
  EXPECT_EQ(formatLocation(a.endpoints[0].where), "test.yaml:5:17");
  EXPECT_EQ(a.endpoints[1].host, "::1");
  EXPECT_EQ(a.endpoints[1].text, "[::1]:9001");
  EXPECT_EQ(formatLocation(a.endpoints[1].where), "test.yaml:5:35");
  EXPECT_EQ(a.endpoints[2].kind, ListenAddress::Kind::kUnix);
  EXPECT_EQ(a.endpoints[2].path, "/run/triton.sock");
  EXPECT_EQ(a.endpoints[3].host, "triton.local");
  EXPECT_EQ(a.timeout_ms, 30000u);
  EXPECT_EQ(a.connect_timeout_ms, 1500u);
  EXPECT_EQ(a.channels, 4u);
  ASSERT_EQ(a.headers.size(), 2u);
  EXPECT_EQ(a.headers[0].name, "authorization");  // stored lowercase
  EXPECT_EQ(a.headers[0].value, "Bearer x");
  EXPECT_EQ(formatLocation(a.headers[0].where), "test.yaml:9:16");
  EXPECT_EQ(a.headers[1].name, "x-tenant");
  EXPECT_EQ(a.headers[1].value, "beta");
  const UpstreamConfig& b = r->upstreams[1];
  EXPECT_EQ(b.protocol, Protocol::kHttp);
  ASSERT_EQ(b.endpoints.size(), 1u);
  EXPECT_EQ(b.endpoints[0].port, 8000);
  EXPECT_EQ(b.http_format, UpstreamConfig::HttpFormat::kJson);
  EXPECT_EQ(b.max_connections, 128u);
  EXPECT_EQ(b.timeout_ms, 0u);
  EXPECT_EQ(r->findUpstream("b"), &b);
  EXPECT_EQ(r->findUpstream("c"), nullptr);
}

TEST(RoutingConfig, RemoteUpstreamKeysHaveDefaults) {
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: http, endpoints: ["10.0.0.2:8000"] }
  - { name: b, protocol: grpc, endpoints: ["10.0.0.3:8001"] }
  - { name: c, protocol: builtin, timeout_ms: 250 }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  const UpstreamConfig& http = r->upstreams[0];
  EXPECT_EQ(http.http_format, UpstreamConfig::HttpFormat::kBinary);
  EXPECT_EQ(http.timeout_ms, 0u);
  EXPECT_EQ(http.connect_timeout_ms, 5000u);
  EXPECT_EQ(http.max_connections, 64u);
  EXPECT_TRUE(http.headers.empty());
  EXPECT_EQ(r->upstreams[1].channels, 2u);
  EXPECT_EQ(r->upstreams[1].connect_timeout_ms, 5000u);
  EXPECT_FALSE(r->upstreams[2].isRemote());
  EXPECT_EQ(r->upstreams[2].timeout_ms, 250u);  // timeout_ms applies to builtin too
}

TEST(RoutingConfig, RemoteUpstreamsNeedEndpoints) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc }
  - { name: b, protocol: http, endpoints: [] }
)"),
               {"test.yaml:3:5: upstreams[0].endpoints: missing required key \"endpoints\" "
                "(e.g. endpoints: [\"127.0.0.1:8001\"])",
                "test.yaml:4:43: upstreams[1].endpoints: at least one endpoint is required"});
}

TEST(RoutingConfig, RejectsBadEndpoints) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["127.0.0.1", "127.0.0.1:0", "h:1", "h:1", "unix:", { host: h }]
)"),
               {"test.yaml:5:17: upstreams[0].endpoints[0]: missing port in \"127.0.0.1\" "
                "(expected host:port, e.g. 0.0.0.0:8000)",
                "test.yaml:5:30: upstreams[0].endpoints[1]: endpoint \"127.0.0.1:0\" needs a port "
                "(0 is for listeners)",
                "test.yaml:5:52: upstreams[0].endpoints[3]: endpoint \"h:1\" is listed twice "
                "(also at line 5)",
                "test.yaml:5:59: upstreams[0].endpoints[4]: unix socket path is empty in \"unix:\"",
                "test.yaml:5:68: upstreams[0].endpoints[5]: expected a string, got a mapping"});
}

TEST(RoutingConfig, RejectsKeysOfAnotherProtocol) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: builtin
    endpoints: ["h:1"]
    connect_timeout_ms: 10
    headers: { x: y }
  - name: g
    protocol: grpc
    endpoints: ["h:1"]
    http_format: json
    max_connections: 5
    models: [simple]
  - name: h
    protocol: http
    endpoints: ["h:1"]
    channels: 3
)"),
               {"test.yaml:5:16: upstreams[0].endpoints: endpoints applies to grpc and http "
                "upstreams only",
                "test.yaml:6:25: upstreams[0].connect_timeout_ms: connect_timeout_ms applies to "
                "grpc and http upstreams only",
                "test.yaml:7:14: upstreams[0].headers: headers applies to grpc and http "
                "upstreams only",
                "test.yaml:11:18: upstreams[1].http_format: http_format applies to http "
                "upstreams only",
                "test.yaml:12:22: upstreams[1].max_connections: max_connections applies to http "
                "upstreams only",
                "test.yaml:13:13: upstreams[1].models: models applies to builtin upstreams only",
                "test.yaml:17:15: upstreams[2].channels: channels applies to grpc upstreams only"});
}

TEST(RoutingConfig, AnUnknownProtocolStillChecksTheOtherKeys) {
  // The protocol is an error already; its keys are read for their own mistakes only.
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: tcp, endpoints: ["h"], channels: 3 }
)"),
               {"test.yaml:3:26: upstreams[0].protocol: unknown protocol \"tcp\" (allowed: "
                "builtin, grpc, http)",
                "test.yaml:3:43: upstreams[0].endpoints[0]: missing port in \"h\" (expected "
                "host:port, e.g. 0.0.0.0:8000)"});
}

TEST(RoutingConfig, RejectsOutOfRangeUpstreamNumbers) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    channels: 65
    connect_timeout_ms: 0
    timeout_ms: 86400001
  - name: b
    protocol: http
    endpoints: ["h:1"]
    max_connections: 100001
    http_format: protobuf
)"),
               {"test.yaml:6:15: upstreams[0].channels: must be between 1 and 64, got 65",
                "test.yaml:7:25: upstreams[0].connect_timeout_ms: must be between 1 and "
                "86400000, got 0",
                "test.yaml:8:17: upstreams[0].timeout_ms: must be between 0 and 86400000, got "
                "86400001",
                "test.yaml:12:22: upstreams[1].max_connections: must be between 1 and 100000, "
                "got 100001",
                "test.yaml:13:18: upstreams[1].http_format: unknown http_format \"protobuf\" "
                "(allowed: binary, json)"});
}

TEST(RoutingConfig, RejectsUpstreamHeadersThatCannotBeSent) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: http
    endpoints: ["h:1"]
    headers:
      "bad name": x
      Content-Length: "5"
      X-Key: a
      x-key: b
      x-line: "a\nb"
      x-space: " padded"
      x-map: { a: b }
  - name: g
    protocol: grpc
    endpoints: ["h:1"]
    headers: { grpc-timeout: 1S, "x!": y, x-ok: "caf\u00e9", X-Upper: fine }
)"),
               {"test.yaml:7:7: upstreams[0].headers.bad name: \"bad name\" is not an HTTP "
                "header name (letters, digits and !#$%&'*+-.^_`|~)",
                "test.yaml:8:7: upstreams[0].headers.Content-Length: header \"Content-Length\" "
                "is written by the gateway itself and cannot be set",
                "test.yaml:10:7: upstreams[0].headers.x-key: header \"x-key\" is given twice "
                "(also at line 9)",
                "test.yaml:11:15: upstreams[0].headers.x-line: header value of \"x-line\" has a "
                "control character",
                "test.yaml:12:16: upstreams[0].headers.x-space: header value of \"x-space\" "
                "starts or ends with whitespace",
                "test.yaml:13:14: upstreams[0].headers.x-map: expected a string, got a mapping",
                "test.yaml:17:16: upstreams[1].headers.grpc-timeout: metadata key "
                "\"grpc-timeout\" is reserved by gRPC",
                "test.yaml:17:34: upstreams[1].headers.x!: \"x!\" is not a gRPC metadata key "
                "(letters, digits, '-', '_', '.')",
                "test.yaml:17:49: upstreams[1].headers.x-ok: metadata value of \"x-ok\" has a "
                "control character or a non-ASCII one"});
}

TEST(RoutingConfig, UpstreamHeadersMustBeAMapping) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: http, endpoints: ["h:1"], headers: [authorization] }
)"),
               {"test.yaml:3:61: upstreams[0].headers: expected a mapping, got a sequence"});
}

// ---- routes: match --------------------------------------------------------------------

TEST(RoutingConfig, ReadsEveryKindOfMatch) {
  auto r = parse(withRoutes(R"(routes:
  - match: { model: resnet50 }
    upstream: a
  - match: { model_prefix: "llm-", version: "2", headers: { X-Tenant: beta } }
    upstream: b
  - match: { model: bert, version: 3 }
    upstream: b
  - match: { model: "*" }
    upstream: c
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->routes.size(), 4u);
  EXPECT_EQ(r->routes[0].match.kind, Model::kExact);
  EXPECT_EQ(r->routes[0].match.model, "resnet50");
  EXPECT_EQ(r->routes[0].match.version, "");
  EXPECT_TRUE(r->routes[0].match.headers.empty());
  const RouteMatch& llm = r->routes[1].match;
  EXPECT_EQ(llm.kind, Model::kPrefix);
  EXPECT_EQ(llm.model, "llm-");
  EXPECT_EQ(llm.version, "2");
  ASSERT_EQ(llm.headers.size(), 1u);
  EXPECT_EQ(llm.headers[0].name, "x-tenant");
  EXPECT_EQ(llm.headers[0].value, "beta");
  EXPECT_EQ(formatLocation(llm.headers[0].where), "test.yaml:6:61");
  EXPECT_EQ(r->routes[2].match.version, "3");  // an integer is read as written
  EXPECT_EQ(r->routes[3].match.kind, Model::kAny);
  EXPECT_EQ(r->routes[3].match.model, "");
}

TEST(RoutingConfig, MatchNeedsExactlyOneOfModelAndModelPrefix) {
  expectErrors(withRoutes(R"(routes:
  - match: { model: m, model_prefix: m }
    upstream: a
  - match: { version: "1" }
    upstream: a
)"),
               {"test.yaml:4:38: routes[0].match.model_prefix: give model or model_prefix, not "
                "both",
                "test.yaml:6:12: routes[1].match.model: missing required key \"model\" (an exact "
                "model name, \"*\" for any, or model_prefix)"});
}

TEST(RoutingConfig, RejectsEmptyModelsPrefixesAndVersions) {
  expectErrors(withRoutes(R"(routes:
  - { match: { model: "" }, upstream: a }
  - { match: { model_prefix: "" }, upstream: a }
  - { match: { model_prefix: "llm-*" }, upstream: a }
  - { match: { model: m, version: "" }, upstream: a }
  - { match: { model: n, version: "*" }, upstream: a }
)"),
               {"test.yaml:4:23: routes[0].match.model: a model name must not be empty (\"*\" "
                "matches any model)",
                "test.yaml:5:30: routes[1].match.model_prefix: a model prefix must not be empty "
                "(for any model write model: \"*\")",
                "test.yaml:6:30: routes[2].match.model_prefix: \"llm-*\": a prefix is matched as "
                "written, with no '*'",
                "test.yaml:7:35: routes[3].match.version: leave version out to match any version",
                "test.yaml:8:35: routes[4].match.version: leave version out to match any "
                "version"});
}

TEST(RoutingConfig, RejectsBadMatchHeaders) {
  expectErrors(withRoutes(R"(routes:
  - match:
      model: m
      headers: { "x tenant": a, X-Tier: gold, x-tier: silver, x-nl: "a\rb", x-map: [] }
    upstream: a
  - match: { model: n, headers: x-tenant }
    upstream: a
  - match: { model: "*", weights: 3 }
    upstream: a
)"),
               {"test.yaml:6:18: routes[0].match.headers.x tenant: \"x tenant\" is not an HTTP "
                "header name (letters, digits and !#$%&'*+-.^_`|~)",
                "test.yaml:6:47: routes[0].match.headers.x-tier: header \"x-tier\" is given twice "
                "(also at line 6)",
                "test.yaml:6:69: routes[0].match.headers.x-nl: header value of \"x-nl\" has a "
                "control character",
                "test.yaml:6:84: routes[0].match.headers.x-map: expected a string, got a sequence",
                "test.yaml:8:33: routes[1].match.headers: expected a mapping, got a string",
                "test.yaml:10:26: routes[2].match.weights: unknown key \"weights\" (allowed: "
                "model, model_prefix, version, headers)"});
}

// ---- routes: targets ------------------------------------------------------------------

TEST(RoutingConfig, ReadsSplitsRewritesTimeoutsAndMirrors) {
  auto r = parse(withRoutes(R"(routes:
  - match: { model_prefix: "llm-" }
    split: [ { upstream: a, weight: 90 }, { upstream: b, weight: 10 } ]
    rewrite: { model: llm-v2, version: "1" }
    timeout_ms: 5000
    mirror: c
  - match: { model: "*" }
    upstream: a
    rewrite: { version: 7 }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  const RouteConfig& llm = r->routes[0];
  ASSERT_EQ(llm.targets.size(), 2u);
  EXPECT_EQ(llm.targets[0].upstream, "a");
  EXPECT_EQ(llm.targets[0].weight, 90u);
  EXPECT_EQ(formatLocation(llm.targets[0].where), "test.yaml:5:26");
  EXPECT_EQ(llm.targets[1].upstream, "b");
  EXPECT_EQ(llm.targets[1].weight, 10u);
  EXPECT_EQ(llm.rewrite_model, "llm-v2");
  EXPECT_EQ(llm.rewrite_version, "1");
  EXPECT_EQ(llm.timeout_ms, 5000u);
  EXPECT_EQ(llm.mirror, "c");
  const RouteConfig& rest = r->routes[1];
  EXPECT_EQ(rest.rewrite_model, "");
  EXPECT_EQ(rest.rewrite_version, "7");
  EXPECT_EQ(rest.timeout_ms, 0u);
  EXPECT_EQ(rest.mirror, "");
}

TEST(RoutingConfig, ARouteNeedsExactlyOneOfUpstreamAndSplit) {
  expectErrors(withRoutes(R"(routes:
  - match: { model: m }
    upstream: a
    split: [ { upstream: a, weight: 50 }, { upstream: b, weight: 50 } ]
  - match: { model: "*" }
)"),
               {"test.yaml:6:12: routes[0].split: give upstream or split, not both",
                "test.yaml:7:5: routes[1].upstream: missing required key \"upstream\" (or "
                "split: [{ upstream: a, weight: 90 }, ...])"});
}

TEST(RoutingConfig, RejectsBadSplitEntries) {
  expectErrors(withRoutes(R"(routes:
  - { match: { model: m1 }, split: [ { upstream: a, weight: 100 } ] }
  - { match: { model: m2 }, split: [ { upstream: a, weight: 0 }, { upstream: b, weight: 101 } ] }
  - { match: { model: m3 }, split: [ { upstream: a }, { weight: 50 }, b ] }
  - { match: { model: m4 }, split: [ { upstream: a, weight: 50 }, { upstream: a, weight: 50 } ] }
)"),
               {"test.yaml:4:36: routes[0].split: a split needs at least two entries (for one, "
                "write upstream: NAME)",
                "test.yaml:5:61: routes[1].split[0].weight: must be between 1 and 100, got 0",
                "test.yaml:5:89: routes[1].split[1].weight: must be between 1 and 100, got 101",
                "test.yaml:6:38: routes[2].split[0].weight: missing required key \"weight\" (an "
                "integer 1-100)",
                "test.yaml:6:55: routes[2].split[1].upstream: missing required key \"upstream\"",
                "test.yaml:6:71: routes[2].split[2]: expected a mapping, got a string",
                "test.yaml:7:79: routes[3].split[1].upstream: upstream \"a\" is already in this "
                "split (at line 7)"});
}

TEST(RoutingConfig, RejectsSplitWeightsThatDoNotAddUpTo100) {
  expectErrors(withRoutes(R"(routes:
  - match: { model: "*" }
    split:
      - { upstream: a, weight: 60 }
      - { upstream: b, weight: 30 }
)"),
               {"test.yaml:6:7: routes[0].split: weights add up to 90, not 100"});
  expectErrors(withRoutes(R"(routes:
  - match: { model: "*" }
    split: [ { upstream: a, weight: 60 }, { upstream: b, weight: 30 }, { upstream: c, weight: 20 } ]
)"),
               {"test.yaml:5:12: routes[0].split: weights add up to 110, not 100"});
}

TEST(RoutingConfig, RejectsTargetsAndMirrorsNamingNoUpstream) {
  expectErrors(withRoutes(R"(routes:
  - match: { model: m }
    split: [ { upstream: a, weight: 50 }, { upstream: triton, weight: 50 } ]
    mirror: shadow
  - match: { model: "*" }
    upstream: a
    mirror: a
)"),
               {"test.yaml:5:55: routes[0].split[1].upstream: upstream \"triton\" is not defined "
                "(defined: a, b, c)",
                "test.yaml:6:13: routes[0].mirror: upstream \"shadow\" is not defined (defined: "
                "a, b, c)",
                "test.yaml:9:13: routes[1].mirror: mirror \"a\" is also a target of this route; "
                "mirror to another upstream"});
}

TEST(RoutingConfig, RejectsBadRewritesTimeoutsAndMirrors) {
  expectErrors(withRoutes(R"(routes:
  - { match: { model: m1 }, upstream: a, rewrite: {} }
  - { match: { model: m2 }, upstream: a, rewrite: { model: "" } }
  - { match: { model: m3 }, upstream: a, rewrite: { model: x, tenant: y } }
  - { match: { model: m4 }, upstream: a, timeout_ms: 0 }
  - { match: { model: m5 }, upstream: a, mirror: "" }
  - { match: { model: m6 }, upstream: a, retries: 3 }
)"),
               {"test.yaml:4:51: routes[0].rewrite: rewrite needs model, version or both",
                "test.yaml:5:60: routes[1].rewrite.model: a rewritten model must not be empty "
                "(leave it out to keep the client's)",
                "test.yaml:6:63: routes[2].rewrite.tenant: unknown key \"tenant\" (allowed: "
                "model, version)",
                "test.yaml:7:54: routes[3].timeout_ms: must be between 1 and 86400000, got 0",
                "test.yaml:8:50: routes[4].mirror: a mirror must name an upstream",
                "test.yaml:9:42: routes[5].retries: unknown key \"retries\" (allowed: name, match, "
                "upstream, split, rewrite, timeout_ms, mirror, auth)"});
}

TEST(RoutingConfig, RouteNamesAreOptionalNonEmptyAndUnique) {
  auto r = parse(withRoutes(R"(routes:
  - { name: llm-canary, match: { model: llm }, upstream: a }
  - { match: { model: "*" }, upstream: b }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->routes[0].name, "llm-canary");
  EXPECT_EQ(r->routes[1].name, "");  // the route table calls it routes[1]
  expectErrors(withRoutes(R"(routes:
  - { name: x, match: { model: m1 }, upstream: a }
  - { name: "", match: { model: m2 }, upstream: a }
  - { name: x, match: { model: "*" }, upstream: a }
)"),
               {"test.yaml:5:13: routes[1].name: a route's name must not be empty (leave the key "
                "out for routes[N])",
                "test.yaml:6:13: routes[2].name: duplicate route name \"x\" (first used at "
                "test.yaml:4:13): metrics would merge them"});
}

// ---- routes: unreachable --------------------------------------------------------------

TEST(RoutingConfig, APrefixShadowsTheNamesAndPrefixesItCovers) {
  expectErrors(withRoutes(R"(routes:
  - { match: { model_prefix: llm- }, upstream: a }
  - { match: { model: llm-7b }, upstream: b }
  - { match: { model_prefix: llm-x }, upstream: b }
  - { match: { model: llm }, upstream: b }
  - { match: { model_prefix: ll }, upstream: b }
)"),
               {"test.yaml:5:23: routes[1].match.model: unreachable route: every request it "
                "matches is taken first by routes[0] at test.yaml:4:5 (model_prefix \"llm-\")",
                "test.yaml:6:30: routes[2].match.model_prefix: unreachable route: every request "
                "it matches is taken first by routes[0] at test.yaml:4:5 (model_prefix "
                "\"llm-\")"});
}

TEST(RoutingConfig, AnExactRouteShadowsNoPrefixRoute) {
  auto r = parse(withRoutes(R"(routes:
  - { match: { model: llm-7b }, upstream: a }
  - { match: { model_prefix: llm-7b }, upstream: b }
  - { match: { model_prefix: llm- }, upstream: b }
)"));
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(RoutingConfig, VersionsAndHeadersNarrowWhatARouteShadows) {
  // Each earlier route has a condition the later one lacks: all reachable.
  auto r = parse(withRoutes(R"(routes:
  - { match: { model: m, version: "1" }, upstream: a }
  - { match: { model: m, version: "2" }, upstream: a }
  - { match: { model: m, headers: { x-tenant: beta } }, upstream: b }
  - { match: { model: m, headers: { x-tenant: gamma } }, upstream: b }
  - { match: { model: m }, upstream: c }
  - { match: { model: "*", headers: { x-canary: "1" } }, upstream: b }
  - { match: { model: "*" }, upstream: c }
)"));
  EXPECT_TRUE(r.ok()) << r.status();
  // A later route with every condition of an earlier one (and more) is shadowed.
  expectErrors(withRoutes(R"(routes:
  - { match: { model_prefix: m, version: "2", headers: { x-tenant: beta } }, upstream: a }
  - { match: { model: m1, version: "2", headers: { x-tenant: beta, x-tier: gold } }, upstream: b }
  - { match: { model: m1, version: "2", headers: { x-tenant: gamma } }, upstream: b }
  - { match: { model: "*", headers: { x-canary: "1" } }, upstream: c }
  - { match: { model: m2, headers: { X-Canary: "1" } }, upstream: c }
  - { match: { model: m3, version: "1" }, upstream: a }
  - { match: { model: m3, version: "1" }, upstream: b }
)"),
               {"test.yaml:5:23: routes[1].match.model: unreachable route: every request it "
                "matches is taken first by routes[0] at test.yaml:4:5 (model_prefix \"m\", "
                "version \"2\", header x-tenant: \"beta\")",
                "test.yaml:8:23: routes[4].match.model: unreachable route: every request it "
                "matches is taken first by routes[3] at test.yaml:7:5 (model \"*\", header "
                "x-canary: \"1\")",
                "test.yaml:10:23: routes[6].match.model: unreachable route: every request it "
                "matches is taken first by routes[5] at test.yaml:9:5 (model \"m3\", version "
                "\"1\")"});
}

TEST(RoutingConfig, ARouteWithErrorsInItsMatchShadowsNothing) {
  // routes[0]'s header is refused; were it kept without it, it would shadow routes[1].
  expectErrors(withRoutes(R"(routes:
  - { match: { model: m, headers: { "x y": b } }, upstream: a }
  - { match: { model: m }, upstream: b }
)"),
               {"test.yaml:4:37: routes[0].match.headers.x y: \"x y\" is not an HTTP header name "
                "(letters, digits and !#$%&'*+-.^_`|~)"});
}

// ---- forward and readiness ------------------------------------------------------------

constexpr std::string_view kMinimal = R"(upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a }]
)";

TEST(RoutingConfig, ForwardHeadersAreLowercasedAndReplaceTheDefault) {
  auto r = parse(file(kMinimal) + R"(forward:
  headers: [TraceParent, "X-Request-*", x-tenant]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->forward.headers,
            (std::vector<std::string>{"traceparent", "x-request-*", "x-tenant"}));
  auto none = parse(file(kMinimal) + "forward: { headers: [] }\n");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->forward.headers.empty());
  auto all = parse(file(kMinimal) + "forward: { headers: [\"*\"] }\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->forward.headers, (std::vector<std::string>{"*"}));
  auto defaults = parse(file(kMinimal));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->forward.headers,
            (std::vector<std::string>{"traceparent", "tracestate", "triton-grpc-protocol-*"}));
}

TEST(RoutingConfig, RejectsBadForwardHeaders) {
  expectErrors(file(kMinimal) + R"(forward:
  headers: ["x y", "a*b", traceparent, TraceParent, "", { a: b }]
)",
               {"test.yaml:5:13: forward.headers[0]: \"x y\" is not an HTTP header name "
                "(letters, digits and !#$%&'*+-.^_`|~)",
                "test.yaml:5:20: forward.headers[1]: \"a*b\": '*' is allowed only at the end (a "
                "prefix)",
                "test.yaml:5:40: forward.headers[3]: header \"TraceParent\" is listed twice",
                "test.yaml:5:53: forward.headers[4]: \"\" is not an HTTP header name (letters, "
                "digits and !#$%&'*+-.^_`|~)",
                "test.yaml:5:57: forward.headers[5]: expected a string, got a mapping"});
  expectErrors(file(kMinimal) + "forward: { headers: traceparent, add: [x] }\n",
               {"test.yaml:4:21: forward.headers: expected a sequence, got a string",
                "test.yaml:4:34: forward.add: unknown key \"add\" (allowed: headers)"});
}

TEST(RoutingConfig, ReadsReadiness) {
  auto defaults = parse(file(kMinimal));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->readiness.policy, ReadinessConfig::Policy::kAllRoutes);
  EXPECT_EQ(defaults->readiness.probe_interval_ms, 1000u);
  auto any = parse(file(kMinimal) + "readiness: { policy: any_route, probe_interval_ms: 500 }\n");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->readiness.policy, ReadinessConfig::Policy::kAnyRoute);
  EXPECT_EQ(any->readiness.probe_interval_ms, 500u);
  auto always = parse(file(kMinimal) + "readiness: { policy: always }\n");
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_EQ(always->readiness.policy, ReadinessConfig::Policy::kAlways);
  auto all = parse(file(kMinimal) + "readiness: { policy: all_routes }\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->readiness.policy, ReadinessConfig::Policy::kAllRoutes);
}

TEST(RoutingConfig, RejectsBadReadiness) {
  expectErrors(file(kMinimal) + "readiness: { policy: some, probe_interval_ms: 0, when: x }\n",
               {"test.yaml:4:22: readiness.policy: unknown policy \"some\" (allowed: all_routes, "
                "any_route, always)",
                "test.yaml:4:47: readiness.probe_interval_ms: must be between 1 and 86400000, "
                "got 0",
                "test.yaml:4:50: readiness.when: unknown key \"when\" (allowed: policy, "
                "probe_interval_ms)"});
}

}  // namespace
}  // namespace infergate::config
