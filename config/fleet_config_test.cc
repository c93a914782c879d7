// The fleet schema: dns: endpoints, colocated, each upstream's endpoint policies
// (load_balancing, health_check, outlier, retry, overload, affinity), discovery and
// lifecycle; every key read, every default, and every error with its position.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config_loader.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using Kind = ListenAddress::Kind;
using Policy = LoadBalancingConfig::Policy;

constexpr std::string_view kListeners = "listeners: { http: { address: \"127.0.0.1:8000\" } }\n";
constexpr std::string_view kRoute = "routes: [{ match: { model: \"*\" }, upstream: a }]\n";

// Line 1 is the listener; `upstreams` starts on line 2; the one route (to upstream `a`)
// and `rest` follow it.
std::string withUpstreams(std::string_view upstreams, std::string_view rest = "") {
  return std::string(kListeners) + std::string(upstreams) + std::string(kRoute) +
         std::string(rest);
}

// Lines 1-3: listener, upstream `a` (builtin), route; `rest` from line 4.
std::string withSections(std::string_view rest) {
  return withUpstreams("upstreams: [{ name: a, protocol: builtin }]\n", rest);
}

// ---- every key, every default ---------------------------------------------------------

TEST(FleetConfig, ReadsEveryEndpointPolicyKey) {
  auto r = parse(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints:
      - "127.0.0.1:8001"
      - "dns:triton-headless.ns.svc.cluster.local:8001"
      - "unix:/run/t.sock"
    colocated: true
    stream_requests: true
    load_balancing:
      policy: load_aware
      hash_header: X-Session
      metrics_port: 8002
      metrics_interval_ms: 500
    health_check:
      enabled: false
      interval_ms: 250
      timeout_ms: 300
      healthy_threshold: 3
      unhealthy_threshold: 4
      model: simple
      version: 1
    outlier: { consecutive_failures: 5, base_ejection_ms: 2000, max_ejection_ms: 60000 }
    retry: { max_retries: 3, budget_percent: 50, min_retries_per_second: 7 }
    overload:
      max_in_flight: 100
      max_in_flight_per_endpoint: 10
      max_queue: 50
      queue_timeout_ms: 250
      retry_after_s: 5
    affinity: { sequences: false, idle_timeout_ms: 60000 }
  - name: b
    protocol: http
    endpoints: ["10.0.0.2:8000"]
    load_balancing: { policy: round_robin }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  const UpstreamConfig& a = r->upstreams[0];
  ASSERT_EQ(a.endpoints.size(), 3u);
  EXPECT_EQ(a.endpoints[0].kind, Kind::kTcp);
  EXPECT_EQ(a.endpoints[1].kind, Kind::kDns);
  EXPECT_EQ(a.endpoints[1].host, "triton-headless.ns.svc.cluster.local");
  EXPECT_EQ(a.endpoints[1].port, 8001);
  EXPECT_EQ(a.endpoints[1].text, "dns:triton-headless.ns.svc.cluster.local:8001");
  EXPECT_EQ(formatLocation(a.endpoints[1].where), "test.yaml:7:9");
  EXPECT_EQ(a.endpoints[2].kind, Kind::kUnix);
  EXPECT_TRUE(a.colocated);
  EXPECT_TRUE(a.stream_requests);
  EXPECT_EQ(a.load_balancing.policy, Policy::kLoadAware);
  EXPECT_EQ(a.load_balancing.hash_header, "x-session");  // lowercased
  EXPECT_EQ(a.load_balancing.metrics_port, 8002);
  EXPECT_EQ(a.load_balancing.metrics_interval_ms, 500u);
  EXPECT_FALSE(a.health_check.enabled);
  EXPECT_EQ(a.health_check.interval_ms, 250u);
  EXPECT_EQ(a.health_check.timeout_ms, 300u);
  EXPECT_EQ(a.health_check.healthy_threshold, 3u);
  EXPECT_EQ(a.health_check.unhealthy_threshold, 4u);
  EXPECT_EQ(a.health_check.model, "simple");
  EXPECT_EQ(a.health_check.version, "1");  // an integer is read as written
  EXPECT_EQ(a.outlier.consecutive_failures, 5u);
  EXPECT_EQ(a.outlier.base_ejection_ms, 2000u);
  EXPECT_EQ(a.outlier.max_ejection_ms, 60000u);
  EXPECT_EQ(a.retry.max_retries, 3u);
  EXPECT_EQ(a.retry.budget_percent, 50u);
  EXPECT_EQ(a.retry.min_retries_per_second, 7u);
  EXPECT_EQ(a.overload.max_in_flight, 100u);
  EXPECT_EQ(a.overload.max_in_flight_per_endpoint, 10u);
  EXPECT_EQ(a.overload.max_queue, 50u);
  EXPECT_EQ(a.overload.queue_timeout_ms, 250u);
  EXPECT_EQ(a.overload.retry_after_s, 5u);
  EXPECT_FALSE(a.affinity.sequences);
  EXPECT_EQ(a.affinity.idle_timeout_ms, 60000u);
  const UpstreamConfig& b = r->upstreams[1];
  EXPECT_EQ(b.load_balancing.policy, Policy::kRoundRobin);
  EXPECT_FALSE(b.colocated);
  EXPECT_FALSE(b.stream_requests);
}

TEST(FleetConfig, EveryKeyHasItsDefault) {
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.1:8001"] }
  - { name: b, protocol: http, endpoints: ["10.0.0.2:8000"], load_balancing: {},
      health_check: {}, outlier: {}, retry: {}, overload: {}, affinity: {} }
)",
                               "discovery: {}\nlifecycle: {}\n"));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const UpstreamConfig& u : r->upstreams) {
    SCOPED_TRACE(u.name);
    EXPECT_FALSE(u.colocated);
    EXPECT_FALSE(u.stream_requests);
    EXPECT_EQ(u.load_balancing.policy, Policy::kLeastRequest);
    EXPECT_EQ(u.load_balancing.hash_header, "");
    EXPECT_EQ(u.load_balancing.metrics_port, 0);
    EXPECT_EQ(u.load_balancing.metrics_interval_ms, 1000u);
    EXPECT_TRUE(u.health_check.enabled);
    EXPECT_EQ(u.health_check.interval_ms, 0u);
    EXPECT_EQ(u.health_check.timeout_ms, 1000u);
    EXPECT_EQ(u.health_check.healthy_threshold, 2u);
    EXPECT_EQ(u.health_check.unhealthy_threshold, 2u);
    EXPECT_EQ(u.health_check.model, "");
    EXPECT_EQ(u.health_check.version, "");
    EXPECT_EQ(u.outlier.consecutive_failures, 3u);
    EXPECT_EQ(u.outlier.base_ejection_ms, 1000u);
    EXPECT_EQ(u.outlier.max_ejection_ms, 30000u);
    EXPECT_EQ(u.retry.max_retries, 2u);
    EXPECT_EQ(u.retry.budget_percent, 20u);
    EXPECT_EQ(u.retry.min_retries_per_second, 10u);
    EXPECT_EQ(u.overload.max_in_flight, 0u);
    EXPECT_EQ(u.overload.max_in_flight_per_endpoint, 0u);
    EXPECT_EQ(u.overload.max_queue, 1024u);
    EXPECT_EQ(u.overload.queue_timeout_ms, 1000u);
    EXPECT_EQ(u.overload.retry_after_s, 1u);
    EXPECT_TRUE(u.affinity.sequences);
    EXPECT_EQ(u.affinity.idle_timeout_ms, 300000u);
  }
  EXPECT_EQ(r->readiness.probe_interval_ms, 1000u);  // what interval_ms 0 inherits
  EXPECT_EQ(r->discovery.dns_refresh_ms, 5000u);
  EXPECT_EQ(r->discovery.hosts_file, "");
  EXPECT_TRUE(r->lifecycle.watch_config);
  EXPECT_EQ(r->lifecycle.watch_interval_ms, 1000u);
  EXPECT_EQ(r->lifecycle.drain_timeout_ms, 10000u);
  // And with the sections left out altogether.
  auto bare = parse(withSections(""));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->discovery.dns_refresh_ms, 5000u);
  EXPECT_TRUE(bare->lifecycle.watch_config);
  EXPECT_EQ(bare->lifecycle.drain_timeout_ms, 10000u);
}

