#include "config/validate_command.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace infergate::config {
namespace {

struct Outcome {
  int code;
  std::string out, err;
};

Outcome run(std::vector<std::string_view> args) {
  std::ostringstream out, err;
  int code = runValidateCommand(args, out, err);
  return {code, out.str(), err.str()};
}

std::string writeTemp(std::string_view name, std::string_view text) {
  std::string path = ::testing::TempDir() + std::string(name);
  std::ofstream(path) << text;
  return path;
}

const std::string kDemo = INFERGATE_SOURCE_DIR "/deploy/examples/demo.yaml";

TEST(ValidateCommand, TheDemoExampleValidates) {
  Outcome r = run({kDemo});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, kDemo + ": OK\n"
                   "listeners: http 127.0.0.1:8000, grpc 127.0.0.1:8001, metrics 127.0.0.1:8002; "
                   "workers: one per usable CPU; upstreams: 1 (demo: builtin); routes: 1 (* -> demo); "
                   "readiness: all_routes; forward: traceparent, tracestate, "
                   "triton-grpc-protocol-*\n");
}

TEST(ValidateCommand, PrintsEveryErrorOnePerLineAndExitsOne) {
  std::string path = writeTemp("validate_command_test_bad.yaml", R"(listeners:
  http: { address: "0.0.0.0:8000" }
  grpc: { address: "0.0.0.0:8000" }
workers: -2
upstreams: [{ name: demo, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: triton }]
)");
  Outcome r = run({path});
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            path + ":3:20: listeners.grpc.address: address \"0.0.0.0:8000\" clashes with "
                   "listeners.http (\"0.0.0.0:8000\" at " + path + ":2:20)\n" +
            path + ":4:10: workers: must not be negative (must be between 0 and 1024, got -2)\n" +
            path + ":6:45: routes[0].upstream: upstream \"triton\" is not defined (defined: demo)\n");
}

TEST(ValidateCommand, AMissingFileExitsOne) {
  Outcome r = run({"/nonexistent/x.yaml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "cannot read /nonexistent/x.yaml: No such file or directory\n");
}

TEST(ValidateCommand, UsageErrorsExitTwo) {
  Outcome none = run({});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("usage: infergate validate FILE"), std::string::npos);
  EXPECT_EQ(run({kDemo, kDemo}).code, 2);
  Outcome option = run({"--strict", kDemo});
  EXPECT_EQ(option.code, 2);
  EXPECT_NE(option.err.find("unknown option '--strict'"), std::string::npos);
}

TEST(ValidateCommand, HelpExitsZero) {
  Outcome r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: infergate validate FILE"), std::string::npos);
}

TEST(ValidateCommand, SummaryShortensLongLists) {
  std::string path = writeTemp("validate_command_test_many.yaml", R"(listeners: { grpc: { address: "unix:/tmp/ig.sock" } }
workers: 3
busy_poll_us: 50
upstreams: [{ name: a, protocol: builtin }]
routes:
  - { match: { model: m1 }, upstream: a }
  - { match: { model: m2 }, upstream: a }
  - { match: { model: m3 }, upstream: a }
  - { match: { model: m4 }, upstream: a }
  - { match: { model: "*" }, upstream: a }
)");
  Outcome r = run({path});
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, path + ": OK\nlisteners: grpc unix:/tmp/ig.sock; workers: 3, polling 50 us after "
                          "work; upstreams: 1 "
                          "(a: builtin); routes: 5 (m1 -> a; m2 -> a; m3 -> a; m4 -> a; ...); "
                          "readiness: all_routes; forward: traceparent, tracestate, "
                          "triton-grpc-protocol-*\n");
}

TEST(ValidateCommand, SummaryShowsRemoteUpstreamsSplitsRewritesAndTheRest) {
  std::string path = writeTemp("validate_command_test_routing.yaml", R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams:
  - { name: a, protocol: grpc, endpoints: ["10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"] }
  - { name: b, protocol: http, endpoints: ["unix:/run/b.sock"], http_format: json }
  - { name: demo, protocol: builtin }
routes:
  - match: { model: resnet50 }
    upstream: a
  - match: { model_prefix: "llm-", version: "2", headers: { x-tenant: beta, x-tier: gold } }
    split: [ { upstream: a, weight: 90 }, { upstream: b, weight: 10 } ]
    rewrite: { model: llm-v2 }
  - match: { model: bert }
    upstream: b
    rewrite: { model: bert-large, version: "3" }
    mirror: demo
    timeout_ms: 5000
  - match: { model: "*" }
    upstream: a
forward: { headers: [X-Tenant, "x-trace-*"] }
readiness: { policy: any_route }
)");
  Outcome r = run({path});
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, path + ": OK\nlisteners: http 127.0.0.1:8000; workers: one per usable CPU; "
                          "upstreams: 3 (a: grpc 10.0.0.1:8001 +2, b: http unix:/run/b.sock (json), "
                          "demo: builtin); routes: 4 (resnet50 -> a; llm-* v2 [x-tenant=beta, "
                          "x-tier=gold] -> a 90%, b 10% rewrite llm-v2; bert -> b rewrite "
                          "bert-large v3 mirror demo timeout 5000ms; * -> a); readiness: "
                          "any_route; forward: x-tenant, x-trace-*\n");
}

TEST(ValidateCommand, SummarySaysWhenNothingIsForwarded) {
  std::string path = writeTemp("validate_command_test_forward.yaml", R"(listeners: { http: { address: "127.0.0.1:8000" } }
upstreams: [{ name: a, protocol: builtin }]
routes: [{ match: { model: "*" }, upstream: a }]
forward: { headers: [] }
readiness: { policy: always }
)");
  Outcome r = run({path});
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, path + ": OK\nlisteners: http 127.0.0.1:8000; workers: one per usable CPU; "
                          "upstreams: 1 (a: builtin); routes: 1 (* -> a); readiness: always; "
                          "forward: none\n");
}

}  // namespace
}  // namespace infergate::config
