// The shared-memory schema: the top-level `shm` section (client regions at the gateway)
// and each upstream's `handoff` section; every key, every default, every error with its
// position.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config_loader.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using HandoffKind = HandoffConfig::Kind;

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

void expectDefaultHandoff(const HandoffConfig& h) {
  EXPECT_FALSE(h.enabled);
  EXPECT_TRUE(h.passthrough);
  EXPECT_EQ(h.min_bytes, 65536u);
  EXPECT_EQ(h.pool_bytes, 268435456u);
  EXPECT_EQ(h.kind, HandoffKind::kSystem);
  EXPECT_EQ(h.device, 0);
  EXPECT_EQ(h.key_prefix, "/infergate_pool_");
}

// ---- defaults and full examples -------------------------------------------------------

TEST(ShmConfig, EveryKeyHasItsDefault) {
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["127.0.0.1:8101"], colocated: true }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  const ShmConfig& s = r->shm;
  EXPECT_FALSE(s.enabled);
  EXPECT_TRUE(s.allowed_key_prefixes.empty());
  EXPECT_TRUE(s.cuda);
  EXPECT_EQ(s.max_regions, 1024u);
  EXPECT_TRUE(s.http);
  EXPECT_TRUE(s.grpc);
  EXPECT_EQ(s.where.line, 0);  // not written
  expectDefaultHandoff(r->upstreams[0].handoff);
}

TEST(ShmConfig, EmptySectionsKeepTheDefaultsButAHandoffSectionTurnsItOn) {
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["127.0.0.1:8101"], colocated: true, handoff: {} }
)",
                               "shm: {}\n"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->shm.enabled);
  EXPECT_TRUE(r->shm.http);
  EXPECT_EQ(r->shm.max_regions, 1024u);
  EXPECT_EQ(formatLocation(r->shm.where), "test.yaml:5:6");
  const HandoffConfig& h = r->upstreams[0].handoff;
  EXPECT_TRUE(h.enabled);
  EXPECT_TRUE(h.passthrough);
  EXPECT_EQ(h.min_bytes, 65536u);
  EXPECT_EQ(h.pool_bytes, 268435456u);
  EXPECT_EQ(h.key_prefix, "/infergate_pool_");
  EXPECT_EQ(formatLocation(h.where), "test.yaml:3:89");
}

TEST(ShmConfig, ReadsTheFullExample) {
  auto r = parse(R"(listeners:
  http: { address: "127.0.0.1:8000" }
  grpc: { address: "127.0.0.1:8001" }
shm:
  enabled: true
  allowed_key_prefixes: ["/infergate_", "/input"]
  cuda: true
  max_regions: 1024
  listeners: [http, grpc]
upstreams:
  - name: local
    protocol: grpc
    endpoints: ["127.0.0.1:8101"]
    colocated: true
    handoff: { min_bytes: 65536, pool_bytes: 268435456, kind: system, passthrough: true,
               key_prefix: "/infergate_pool_", device: 0, enabled: true }
  - name: gpu
    protocol: http
    endpoints: ["unix:/run/triton.sock", "10.0.0.2:8000"]
    colocated: true
    handoff:
      enabled: true
      passthrough: false
      min_bytes: 1
      pool_bytes: 0
      kind: cuda
      device: 3
      key_prefix: /gw_pool
routes: [{ match: { model: "*" }, upstream: local }]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  const ShmConfig& s = r->shm;
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.allowed_key_prefixes, (std::vector<std::string>{"/infergate_", "/input"}));
  EXPECT_TRUE(s.cuda);
  EXPECT_EQ(s.max_regions, 1024u);
  EXPECT_TRUE(s.http);
  EXPECT_TRUE(s.grpc);
  EXPECT_EQ(formatLocation(s.where), "test.yaml:5:3");
  const HandoffConfig& local = r->upstreams[0].handoff;
  EXPECT_TRUE(local.enabled);
  EXPECT_TRUE(local.passthrough);
  EXPECT_EQ(local.min_bytes, 65536u);
  EXPECT_EQ(local.pool_bytes, 268435456u);
  EXPECT_EQ(local.kind, HandoffKind::kSystem);
  EXPECT_EQ(local.device, 0);
  EXPECT_EQ(local.key_prefix, "/infergate_pool_");
  EXPECT_EQ(formatLocation(local.where), "test.yaml:15:14");
  const HandoffConfig& gpu = r->upstreams[1].handoff;
  EXPECT_TRUE(gpu.enabled);
  EXPECT_FALSE(gpu.passthrough);
  EXPECT_EQ(gpu.min_bytes, 1u);
  EXPECT_EQ(gpu.pool_bytes, 0u);  // pass-through only
  EXPECT_EQ(gpu.kind, HandoffKind::kCuda);
  EXPECT_EQ(gpu.device, 3);
  EXPECT_EQ(gpu.key_prefix, "/gw_pool");
  EXPECT_EQ(formatLocation(gpu.where), "test.yaml:22:7");
}