TEST(FleetConfig, AcceptsTheEndsOfEveryRange) {
  auto r = parse(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    load_balancing: { metrics_port: 65535, metrics_interval_ms: 86400000 }
    health_check: { interval_ms: 0, timeout_ms: 86400000, healthy_threshold: 1000,
                    unhealthy_threshold: 1 }
    outlier: { consecutive_failures: 0, base_ejection_ms: 86400000, max_ejection_ms: 86400000 }
    retry: { max_retries: 10, budget_percent: 0, min_retries_per_second: 0 }
    overload: { max_in_flight: 10000000, max_in_flight_per_endpoint: 10000000,
                max_queue: 0, queue_timeout_ms: 1, retry_after_s: 86400 }
    affinity: { idle_timeout_ms: 1 }
  - name: b
    protocol: http
    endpoints: ["h:1"]
    retry: { max_retries: 0, budget_percent: 100, min_retries_per_second: 1000000 }
    outlier: { consecutive_failures: 1000000, base_ejection_ms: 1, max_ejection_ms: 1 }
)",
                               "discovery: { dns_refresh_ms: 1 }\n"
                               "lifecycle: { watch_interval_ms: 86400000, "
                               "drain_timeout_ms: 1 }\n"));
  ASSERT_TRUE(r.ok()) << r.status();
  const UpstreamConfig& a = r->upstreams[0];
  EXPECT_EQ(a.load_balancing.metrics_port, 65535);
  EXPECT_EQ(a.health_check.interval_ms, 0u);
  EXPECT_EQ(a.health_check.healthy_threshold, 1000u);
  EXPECT_EQ(a.outlier.consecutive_failures, 0u);
  EXPECT_EQ(a.retry.max_retries, 10u);
  EXPECT_EQ(a.retry.budget_percent, 0u);
  EXPECT_EQ(a.overload.max_in_flight, 10000000u);
  EXPECT_EQ(a.overload.max_queue, 0u);
  EXPECT_EQ(a.overload.retry_after_s, 86400u);
  const UpstreamConfig& b = r->upstreams[1];
  EXPECT_EQ(b.retry.max_retries, 0u);
  EXPECT_EQ(b.retry.budget_percent, 100u);
  EXPECT_EQ(b.retry.min_retries_per_second, 1000000u);
  EXPECT_EQ(b.outlier.consecutive_failures, 1000000u);
  EXPECT_EQ(r->discovery.dns_refresh_ms, 1u);
  EXPECT_EQ(r->lifecycle.drain_timeout_ms, 1u);
}

