#include "config/config_loader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "codecs/text.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using Kind = ListenAddress::Kind;
using Protocol = UpstreamConfig::Protocol;
using Model = RouteMatch::Model;
// The rest of a valid file, for tests about listeners: starts on line 3.
constexpr std::string_view kUpstreamAndRoute = R"(upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]
)";

std::string withListeners(std::string_view two_lines) {
  return std::string(two_lines) + std::string(kUpstreamAndRoute);
}

// ---- valid files -----------------------------------------------------------------------

TEST(ConfigLoader, LoadsTheExampleWithExactValues) {
  auto r = parse(R"(listeners:
  http:    { address: "0.0.0.0:8000" }
  grpc:    { address: "0.0.0.0:8001" }
  metrics: { address: "0.0.0.0:8002" }
workers: 0
limits:
  max_header_bytes: 65536
  max_header_count: 100
  max_input_bytes: 67108864
  max_binary_body_bytes: 2147483647
  max_grpc_message_bytes: 2147483647
  header_timeout_ms: 10000
  body_timeout_ms: 60000
  idle_timeout_ms: 300000
  max_connections: 10000
upstreams:
  - name: demo
    protocol: builtin
    models: []
routes:
  - match: { model: "*" }
    upstream: demo
)");
  ASSERT_TRUE(r.ok()) << r.status();
  const GatewayConfig& c = *r;
  EXPECT_EQ(c.source, "test.yaml");
  ASSERT_TRUE(c.http && c.grpc && c.metrics);
  EXPECT_EQ(c.http->address.kind, Kind::kTcp);
  EXPECT_EQ(c.http->address.host, "0.0.0.0");
  EXPECT_EQ(c.http->address.port, 8000);
  EXPECT_EQ(c.http->address.text, "0.0.0.0:8000");
  EXPECT_EQ(formatLocation(c.http->address.where), "test.yaml:2:23");
  EXPECT_EQ(formatLocation(c.http->where), "test.yaml:2:12");
  EXPECT_EQ(c.grpc->address.port, 8001);
  EXPECT_EQ(c.metrics->address.port, 8002);
  EXPECT_EQ(c.workers, 0u);
  EXPECT_EQ(c.limits.max_header_bytes, 65536u);
  EXPECT_EQ(c.limits.max_header_count, 100u);
  EXPECT_EQ(c.limits.max_input_bytes, 67108864u);
  EXPECT_EQ(c.limits.max_binary_body_bytes, 2147483647u);
  EXPECT_EQ(c.limits.max_grpc_message_bytes, 2147483647u);
  EXPECT_EQ(c.limits.header_timeout_ms, 10000u);
  EXPECT_EQ(c.limits.body_timeout_ms, 60000u);
  EXPECT_EQ(c.limits.idle_timeout_ms, 300000u);
  EXPECT_EQ(c.limits.send_timeout_ms, 60000u);  // the default
  EXPECT_EQ(c.limits.max_connections, 10000u);
  EXPECT_EQ(c.limits.grpc_reset_burst, 1000u);
  EXPECT_EQ(c.limits.grpc_resets_per_second, 33u);
  ASSERT_EQ(c.upstreams.size(), 1u);
  EXPECT_EQ(c.upstreams[0].name, "demo");
  EXPECT_EQ(c.upstreams[0].protocol, Protocol::kBuiltin);
  EXPECT_TRUE(c.upstreams[0].models.empty());
  EXPECT_EQ(formatLocation(c.upstreams[0].where), "test.yaml:17:5");
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes[0].match.kind, Model::kAny);
  EXPECT_EQ(c.routes[0].match.model, "");
  ASSERT_EQ(c.routes[0].targets.size(), 1u);
  EXPECT_EQ(c.routes[0].targets[0].upstream, "demo");
  EXPECT_EQ(c.routes[0].targets[0].weight, 100u);
  EXPECT_EQ(formatLocation(c.routes[0].targets[0].where), "test.yaml:22:15");
  EXPECT_EQ(formatLocation(c.routes[0].where), "test.yaml:21:5");
}