TEST(ShmConfig, ReadsOtherValuesOfEveryKey) {
  auto r = parse(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["127.0.0.1:8101"]
    colocated: true
    handoff: { enabled: false, min_bytes: 2147483647, pool_bytes: 1099511627776, device: 1023 }
)",
                               R"(shm:
  enabled: false
  allowed_key_prefixes: [input, "//infergate_", "/tritonx", "/triton_python_backend_shm_regioX"]
  cuda: false
  max_regions: 1000000
  listeners: [grpc]
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  // Disabled, the rest is still read (and checked): turning it on is one edit.
  const ShmConfig& s = r->shm;
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.allowed_key_prefixes,
            (std::vector<std::string>{"input", "//infergate_", "/tritonx",
                                      "/triton_python_backend_shm_regioX"}));
  EXPECT_FALSE(s.cuda);
  EXPECT_EQ(s.max_regions, 1000000u);
  EXPECT_FALSE(s.http);
  EXPECT_TRUE(s.grpc);
  const HandoffConfig& h = r->upstreams[0].handoff;
  EXPECT_FALSE(h.enabled);  // written, but off
  EXPECT_EQ(h.min_bytes, 2147483647u);
  EXPECT_EQ(h.pool_bytes, 1099511627776u);
  EXPECT_EQ(h.device, 1023);
  EXPECT_NE(formatLocation(h.where), "");

  auto least = parse(withSections("shm: { max_regions: 1, listeners: [] }\n"));
  ASSERT_TRUE(least.ok()) << least.status();
  EXPECT_EQ(least->shm.max_regions, 1u);
  EXPECT_FALSE(least->shm.http);  // an empty list: registration from no listener
  EXPECT_FALSE(least->shm.grpc);
  auto http_only = parse(withSections("shm: { listeners: [http] }\n"));
  ASSERT_TRUE(http_only.ok()) << http_only.status();
  EXPECT_TRUE(http_only->shm.http);
  EXPECT_FALSE(http_only->shm.grpc);
}

TEST(ShmConfig, AcceptsKeyPrefixesAtTheEdges) {
  std::string longest = "/" + std::string(199, 'p');
  auto r = parse(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { key_prefix: "/" } }
  - { name: b, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { key_prefix: ")" +
                                   longest + R"(" } }
  - { name: c, protocol: http, endpoints: ["h:1"], colocated: true,
      handoff: { key_prefix: /triton_pool_, pool_bytes: 65536 } }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->upstreams[0].handoff.key_prefix, "/");
  EXPECT_EQ(r->upstreams[1].handoff.key_prefix, longest);
  EXPECT_EQ(r->upstreams[2].handoff.key_prefix, "/triton_pool_");
  EXPECT_EQ(r->upstreams[2].handoff.pool_bytes, 65536u);  // equal to min_bytes is enough
}

// ---- shm errors -----------------------------------------------------------------------