TEST(FleetConfig, ReadsDiscoveryAndLifecycle) {
  auto r = parse(withSections(R"(discovery: { dns_refresh_ms: 250, hosts_file: /etc/hosts-test }
lifecycle: { watch_config: false, watch_interval_ms: 200, drain_timeout_ms: 30000 }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->discovery.dns_refresh_ms, 250u);
  EXPECT_EQ(r->discovery.hosts_file, "/etc/hosts-test");
  EXPECT_FALSE(r->lifecycle.watch_config);
  EXPECT_EQ(r->lifecycle.watch_interval_ms, 200u);
  EXPECT_EQ(r->lifecycle.drain_timeout_ms, 30000u);
  auto on = parse(withSections("lifecycle: { watch_config: True }\n"));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->lifecycle.watch_config);
}

// ---- dns: endpoints -------------------------------------------------------------------

TEST(FleetConfig, RejectsBadDnsEndpoints) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: http
    endpoints:
      - "dns:triton:8001"
      - "dns:Triton:8001"
      - "dns:10.0.0.1:8001"
      - "dns:triton:0"
      - "dns:triton"
      - "triton:8001"
      - "dns:triton:8002"
)"),
               {"test.yaml:7:9: upstreams[0].endpoints[1]: endpoint \"dns:Triton:8001\" is listed "
                "twice (also at line 6)",
                "test.yaml:8:9: upstreams[0].endpoints[2]: \"10.0.0.1\" is an IP address, not a "
                "name to resolve (write \"10.0.0.1:8001\" without dns:)",
                "test.yaml:9:9: upstreams[0].endpoints[3]: endpoint \"dns:triton:0\" needs a port "
                "(0 is for listeners)",
                "test.yaml:10:9: upstreams[0].endpoints[4]: missing port in \"dns:triton\" "
                "(expected dns:NAME:PORT, e.g. "
                "dns:triton-headless.default.svc.cluster.local:8001)"});
}