TEST(ConfigLoader, OmittedKeysTakeTheirDefaults) {
  auto r = parse(R"(listeners:
  grpc: { address: "127.0.0.1:8001" }
upstreams:
  - { name: demo, protocol: builtin }
routes:
  - { match: { model: "*" }, upstream: demo }
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->http.has_value());
  EXPECT_TRUE(r->grpc.has_value());
  EXPECT_FALSE(r->metrics.has_value());
  EXPECT_EQ(r->workers, 0u);
  LimitsConfig defaults;
  EXPECT_EQ(r->limits.max_header_bytes, defaults.max_header_bytes);
  EXPECT_EQ(r->limits.max_header_count, 100u);
  EXPECT_EQ(r->limits.max_input_bytes, 64u * 1024 * 1024);
  EXPECT_EQ(r->limits.max_binary_body_bytes, 2147483647u);
  EXPECT_EQ(r->limits.max_grpc_message_bytes, 2147483647u);
  EXPECT_EQ(r->limits.header_timeout_ms, 10000u);
  EXPECT_EQ(r->limits.body_timeout_ms, 60000u);
  EXPECT_EQ(r->limits.idle_timeout_ms, 300000u);
  EXPECT_EQ(r->limits.max_connections, 10000u);
  EXPECT_TRUE(r->upstreams[0].models.empty());
}

TEST(ConfigLoader, ReadsSomeLimitsAndKeepsTheOthers) {
  auto r = parse(R"(listeners: { http: { address: "localhost:0" } }
workers: 4
limits: { max_header_count: 50, idle_timeout_ms: 0x10, max_input_bytes: 1048576, send_timeout_ms: 2500,
          grpc_reset_burst: 200, grpc_resets_per_second: 500 }
upstreams: [{ name: demo, protocol: builtin, models: [simple, identity_fp32, 7] }]
routes: [{ match: { model: "*" }, upstream: demo }]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->workers, 4u);
  EXPECT_EQ(r->busy_poll_us, 0u);  // off unless asked
  EXPECT_EQ(r->limits.max_header_count, 50u);
  EXPECT_EQ(r->limits.idle_timeout_ms, 16u);
  EXPECT_EQ(r->limits.send_timeout_ms, 2500u);
  EXPECT_EQ(r->limits.grpc_reset_burst, 200u);
  EXPECT_EQ(r->limits.grpc_resets_per_second, 500u);
  EXPECT_EQ(r->limits.body_timeout_ms, 60000u);  // kept
  EXPECT_EQ(r->limits.max_input_bytes, 1048576u);
  EXPECT_EQ(r->limits.max_header_bytes, 65536u);
  EXPECT_EQ(r->upstreams[0].models, (std::vector<std::string>{"simple", "identity_fp32", "7"}));
  EXPECT_EQ(r->http->address.host, "localhost");
}

TEST(ConfigLoader, AcceptsExactModelRoutesBeforeTheCatchAll) {
  auto r = parse(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams:
  - { name: a, protocol: builtin, models: [simple] }
  - { name: b, protocol: builtin }
routes:
  - { match: { model: simple }, upstream: a }
  - { match: { model: "*" }, upstream: b }
)");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->routes.size(), 2u);
  EXPECT_EQ(r->routes[0].match.kind, Model::kExact);
  EXPECT_EQ(r->routes[0].match.model, "simple");
  EXPECT_EQ(r->routes[1].match.kind, Model::kAny);
  EXPECT_EQ(r->routes[1].targets[0].upstream, "b");
}