TEST(ShmConfig, RejectsUnknownKeysAndWrongTypes) {
  expectErrors(withSections(R"(shm:
  enabled: "true"
  allowed_key_prefixes: /infergate_
  cuda: 1
  max_regions: "10"
  listeners: http
  register: true
)"),
               {"test.yaml:5:12: shm.enabled: expected a boolean, got a string",
                "test.yaml:6:25: shm.allowed_key_prefixes: expected a sequence, got a string",
                "test.yaml:7:9: shm.cuda: expected a boolean, got an integer",
                "test.yaml:8:16: shm.max_regions: expected an integer, got a string",
                "test.yaml:9:14: shm.listeners: expected a sequence, got a string",
                "test.yaml:10:3: shm.register: unknown key \"register\" (allowed: enabled, "
                "allowed_key_prefixes, cuda, max_regions, listeners)"});
  expectErrors(withSections("shm: [enabled]\n"),
               {"test.yaml:4:6: shm: expected a mapping, got a sequence"});
  expectErrors(withSections("shm: { allowed_key_prefixes: [[a]], listeners: [{ http: 1 }] }\n"),
               {"test.yaml:4:31: shm.allowed_key_prefixes[0]: expected a string, got a sequence",
                "test.yaml:4:49: shm.listeners[0]: expected a string, got a mapping"});
}

TEST(ShmConfig, RejectsBadKeyPrefixesNamingTheReason) {
  expectErrors(withSections(R"(shm:
  enabled: true
  allowed_key_prefixes:
    - ""
    - "///"
    - "/input/x"
    - "a/b"
    - "/triton"
    - "triton_python_backend_shm_region"
    - "//triton_python_backend_shm_region_7"
    - "/input"
    - "/input"
)"),
               {"test.yaml:7:7: shm.allowed_key_prefixes[0]: a key prefix must not be empty: it "
                "would admit every key",
                "test.yaml:8:7: shm.allowed_key_prefixes[1]: \"///\" is only slashes: it would "
                "admit every key",
                "test.yaml:9:7: shm.allowed_key_prefixes[2]: \"/input/x\" has a '/' after its "
                "leading ones; a shared-memory key has none there",
                "test.yaml:10:7: shm.allowed_key_prefixes[3]: \"a/b\" has a '/' after its leading "
                "ones; a shared-memory key has none there",
                "test.yaml:11:7: shm.allowed_key_prefixes[4]: \"/triton\" would admit keys "
                "reserved by Triton (\"/triton_python_backend_shm_region...\", the python "
                "backend's own regions)",
                "test.yaml:12:7: shm.allowed_key_prefixes[5]: \"triton_python_backend_shm_region\" "
                "would admit keys reserved by Triton (\"/triton_python_backend_shm_region...\", "
                "the python backend's own regions)",
                "test.yaml:13:7: shm.allowed_key_prefixes[6]: "
                "\"//triton_python_backend_shm_region_7\" would admit keys reserved by Triton "
                "(\"/triton_python_backend_shm_region...\", the python backend's own regions)",
                "test.yaml:15:7: shm.allowed_key_prefixes[8]: key prefix \"/input\" is listed "
                "twice"});
}

TEST(ShmConfig, ChecksKeyPrefixesEvenWhenDisabled) {
  expectOnlyError(withSections("shm: { enabled: false, allowed_key_prefixes: [\"/\"] }\n"),
                  "test.yaml:4:47: shm.allowed_key_prefixes[0]: ", "is only slashes");
}

TEST(ShmConfig, RejectsMaxRegionsOutOfRange) {
  expectOnlyError(withSections("shm: { max_regions: 0 }\n"), "test.yaml:4:21: shm.max_regions: ",
                  "must be between 1 and 1000000, got 0");
  expectOnlyError(withSections("shm: { max_regions: 1000001 }\n"),
                  "test.yaml:4:21: shm.max_regions: ",
                  "must be between 1 and 1000000, got 1000001");
  expectOnlyError(withSections("shm: { max_regions: -1 }\n"), "test.yaml:4:21: shm.max_regions: ",
                  "must not be negative");
}