TEST(FleetConfig, ListenersRefuseDnsNames) {
  expectErrors("listeners: { http: { address: \"dns:gateway:8000\" } }\n"
               "upstreams: [{ name: a, protocol: builtin }]\n" +
                   std::string(kRoute),
               {"test.yaml:1:31: listeners.http.address: \"dns:gateway:8000\": dns: is for "
                "upstream endpoints (every address a name resolves to); a listener takes "
                "host:port or unix:path"});
}

// ---- colocated ------------------------------------------------------------------------

TEST(FleetConfig, AColocatedUpstreamCannotStartWithADnsEndpoint) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    colocated: true
    endpoints: ["dns:triton:8001", "10.0.0.1:8001"]
)"),
               {"test.yaml:5:16: upstreams[0].colocated: the first endpoint \"dns:triton:8001\" "
                "is a dns: name, not one colocated endpoint (list the colocated one first, as "
                "host:port or unix:path)"});
  // A dns: spill-over, a single endpoint, or colocated off: all fine.
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, colocated: true, endpoints: ["unix:/run/t.sock", "dns:t:8001"] }
  - { name: b, protocol: http, colocated: true, endpoints: ["127.0.0.1:8000"] }
  - { name: c, protocol: grpc, colocated: false, endpoints: ["dns:t:8001"] }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->upstreams[0].colocated);
  EXPECT_TRUE(r->upstreams[1].colocated);
  EXPECT_FALSE(r->upstreams[2].colocated);
}

TEST(FleetConfig, ABadFirstEndpointIsNotTakenForTheColocatedOne) {
  // endpoints[0] is refused; the dns: entry after it must not be blamed on colocated.
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, colocated: true, endpoints: ["10.0.0.1", "dns:t:8001"] }
)"),
               {"test.yaml:3:61: upstreams[0].endpoints[0]: missing port in \"10.0.0.1\" "
                "(expected host:port, e.g. 0.0.0.0:8000)"});
}

// ---- wrong protocol, unknown keys, wrong types ----------------------------------------

TEST(FleetConfig, EndpointPoliciesApplyToGrpcAndHttpUpstreamsOnly) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: builtin
    colocated: true
    stream_requests: false
    load_balancing: { policy: round_robin }
    health_check: { enabled: true }
    outlier: { consecutive_failures: 1 }
    retry: { max_retries: 1 }
    overload: { max_queue: 1 }
    affinity: { sequences: true }
)"),
               {"test.yaml:5:16: upstreams[0].colocated: colocated applies to grpc and http "
                "upstreams only",
                "test.yaml:6:22: upstreams[0].stream_requests: stream_requests applies to grpc "
                "and http upstreams only",
                "test.yaml:7:21: upstreams[0].load_balancing: load_balancing applies to grpc and "
                "http upstreams only",
                "test.yaml:8:19: upstreams[0].health_check: health_check applies to grpc and "
                "http upstreams only",
                "test.yaml:9:14: upstreams[0].outlier: outlier applies to grpc and http "
                "upstreams only",
                "test.yaml:10:12: upstreams[0].retry: retry applies to grpc and http upstreams "
                "only",
                "test.yaml:11:15: upstreams[0].overload: overload applies to grpc and http "
                "upstreams only",
                "test.yaml:12:15: upstreams[0].affinity: affinity applies to grpc and http "
                "upstreams only"});
}

TEST(FleetConfig, AnUnknownProtocolStillChecksThePolicies) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: tcp, retry: { max_retries: 11 } }
)"),
               {"test.yaml:3:26: upstreams[0].protocol: unknown protocol \"tcp\" (allowed: "
                "builtin, grpc, http)",
                "test.yaml:3:53: upstreams[0].retry.max_retries: must be between 0 and 10, got "
                "11"});
}