TEST(ConfigLoader, ReadsIpv6UnixAndPortZeroAddresses) {
  auto r = parse(withListeners(R"(listeners: { http: { address: "[::1]:0" }, metrics: { address: "unix:/run/ig/metrics.sock" },
  grpc: { address: "[fe80::1%eth0]:8001" } }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->http->address.kind, Kind::kTcp);
  EXPECT_EQ(r->http->address.host, "::1");
  EXPECT_EQ(r->http->address.port, 0);
  EXPECT_EQ(r->http->address.text, "[::1]:0");
  EXPECT_EQ(r->grpc->address.host, "fe80::1%eth0");
  EXPECT_EQ(r->grpc->address.port, 8001);
  EXPECT_EQ(r->metrics->address.kind, Kind::kUnix);
  EXPECT_EQ(r->metrics->address.path, "/run/ig/metrics.sock");
}

TEST(ConfigLoader, TwoListenersOnPortZeroDoNotClash) {
  auto r = parse(withListeners(R"(listeners: { http: { address: "127.0.0.1:0" },
  grpc: { address: "127.0.0.1:0" } }
)"));
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(ConfigLoader, UnquotedAddressesAndCommentsAreFine) {
  auto r = parse(R"(# a comment
listeners:
  http: { address: 0.0.0.0:8000 }   # plain scalar
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: '*' }, upstream: demo }]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->http->address.port, 8000);
}

TEST(ConfigLoader, FollowsAnchorsAndAliases) {
  auto r = parse(R"(listeners:
  http: &loopback { address: "127.0.0.1:8000" }
upstreams:
  - { name: &name demo, protocol: builtin }
routes:
  - { match: { model: "*" }, upstream: *name }
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->routes[0].targets[0].upstream, "demo");
  EXPECT_EQ(r->http->address.port, 8000);
}

// ---- errors, one class per test -------------------------------------------------------

TEST(ConfigLoader, RejectsUnknownKeyNamingTheAllowedOnes) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits:
  max_header_byte: 100
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]
)",
                  "test.yaml:3:3: limits.max_header_byte: ",
                  "unknown key \"max_header_byte\" (allowed: max_header_bytes, "
                  "max_header_count, max_input_bytes,");
}

TEST(ConfigLoader, RejectsUnknownTopLevelKey) {
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
tracing: { sample_rate: 1 }
)"),
                  "test.yaml:2:1: tracing: ",
                  "unknown key \"tracing\" (allowed: listeners, workers, busy_poll_us, limits, upstreams, "
                  "routes, forward, readiness, discovery, lifecycle, shm, observability, auth, rate_limits)");
}

TEST(ConfigLoader, ReadsBusyPollAndBoundsIt) {
  auto r = parse(R"(listeners: { http: { address: "localhost:0" } }
busy_poll_us: 50
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->busy_poll_us, 50u);
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
busy_poll_us: 20000
)"),
                  "test.yaml:2:15: busy_poll_us: ", "must be between 0 and 10000, got 20000");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
busy_poll_us: -1
)"),
                  "test.yaml:2:15: busy_poll_us: ", "must not be negative");
}

TEST(ConfigLoader, RejectsAStringWhereAnIntegerGoes) {
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
workers: "4"
)"),
                  "test.yaml:2:10: workers: ", "expected an integer, got a string");
}

TEST(ConfigLoader, RejectsOtherWrongTypes) {
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: { body_timeout_ms: 1.5 }
)"),
                  "test.yaml:2:28: limits.body_timeout_ms: ", "expected an integer, got a float");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: [1, 2]
)"),
                  "test.yaml:2:9: limits: ", "expected a mapping, got a sequence");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
workers: true
)"),
                  "test.yaml:2:10: workers: ", "expected an integer, got a boolean");
  expectOnlyError(withListeners(R"(listeners: { http: { address: { host: x } } }
workers: 1
)"),
                  "test.yaml:1:31: listeners.http.address: ", "expected a string, got a mapping");
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: { name: demo, protocol: builtin }
routes: [{ match: { model: "*" }, upstream: demo }]
)",
                  "test.yaml:2:12: upstreams: ", "expected a sequence, got a mapping");
}