TEST(ShmConfig, RejectsUnknownAndRepeatedListeners) {
  expectErrors(withSections("shm: { listeners: [http, metrics, grpc, http, grpc, HTTP] }\n"),
               {"test.yaml:4:26: shm.listeners[1]: unknown listener \"metrics\" (allowed: http, "
                "grpc)",
                "test.yaml:4:41: shm.listeners[3]: listener \"http\" is listed twice",
                "test.yaml:4:47: shm.listeners[4]: listener \"grpc\" is listed twice",
                "test.yaml:4:53: shm.listeners[5]: unknown listener \"HTTP\" (allowed: http, "
                "grpc)"});
}

// ---- handoff errors -------------------------------------------------------------------

TEST(ShmConfig, HandoffNeedsAColocatedGrpcOrHttpUpstream) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["h:1"], handoff: {} }
  - { name: b, protocol: http, endpoints: ["h:1"], colocated: false, handoff: { enabled: false } }
  - { name: c, protocol: builtin, handoff: {} }
)"),
               {"test.yaml:3:61: upstreams[0].handoff: handoff needs colocated: true (the first "
                "endpoint on this host, whose memory the gateway shares)",
                "test.yaml:4:79: upstreams[1].handoff: handoff needs colocated: true (the first "
                "endpoint on this host, whose memory the gateway shares)",
                "test.yaml:5:44: upstreams[2].handoff: handoff applies to grpc and http upstreams "
                "only"});
}

TEST(ShmConfig, ARefusedColocatedIsNotReportedTwice) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["h:1"], colocated: "yes", handoff: {} }
)"),
               {"test.yaml:3:63: upstreams[0].colocated: expected a boolean, got a string"});
}

TEST(ShmConfig, RejectsUnknownHandoffKeysAndWrongTypes) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    colocated: true
    handoff:
      enabled: "false"
      passthrough: yes
      min_bytes: 1.5
      pool_bytes: "0"
      kind: [system]
      device: "0"
      key_prefix: { a: b }
      pool: 1
  - { name: b, protocol: http, endpoints: ["h:1"], colocated: true, handoff: true }
)"),
               {"test.yaml:8:16: upstreams[0].handoff.enabled: expected a boolean, got a string",
                "test.yaml:9:20: upstreams[0].handoff.passthrough: expected a boolean, got a "
                "string",
                "test.yaml:10:18: upstreams[0].handoff.min_bytes: expected an integer, got a "
                "float",
                "test.yaml:11:19: upstreams[0].handoff.pool_bytes: expected an integer, got a "
                "string",
                "test.yaml:12:13: upstreams[0].handoff.kind: expected a string, got a sequence",
                "test.yaml:13:15: upstreams[0].handoff.device: expected an integer, got a string",
                "test.yaml:14:19: upstreams[0].handoff.key_prefix: expected a string, got a "
                "mapping",
                "test.yaml:15:7: upstreams[0].handoff.pool: unknown key \"pool\" (allowed: "
                "enabled, passthrough, min_bytes, pool_bytes, kind, device, key_prefix)",
                "test.yaml:16:78: upstreams[1].handoff: expected a mapping, got a boolean"});
}

TEST(ShmConfig, RejectsHandoffValuesOutOfRange) {
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    colocated: true
    handoff:
      min_bytes: 0
      pool_bytes: 1099511627777
      kind: gpu
      device: -1
  - { name: b, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { device: 1024 } }
)"),
               {"test.yaml:8:18: upstreams[0].handoff.min_bytes: must be between 1 and "
                "2147483647, got 0",
                "test.yaml:9:19: upstreams[0].handoff.pool_bytes: must be between 0 and "
                "1099511627776, got 1099511627777",
                "test.yaml:10:13: upstreams[0].handoff.kind: unknown kind \"gpu\" (allowed: "
                "system, cuda)",
                "test.yaml:11:15: upstreams[0].handoff.device: must not be negative (must be "
                "between 0 and 1023, got -1)",
                "test.yaml:12:88: upstreams[1].handoff.device: must be between 0 and 1023, got "
                "1024"});
}