TEST(FleetConfig, RejectsUnknownKeysNamingTheAllowedOnes) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    load_balancing: { weights: 1 }
    health_check: { path: /ready }
    outlier: { interval_ms: 1 }
    retry: { on: 5xx }
    overload: { max_requests: 1 }
    affinity: { header: x }
    zone: a
)",
                             "discovery: { resolver: x }\nlifecycle: { reload: true }\n"),
               {"test.yaml:6:23: upstreams[0].load_balancing.weights: unknown key \"weights\" "
                "(allowed: policy, hash_header, metrics_port, metrics_interval_ms)",
                "test.yaml:7:21: upstreams[0].health_check.path: unknown key \"path\" (allowed: "
                "enabled, interval_ms, timeout_ms, healthy_threshold, unhealthy_threshold, model, "
                "version)",
                "test.yaml:8:16: upstreams[0].outlier.interval_ms: unknown key \"interval_ms\" "
                "(allowed: consecutive_failures, base_ejection_ms, max_ejection_ms)",
                "test.yaml:9:14: upstreams[0].retry.on: unknown key \"on\" (allowed: "
                "max_retries, budget_percent, min_retries_per_second)",
                "test.yaml:10:17: upstreams[0].overload.max_requests: unknown key "
                "\"max_requests\" (allowed: max_in_flight, max_in_flight_per_endpoint, "
                "max_queue, queue_timeout_ms, retry_after_s)",
                "test.yaml:11:17: upstreams[0].affinity.header: unknown key \"header\" (allowed: "
                "sequences, idle_timeout_ms)",
                "test.yaml:12:5: upstreams[0].zone: unknown key \"zone\" (allowed: name, "
                "protocol, endpoints, http_format, timeout_ms, connect_timeout_ms, channels, "
                "max_connections, headers, models, colocated, stream_requests, load_balancing, "
                "health_check, outlier, retry, overload, affinity, handoff, tls)",
                "test.yaml:14:14: discovery.resolver: unknown key \"resolver\" (allowed: "
                "dns_refresh_ms, hosts_file)",
                "test.yaml:15:14: lifecycle.reload: unknown key \"reload\" (allowed: "
                "watch_config, watch_interval_ms, drain_timeout_ms)"});
}

TEST(FleetConfig, RejectsWrongTypes) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    colocated: "true"
    load_balancing: [least_request]
    health_check: { enabled: yes, model: { a: b } }
    outlier: { consecutive_failures: 1.5 }
    retry: 3
    overload: { max_queue: "10" }
    affinity: { sequences: 1 }
  - name: b
    protocol: http
    endpoints: ["h:1"]
    health_check: { enabled: !!bool yes }
    load_balancing: { hash_header: [x] }
)",
                             "discovery: { hosts_file: [a] }\nlifecycle: { watch_config: }\n"),
               {"test.yaml:6:16: upstreams[0].colocated: expected a boolean, got a string",
                "test.yaml:7:21: upstreams[0].load_balancing: expected a mapping, got a sequence",
                "test.yaml:8:30: upstreams[0].health_check.enabled: expected a boolean, got a "
                "string",
                "test.yaml:8:42: upstreams[0].health_check.model: expected a string, got a "
                "mapping",
                "test.yaml:9:38: upstreams[0].outlier.consecutive_failures: expected an integer, "
                "got a float",
                "test.yaml:10:12: upstreams[0].retry: expected a mapping, got an integer",
                "test.yaml:11:28: upstreams[0].overload.max_queue: expected an integer, got a "
                "string",
                "test.yaml:12:28: upstreams[0].affinity.sequences: expected a boolean, got an "
                "integer",
                "test.yaml:16:30: upstreams[1].health_check.enabled: expected a boolean (true or "
                "false), got yes",
                "test.yaml:17:36: upstreams[1].load_balancing.hash_header: expected a string, got "
                "a sequence",
                "test.yaml:19:26: discovery.hosts_file: expected a string, got a sequence",
                "test.yaml:20:14: lifecycle.watch_config: expected a boolean, got null"});
}

// ---- ranges and values ----------------------------------------------------------------