TEST(ConfigLoader, AnEmptyValueIsReportedAtItsKey) {
  expectOnlyError(withListeners(R"(listeners:
  http:
)"),
                  "test.yaml:2:3: listeners.http: ", "expected a mapping, got null");
}

TEST(ConfigLoader, RejectsNegativeNumbers) {
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
workers: -1
)"),
                  "test.yaml:2:10: workers: ", "must not be negative");
}

TEST(ConfigLoader, ReadsTheAbuseLimits) {
  auto r = parse(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits:
  max_connections_per_client: 64
  max_tensors: 16
  max_tensor_rank: 8
  max_tensor_elements: 1048576
  max_json_depth: 32
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->limits.max_connections_per_client, 64u);
  EXPECT_EQ(r->limits.max_tensors, 16u);
  EXPECT_EQ(r->limits.max_tensor_rank, 8u);
  EXPECT_EQ(r->limits.max_tensor_elements, 1048576u);
  EXPECT_EQ(r->limits.max_json_depth, 32u);
  // Left out: no cap per client below the total, Triton-sized tensors.
  auto d = parse(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
)"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->limits.max_connections_per_client, d->limits.max_connections);
  EXPECT_EQ(d->limits.max_tensors, 65536u);
  EXPECT_EQ(d->limits.max_tensor_rank, 64u);
  EXPECT_EQ(d->limits.max_tensor_elements, 2147483647u);
  EXPECT_EQ(d->limits.max_json_depth, 100u);
  std::vector<std::string> lines = errorLines(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: { max_json_depth: 0, max_tensor_rank: 2000 }
)"));
  ASSERT_EQ(lines.size(), 2u) << joined(lines);
  EXPECT_EQ(lines[0], "test.yaml:2:27: limits.max_json_depth: must be between 1 and 1024, got 0");
  EXPECT_EQ(lines[1], "test.yaml:2:47: limits.max_tensor_rank: must be between 1 and 1024, "
                      "got 2000");
}

TEST(ConfigLoader, RejectsOutOfRangeNumbers) {
  std::vector<std::string> lines = errorLines(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: { max_header_count: 70000, max_binary_body_bytes: 2147483648, header_timeout_ms: 0, max_input_bytes: 99999999999999999999999 }
)"));
  ASSERT_EQ(lines.size(), 4u) << joined(lines);
  EXPECT_EQ(lines[0], "test.yaml:2:29: limits.max_header_count: must be between 1 and 65535, got 70000");
  EXPECT_EQ(lines[1], "test.yaml:2:59: limits.max_binary_body_bytes: must be between 1 and "
                      "2147483647, got 2147483648");
  EXPECT_EQ(lines[2], "test.yaml:2:90: limits.header_timeout_ms: must be between 1 and "
                      "86400000, got 0");
  EXPECT_EQ(lines[3].substr(0, 50), "test.yaml:2:110: limits.max_input_bytes: must be b");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: { send_timeout_ms: 0 }
)"),
                  "test.yaml:2:28: limits.send_timeout_ms: ", "must be between 1 and 86400000, got 0");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: { grpc_reset_burst: 0 }
)"),
                  "test.yaml:2:29: limits.grpc_reset_burst: ", "must be between 1 and 1000000, got 0");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
limits: { grpc_resets_per_second: 1000001 }
)"),
                  "test.yaml:2:35: limits.grpc_resets_per_second: ", "must be between 1 and 1000000, got 1000001");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
workers: 5000
)"),
                  "test.yaml:2:10: workers: ", "must be between 0 and 1024, got 5000");
}

TEST(ConfigLoader, RejectsAnAddressWithoutPort) {
  expectOnlyError(withListeners(R"(listeners:
  http: { address: "0.0.0.0" }
)"),
                  "test.yaml:2:20: listeners.http.address: ", "missing port in \"0.0.0.0\"");
}

TEST(ConfigLoader, RejectsAPortOver65535) {
  expectOnlyError(withListeners(R"(listeners:
  http: { address: "0.0.0.0:70000" }
)"),
                  "test.yaml:2:20: listeners.http.address: ",
                  "port 70000 is out of range (0-65535)");
}