TEST(ShmConfig, APoolMustHoldTheSmallestTensorItTakes) {
  expectErrors(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["h:1"], colocated: true,
      handoff: { min_bytes: 4096, pool_bytes: 4095 } }
  - { name: b, protocol: grpc, endpoints: ["h:1"], colocated: true,
      handoff: { pool_bytes: 1000 } }
  - { name: c, protocol: http, endpoints: ["h:1"], colocated: true,
      handoff: { min_bytes: 300000000 } }
  - { name: d, protocol: http, endpoints: ["h:1"], colocated: true,
      handoff: { min_bytes: 300000000, pool_bytes: 0 } }
)"),
               {"test.yaml:4:47: upstreams[0].handoff.pool_bytes: must be 0 (no pool) or at "
                "least min_bytes (4096), got 4095",
                "test.yaml:6:30: upstreams[1].handoff.pool_bytes: must be 0 (no pool) or at "
                "least min_bytes (65536 by default), got 1000",
                "test.yaml:8:29: upstreams[2].handoff.min_bytes: must be at most pool_bytes "
                "(268435456 by default), got 300000000; or set pool_bytes: 0"});
}

TEST(ShmConfig, RejectsBadPoolKeyPrefixesNamingTheReason) {
  std::string too_long = "/" + std::string(200, 'p');
  expectErrors(withUpstreams(R"(upstreams:
  - name: a
    protocol: grpc
    endpoints: ["h:1"]
    colocated: true
    handoff: { key_prefix: infergate_pool_ }
  - { name: b, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { key_prefix: /a/b } }
  - { name: c, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { key_prefix: "//x" } }
  - { name: d, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { key_prefix: "" } }
  - { name: e, protocol: grpc, endpoints: ["h:1"], colocated: true,
      handoff: { key_prefix: /triton_python_backend_shm_region_pool } }
  - { name: f, protocol: grpc, endpoints: ["h:1"], colocated: true,
      handoff: { key_prefix: )" + too_long + R"( } }
)"),
               {"test.yaml:7:28: upstreams[0].handoff.key_prefix: \"infergate_pool_\" must start "
                "with '/' (a POSIX shared-memory name)",
                "test.yaml:8:92: upstreams[1].handoff.key_prefix: \"/a/b\" has a '/' after the "
                "first; a shared-memory name has one",
                "test.yaml:9:92: upstreams[2].handoff.key_prefix: \"//x\" has a '/' after the "
                "first; a shared-memory name has one",
                "test.yaml:10:92: upstreams[3].handoff.key_prefix: \"\" must start with '/' (a "
                "POSIX shared-memory name)",
                "test.yaml:12:30: upstreams[4].handoff.key_prefix: "
                "\"/triton_python_backend_shm_region_pool\" starts with a prefix reserved by "
                "Triton (\"/triton_python_backend_shm_region\", the python backend's own "
                "regions)",
                "test.yaml:14:30: upstreams[5].handoff.key_prefix: is 201 characters long; at "
                "most 200 (the pool adds its own suffix)"});
}

TEST(ShmConfig, EveryErrorOfBothSectionsInOnePass) {
  // Errors in shm and in two upstreams' handoff sections come back together, in file
  // order, each naming its key and line.
  std::vector<std::string> lines = errorLines(withUpstreams(R"(upstreams:
  - { name: a, protocol: grpc, endpoints: ["h:1"], colocated: true, handoff: { kind: x } }
  - { name: b, protocol: grpc, endpoints: ["h:1"], handoff: { min_bytes: 0 } }
)",
                                                            "shm: { max_regions: 0 }\n"));
  ASSERT_EQ(lines.size(), 4u) << joined(lines);
  EXPECT_EQ(lines[0].substr(0, 38), "test.yaml:3:86: upstreams[0].handoff.k");
  EXPECT_EQ(lines[1].substr(0, 31), "test.yaml:4:61: upstreams[1].ha");
  EXPECT_NE(lines[1].find("colocated"), std::string::npos);
  EXPECT_NE(lines[2].find("upstreams[1].handoff.min_bytes"), std::string::npos);
  EXPECT_EQ(lines[3].substr(0, 33), "test.yaml:6:21: shm.max_regions: ");
}

}  // namespace
}  // namespace infergate::config