TEST(FleetConfig, RejectsNumbersAboveTheirRange) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    load_balancing:
      metrics_port: 65536
      metrics_interval_ms: 86400001
    health_check:
      interval_ms: 86400001
      timeout_ms: 86400001
      healthy_threshold: 1001
      unhealthy_threshold: 1001
    outlier:
      consecutive_failures: 1000001
      base_ejection_ms: 86400001
      max_ejection_ms: 86400001
    retry:
      max_retries: 11
      budget_percent: 101
      min_retries_per_second: 1000001
    overload:
      max_in_flight: 10000001
      max_in_flight_per_endpoint: 10000001
      max_queue: 10000001
      queue_timeout_ms: 86400001
      retry_after_s: 86401
    affinity:
      idle_timeout_ms: 86400001
)",
                             "discovery: { dns_refresh_ms: 86400001 }\n"
                             "lifecycle: { watch_interval_ms: 86400001, "
                             "drain_timeout_ms: 86400001 }\n"),
               {"test.yaml:7:21: upstreams[0].load_balancing.metrics_port: must be between 0 and "
                "65535, got 65536",
                "test.yaml:8:28: upstreams[0].load_balancing.metrics_interval_ms: must be between "
                "1 and 86400000, got 86400001",
                "test.yaml:10:20: upstreams[0].health_check.interval_ms: must be between 0 and "
                "86400000, got 86400001",
                "test.yaml:11:19: upstreams[0].health_check.timeout_ms: must be between 1 and "
                "86400000, got 86400001",
                "test.yaml:12:26: upstreams[0].health_check.healthy_threshold: must be between 1 "
                "and 1000, got 1001",
                "test.yaml:13:28: upstreams[0].health_check.unhealthy_threshold: must be between "
                "1 and 1000, got 1001",
                "test.yaml:15:29: upstreams[0].outlier.consecutive_failures: must be between 0 "
                "and 1000000, got 1000001",
                "test.yaml:16:25: upstreams[0].outlier.base_ejection_ms: must be between 1 and "
                "86400000, got 86400001",
                "test.yaml:17:24: upstreams[0].outlier.max_ejection_ms: must be between 1 and "
                "86400000, got 86400001",
                "test.yaml:19:20: upstreams[0].retry.max_retries: must be between 0 and 10, got "
                "11",
                "test.yaml:20:23: upstreams[0].retry.budget_percent: must be between 0 and 100, "
                "got 101",
                "test.yaml:21:31: upstreams[0].retry.min_retries_per_second: must be between 0 "
                "and 1000000, got 1000001",
                "test.yaml:23:22: upstreams[0].overload.max_in_flight: must be between 0 and "
                "10000000, got 10000001",
                "test.yaml:24:35: upstreams[0].overload.max_in_flight_per_endpoint: must be "
                "between 0 and 10000000, got 10000001",
                "test.yaml:25:18: upstreams[0].overload.max_queue: must be between 0 and "
                "10000000, got 10000001",
                "test.yaml:26:25: upstreams[0].overload.queue_timeout_ms: must be between 1 and "
                "86400000, got 86400001",
                "test.yaml:27:22: upstreams[0].overload.retry_after_s: must be between 1 and "
                "86400, got 86401",
                "test.yaml:29:24: upstreams[0].affinity.idle_timeout_ms: must be between 1 and "
                "86400000, got 86400001",
                "test.yaml:31:30: discovery.dns_refresh_ms: must be between 1 and 86400000, got "
                "86400001",
                "test.yaml:32:33: lifecycle.watch_interval_ms: must be between 1 and 86400000, "
                "got 86400001",
                "test.yaml:32:61: lifecycle.drain_timeout_ms: must be between 1 and 86400000, "
                "got 86400001"});
}

TEST(FleetConfig, RejectsZeroWhereAtLeastOneIsNeeded) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: http
    endpoints: ["h:1"]
    load_balancing: { metrics_interval_ms: 0 }
    health_check:
      timeout_ms: 0
      healthy_threshold: 0
      unhealthy_threshold: 0
    outlier: { base_ejection_ms: 0, max_ejection_ms: 0 }
    retry: { max_retries: -1 }
    overload: { queue_timeout_ms: 0, retry_after_s: 0 }
    affinity: { idle_timeout_ms: 0 }
)",
                             "discovery: { dns_refresh_ms: 0 }\n"
                             "lifecycle: { watch_interval_ms: 0, drain_timeout_ms: 0 }\n"),
               {"test.yaml:6:44: upstreams[0].load_balancing.metrics_interval_ms: must be between "
                "1 and 86400000, got 0",
                "test.yaml:8:19: upstreams[0].health_check.timeout_ms: must be between 1 and "
                "86400000, got 0",
                "test.yaml:9:26: upstreams[0].health_check.healthy_threshold: must be between 1 "
                "and 1000, got 0",
                "test.yaml:10:28: upstreams[0].health_check.unhealthy_threshold: must be between "
                "1 and 1000, got 0",
                "test.yaml:11:34: upstreams[0].outlier.base_ejection_ms: must be between 1 and "
                "86400000, got 0",
                "test.yaml:11:54: upstreams[0].outlier.max_ejection_ms: must be between 1 and "
                "86400000, got 0",
                "test.yaml:12:27: upstreams[0].retry.max_retries: must not be negative (must be "
                "between 0 and 10, got -1)",
                "test.yaml:13:35: upstreams[0].overload.queue_timeout_ms: must be between 1 and "
                "86400000, got 0",
                "test.yaml:13:53: upstreams[0].overload.retry_after_s: must be between 1 and "
                "86400, got 0",
                "test.yaml:14:34: upstreams[0].affinity.idle_timeout_ms: must be between 1 and "
                "86400000, got 0",
                "test.yaml:16:30: discovery.dns_refresh_ms: must be between 1 and 86400000, got 0",
                "test.yaml:17:33: lifecycle.watch_interval_ms: must be between 1 and 86400000, "
                "got 0",
                "test.yaml:17:54: lifecycle.drain_timeout_ms: must be between 1 and 86400000, "
                "got 0"});
}