TEST(ConfigLoader, RejectsEmptyAndOverlongUnixPaths) {
  expectOnlyError(withListeners(R"(listeners:
  http: { address: "unix:" }
)"),
                  "test.yaml:2:20: listeners.http.address: ", "unix socket path is empty");
  std::string long_path = "/" + std::string(107, 'a');  // 108 bytes: one too many
  expectOnlyError(withListeners("listeners:\n  http: { address: \"unix:" + long_path + "\" }\n"),
                  "test.yaml:2:20: listeners.http.address: ",
                  "unix socket path is 108 bytes long; at most 107 fit in sockaddr_un");
  std::string fits = "/" + std::string(106, 'a');
  EXPECT_TRUE(parse(withListeners("listeners:\n  http: { address: \"unix:" + fits + "\" }\n")).ok());
}

TEST(ConfigLoader, RejectsOtherBadAddresses) {
  expectOnlyError(withListeners(R"(listeners:
  http: { address: "::1:8000" }
)"),
                  "test.yaml:2:20: listeners.http.address: ",
                  "an IPv6 address needs brackets: \"[::1]:8000\"");
  expectOnlyError(withListeners(R"(listeners:
  http: { address: "300.1.1.1:80" }
)"),
                  "test.yaml:2:20: listeners.http.address: ", "not a valid IPv4 address");
  expectOnlyError(withListeners(R"(listeners:
  http: { address: ":8000" }
)"),
                  "test.yaml:2:20: listeners.http.address: ", "missing host");
  expectOnlyError(withListeners(R"(listeners:
  http: { }
)"),
                  "test.yaml:2:9: listeners.http.address: ",
                  "missing required key \"address\"");
}

TEST(ConfigLoader, RejectsDuplicateUpstreamNames) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams:
  - name: demo
    protocol: builtin
  - name: demo
    protocol: builtin
routes: [{ match: { model: "*" }, upstream: demo }]
)",
                  "test.yaml:5:11: upstreams[1].name: ",
                  "duplicate upstream name \"demo\" (first defined at test.yaml:3:11)");
}

TEST(ConfigLoader, ReadsWhichServerCarriesTheGrpcListener) {
  auto native = parse(withListeners(R"(listeners: { grpc: { address: "127.0.0.1:8001" } }
workers: 1
)"));
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(native->grpc->native_grpc_server);
  auto grpcpp = parse(withListeners(R"(listeners: { grpc: { address: "127.0.0.1:8001", server: "grpc++" } }
workers: 1
)"));
  ASSERT_TRUE(grpcpp.ok()) << grpcpp.status();
  EXPECT_FALSE(grpcpp->grpc->native_grpc_server);
  expectErrors(withListeners(R"(listeners: { grpc: { address: "127.0.0.1:8001", server: nghttp2 } }
workers: 1
)"),
               {"test.yaml:1:57: listeners.grpc.server: server must be \"native\" or \"grpc++\", not \"nghttp2\""});
  expectErrors(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000", server: native } }
workers: 1
)"),
               {"test.yaml:1:49: listeners.http.server: unknown key \"server\" (allowed: address, tls, public)"});
}

TEST(ConfigLoader, RejectsBadUpstreamNamesAndModels) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: "my upstream", protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: "my upstream" }]
)",
                  "test.yaml:2:21: upstreams[0].name: ",
                  "upstream name \"my upstream\" must be non-empty letters, digits");
  expectErrors(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: t, protocol: builtin, models: [a, ""] }]
routes: [{ match: { model: "*" }, upstream: t }]
)",
               {"test.yaml:2:55: upstreams[0].models[1]: a model name must not be empty"});
  expectErrors(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: t, protocol: http, endpoints: ["h:1"], models: [a, ""] }]
routes: [{ match: { model: "*" }, upstream: t }]
)",
               {"test.yaml:2:68: upstreams[0].models: models applies to builtin upstreams only"});
}

TEST(ConfigLoader, RejectsARouteToAMissingUpstream) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes:
  - match: { model: "*" }
    upstream: triton
)",
                  "test.yaml:5:15: routes[0].upstream: ",
                  "upstream \"triton\" is not defined (defined: demo)");
}

TEST(ConfigLoader, RejectsARouteAfterTheCatchAll) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes:
  - match: { model: "*" }
    upstream: demo
  - match: { model: simple }
    upstream: demo
)",
                  "test.yaml:6:21: routes[1].match.model: ",
                  "unreachable route: comes after the catch-all routes[0] at test.yaml:4:5");
}

TEST(ConfigLoader, RejectsARouteShadowedByTheSameModel) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes:
  - { match: { model: simple }, upstream: demo }
  - { match: { model: simple }, upstream: demo }
)",
                  "test.yaml:5:23: routes[1].match.model: ",
                  "unreachable route: every request it matches is taken first by routes[0] at "
                  "test.yaml:4:5 (model \"simple\")");
}

TEST(ConfigLoader, RejectsAStarInsideAModelNamePointingAtModelPrefix) {
  expectErrors(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "llm-*" }, upstream: demo }]
)",
               {"test.yaml:3:28: routes[0].match.model: \"llm-*\": '*' matches only on its own "
                "(any model); for a prefix write model_prefix: \"llm-\""});
  expectErrors(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "a*b" }, upstream: demo }]
)",
               {"test.yaml:3:28: routes[0].match.model: \"a*b\": '*' matches only on its own "
                "(any model); prefixes are matched with model_prefix"});
}

TEST(ConfigLoader, RejectsAFileWithNoHttpOrGrpcListener) {
  expectOnlyError(withListeners(R"(listeners:
  metrics: { address: "127.0.0.1:8002" }
)"),
                  "test.yaml:2:3: listeners: ",
                  "no listener: at least one of listeners.http and listeners.grpc is required");
  expectOnlyError(R"(workers: 2
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: demo }]
)",
                  "test.yaml:1:1: listeners: ", "no listener");
}

TEST(ConfigLoader, RejectsAFileWithNoRoute) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes: []
)",
                  "test.yaml:3:9: routes: ", "no route: at least one route is required");
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
)",
                  "test.yaml:1:1: routes: ", "no route");
}

TEST(ConfigLoader, RejectsDuplicateListenerAddresses) {
  expectOnlyError(withListeners(R"(listeners: { http: { address: "0.0.0.0:8000" },
  grpc: { address: "0.0.0.0:8000" } }
)"),
                  "test.yaml:2:20: listeners.grpc.address: ",
                  "address \"0.0.0.0:8000\" clashes with listeners.http (\"0.0.0.0:8000\" at "
                  "test.yaml:1:31)");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "0.0.0.0:8000" },
  metrics: { address: "127.0.0.1:8000" } }
)"),
                  "test.yaml:2:23: listeners.metrics.address: ", "clashes with listeners.http");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "unix:/tmp/ig.sock" },
  grpc: { address: "unix:/tmp/ig.sock" } }
)"),
                  "test.yaml:2:20: listeners.grpc.address: ", "clashes with listeners.http");
}

TEST(ConfigLoader, ReportsYamlSyntaxErrorsWithTheParsersLine) {
  expectOnlyError(R"(listeners:
  http: { address: "127.0.0.1:8000"
upstreams: []
)",
                  "test.yaml:3:1: ", "YAML syntax error: end of map flow not found");
  expectOnlyError("listeners:\n  http:\n    address: x\n   bad: 1\n", "test.yaml:4:4: ",
                  "YAML syntax error: end of map not found");
  expectOnlyError("routes: [{ match: { model: * } }]\n", "test.yaml:1:",
                  "YAML syntax error: ");
}