TEST(FleetConfig, RejectsUnknownPoliciesAndBadHashHeaders) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    load_balancing: { policy: random, hash_header: "x session" }
  - name: b
    protocol: http
    endpoints: ["h:1"]
    load_balancing: { policy: LEAST_REQUEST, hash_header: "" }
)"),
               {"test.yaml:6:31: upstreams[0].load_balancing.policy: unknown policy \"random\" "
                "(allowed: round_robin, least_request, load_aware)",
                "test.yaml:6:52: upstreams[0].load_balancing.hash_header: \"x session\" is not an "
                "HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
                "test.yaml:10:31: upstreams[1].load_balancing.policy: unknown policy "
                "\"LEAST_REQUEST\" (allowed: round_robin, least_request, load_aware)",
                "test.yaml:10:59: upstreams[1].load_balancing.hash_header: \"\" is not an HTTP "
                "header name (letters, digits and !#$%&'*+-.^_`|~)"});
}

TEST(FleetConfig, AHealthCheckVersionNeedsItsModel) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["h:1"], health_check: { version: "2" } }
  - { name: b, protocol: grpc, endpoints: ["h:1"], health_check: { model: "" } }
  - { name: c, protocol: http, endpoints: ["h:1"], health_check: { model: m, version: "" } }
)"),
               {"test.yaml:3:77: upstreams[0].health_check.version: version needs model (the "
                "model whose version must be ready)",
                "test.yaml:4:75: upstreams[1].health_check.model: leave model out to check the "
                "server only",
                "test.yaml:5:87: upstreams[2].health_check.version: leave version out to accept "
                "any version"});
}

TEST(FleetConfig, EjectionTimesMustNotDecrease) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    outlier: { base_ejection_ms: 5000, max_ejection_ms: 4000 }
  - name: b
    protocol: grpc
    endpoints: ["h:1"]
    outlier: { base_ejection_ms: 60000 }
  - name: c
    protocol: http
    endpoints: ["h:1"]
    outlier: { max_ejection_ms: 500 }
  - name: d
    protocol: http
    endpoints: ["h:1"]
    outlier: { base_ejection_ms: 60000, max_ejection_ms: x }
)"),
               {"test.yaml:6:57: upstreams[0].outlier.max_ejection_ms: must be at least "
                "base_ejection_ms (5000), got 4000",
                "test.yaml:10:34: upstreams[1].outlier.base_ejection_ms: must be at most "
                "max_ejection_ms (30000 by default), got 60000",
                "test.yaml:14:33: upstreams[2].outlier.max_ejection_ms: must be at least "
                "base_ejection_ms (1000 by default), got 500",
                "test.yaml:18:58: upstreams[3].outlier.max_ejection_ms: expected an integer, got "
                "a string"});
  auto equal = parse(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    outlier: { base_ejection_ms: 7, max_ejection_ms: 7 }
)"));
  EXPECT_TRUE(equal.ok()) << equal.status();
}

TEST(FleetConfig, AnEmptyHostsFileIsRefused) {
  expectErrors(withSections("discovery: { hosts_file: \"\" }\n"),
               {"test.yaml:4:26: discovery.hosts_file: leave hosts_file out to use the system "
                "resolver"});
}

}  // namespace
}  // namespace infergate::config