TEST(ConfigLoader, ReportsAStrayCommaInsteadOfHanging) {
  // yaml-cpp 0.7's LoadAll never returns on these (jbeder/yaml-cpp#1040).
  expectOnlyError(",\n", "test.yaml:1:1: ", "YAML syntax error: unexpected character");
  expectOnlyError(",listeners: {}\n", "test.yaml:1:1: ", "YAML syntax error");
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
workers: 1
)") + ", oops\n",
                  "test.yaml:5:1: ", "YAML syntax error: end of map not found");
}

TEST(ConfigLoader, RejectsUnknownAndMissingProtocols) {
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: triton, protocol: tcp }]
routes: [{ match: { model: "*" }, upstream: triton }]
)",
                  "test.yaml:2:39: upstreams[0].protocol: ",
                  "unknown protocol \"tcp\" (allowed: builtin, grpc, http)");
  expectOnlyError(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: triton }]
routes: [{ match: { model: "*" }, upstream: triton }]
)",
                  "test.yaml:2:13: upstreams[0].protocol: ",
                  "missing required key \"protocol\" (one of builtin, grpc, http)");
}

TEST(ConfigLoader, RejectsARepeatedKey) {
  expectOnlyError(withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
listeners: { grpc: { address: "127.0.0.1:8001" } }
)"),
                  "test.yaml:2:1: listeners: ", "duplicate key \"listeners\" (first given at line 1)");
}

TEST(ConfigLoader, RejectsEmptyAndNonMappingFiles) {
  expectOnlyError("", "test.yaml:1:1: ", "the configuration is empty");
  expectOnlyError("# only a comment\n", "test.yaml:1:1: ", "the configuration is empty");
  expectOnlyError("- a\n- b\n", "test.yaml:1:1: ",
                  "expected a mapping at the top level, got a sequence");
  std::string two_docs = withListeners(R"(listeners: { http: { address: "127.0.0.1:8000" } }
workers: 1
)") + "---\nworkers: 2\n";
  expectOnlyError(two_docs, "test.yaml:5:1: ", "a second YAML document");
}

TEST(ConfigLoader, ReportsEveryErrorTogetherInFileOrder) {
  std::vector<std::string> lines = errorLines(R"(listeners:
  http: { address: "0.0.0.0:99999" }
  metrics: { adress: "0.0.0.0:8002" }
workers: "many"
upstreams:
  - { name: demo, protocol: builtin, models: [simple, simple] }
  - { name: demo, protocol: builtin }
routes:
  - { match: { model: "*" }, upstream: demo }
  - { match: { model: simple }, upstream: nowhere }
)");
  ASSERT_EQ(lines.size(), 8u) << joined(lines);
  EXPECT_EQ(lines[0], "test.yaml:2:20: listeners.http.address: port 99999 is out of range (0-65535)");
  EXPECT_EQ(lines[1], "test.yaml:3:12: listeners.metrics.address: missing required key "
                      "\"address\" (e.g. \"0.0.0.0:8000\")");
  EXPECT_EQ(lines[2].substr(0, 58), "test.yaml:3:14: listeners.metrics.adress: unknown key \"adr");
  EXPECT_EQ(lines[3], "test.yaml:4:10: workers: expected an integer, got a string");
  EXPECT_EQ(lines[4], "test.yaml:6:55: upstreams[0].models[1]: model \"simple\" is listed twice");
  EXPECT_EQ(lines[5].substr(0, 52), "test.yaml:7:13: upstreams[1].name: duplicate upstrea");
  EXPECT_EQ(lines[6].substr(0, 60), "test.yaml:10:23: routes[1].match.model: unreachable route: c");
  EXPECT_EQ(lines[7], "test.yaml:10:43: routes[1].upstream: upstream \"nowhere\" is not "
                      "defined (defined: demo, demo)");
}

TEST(ConfigLoader, KeyPathsCountEntriesAsWritten) {
  // routes[0] is dropped (no upstream); the next one is still called routes[1].
  std::vector<std::string> lines = errorLines(R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: demo, protocol: builtin }]
routes:
  - { match: { model: a } }
  - { match: { model: b }, upstream: gone }
)");
  ASSERT_EQ(lines.size(), 2u) << joined(lines);
  EXPECT_EQ(lines[0].substr(0, 36), "test.yaml:4:5: routes[0].upstream: m");
  EXPECT_EQ(lines[1].substr(0, 36), "test.yaml:5:38: routes[1].upstream: ");
}

TEST(ConfigLoader, SurvivesDeepNesting) {
  std::string deep = "listeners: " + std::string(10000, '[');
  auto r = parse(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- files ----------------------------------------------------------------------------

TEST(ConfigLoader, LoadConfigFileReportsAMissingFile) {
  auto r = loadConfigFile("/nonexistent/infergate.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(codecs::messageOf(r.status()),
            "cannot read /nonexistent/infergate.yaml: No such file or directory");
}

TEST(ConfigLoader, LoadConfigFileReportsADirectory) {
  auto r = loadConfigFile("/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(codecs::messageOf(r.status()).find("cannot read /: "), std::string_view::npos);
}

TEST(ConfigLoader, LoadConfigFileNamesTheFileInErrors) {
  std::string path = ::testing::TempDir() + "config_loader_test_bad.yaml";
  {
    std::ofstream f(path);
    f << "listeners:\n  http: { address: \"127.0.0.1\" }\n" << kUpstreamAndRoute;
  }
  auto r = loadConfigFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(codecs::messageOf(r.status()).substr(0, path.size() + 5), path + ":2:20");
}

TEST(ConfigLoader, LoadsTheDemoExample) {
  auto r = loadConfigFile(INFERGATE_SOURCE_DIR "/deploy/examples/demo.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->http && r->grpc && r->metrics);
  EXPECT_EQ(r->http->address.host, "127.0.0.1");
  EXPECT_EQ(r->http->address.port, 8000);
  EXPECT_EQ(r->grpc->address.port, 8001);
  EXPECT_EQ(r->metrics->address.port, 8002);
  ASSERT_EQ(r->upstreams.size(), 1u);
  EXPECT_EQ(r->upstreams[0].name, "demo");
  EXPECT_EQ(r->upstreams[0].protocol, Protocol::kBuiltin);
  ASSERT_EQ(r->routes.size(), 1u);
  EXPECT_EQ(r->routes[0].match.kind, Model::kAny);
  EXPECT_EQ(r->routes[0].targets[0].upstream, "demo");
}

TEST(ConfigLoader, LoadsTheFleetExample) {
  auto r = loadConfigFile(INFERGATE_SOURCE_DIR "/deploy/examples/fleet.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->upstreams.size(), 2u);
  const UpstreamConfig& fleet = r->upstreams[0];
  ASSERT_EQ(fleet.endpoints.size(), 1u);
  EXPECT_EQ(fleet.endpoints[0].kind, ListenAddress::Kind::kDns);
  EXPECT_EQ(fleet.endpoints[0].port, 8001);
  EXPECT_EQ(fleet.load_balancing.policy, LoadBalancingConfig::Policy::kLoadAware);
  EXPECT_EQ(fleet.load_balancing.metrics_port, 8002);
  EXPECT_EQ(fleet.health_check.model, "resnet50");
  EXPECT_EQ(fleet.overload.max_in_flight_per_endpoint, 64u);
  EXPECT_TRUE(r->upstreams[1].colocated);
  EXPECT_EQ(r->lifecycle.drain_timeout_ms, 20000u);
}

}  // namespace
}  // namespace infergate::config

TEST(ConfigLoader, KeepsTheTextItWasReadFrom) {
  // The admin API and the reload log name a configuration by a hash of this text.
  const std::string text =
      "listeners: { http: { address: \"127.0.0.1:0\" } }\n"
      "upstreams: [ { name: demo, protocol: builtin } ]\n"
      "routes: [ { match: { model: \"*\" }, upstream: demo } ]\n";
  auto r = infergate::config::parse(text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, text);
}
