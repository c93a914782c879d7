#include "gateway/telemetry/access_log.h"
#include "gateway/telemetry/log.h"
#include "gateway/telemetry/recorder.h"
#include "gateway/telemetry/request_info.h"
#include "gateway/telemetry/request_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace infergate::gateway::telemetry {
namespace {

// ---- trace context ----

TEST(TraceContext, AcceptsAWellFormedParentAndDrawsTheGatewaysSpan) {
  TraceContext t = parseTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61");
  ASSERT_TRUE(t.valid());
  EXPECT_EQ(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t.parent_span_id, "00f067aa0ba902b7");
  EXPECT_EQ(t.flags, 1);
  EXPECT_EQ(t.tracestate, "congo=t61");
  ASSERT_EQ(t.span_id.size(), 16u);
  EXPECT_NE(t.span_id, t.parent_span_id);
  EXPECT_EQ(t.traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-" + t.span_id + "-01");
  // Two requests of one trace get two spans.
  EXPECT_NE(parseTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "").span_id,
            t.span_id);
}

TEST(TraceContext, RefusesMalformedValues) {
  for (std::string_view bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // forbidden version
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // v00 with more
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // separator
       }) {
    EXPECT_FALSE(parseTraceContext(bad, "").valid()) << bad;
  }
  // A later version may carry more fields after a dash; its unknown flag bits are dropped.
  TraceContext later = parseTraceContext(
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-extra", "");
  ASSERT_TRUE(later.valid());
  EXPECT_EQ(later.flags, 1);
}

TEST(RequestIds, AreUniqueHex) {
  std::string a = newRequestId(), b = newRequestId();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_NE(a, b);
}

// ---- operational log ----

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = logSettings();
    setLogSink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override {
    setLogSink(nullptr);
    setLogSettings(saved_);
  }
  LogSettingsView saved_;
  std::vector<std::string> lines_;
};

TEST_F(LogTest, JsonLinesCarryLevelEventAndFieldsInOrder) {
  setLogSettings(LogSettingsView{});
  logEvent(Level::kWarning, "reload", {{"ok", false}, {"error", "bad \"file\""}, {"generation", uint64_t{3}}});
  ASSERT_EQ(lines_.size(), 1u);
  const std::string& l = lines_[0];
  EXPECT_EQ(l.rfind("{\"time\":\"", 0), 0u) << l;
  EXPECT_NE(l.find("\"level\":\"warning\",\"event\":\"reload\",\"ok\":false,"
                   "\"error\":\"bad \\\"file\\\"\",\"generation\":3}\n"),
            std::string::npos)
      << l;
}

TEST_F(LogTest, LevelsFollowTheSettings) {
  LogSettingsView s;
  s.info = false;
  s.verbose_level = 0;
  setLogSettings(s);
  logEvent(Level::kInfo, "dropped");
  logEvent(Level::kVerbose, "dropped too");
  logEvent(Level::kError, "kept");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("\"event\":\"kept\""), std::string::npos);
  s.verbose_level = 2;
  setLogSettings(s);
  EXPECT_TRUE(logEnabled(Level::kVerbose));
  EXPECT_FALSE(logEnabled(Level::kInfo));
}

TEST_F(LogTest, TextLinesUseTritonsPrefixOrIso8601) {
  LogSettingsView s;
  s.json = false;
  setLogSettings(s);
  logEvent(Level::kInfo, "listening", {{"address", "127.0.0.1:8000"}, {"note", "two words"}});
  s.iso8601 = true;
  setLogSettings(s);
  logEvent(Level::kError, "x");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[0][0], 'I');
  std::string pid = std::to_string(::getpid());
  EXPECT_NE(lines_[0].find(" " + pid + " listening address=127.0.0.1:8000 note=\"two words\"\n"),
            std::string::npos)
      << lines_[0];
  EXPECT_EQ(lines_[1].substr(4, 1), "-");  // 2026-...
  EXPECT_NE(lines_[1].find("Z E " + pid + " x\n"), std::string::npos) << lines_[1];
}

// ---- access log ----

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AccessLog, WritesOneJsonLinePerRequestWithTheRequestsFacts) {
  RequestMetrics metrics;
  RequestInfo info;
  info.start = Clock::now();
  info.protocol = Protocol::kGrpc;
  info.request_id = "req-1";
  info.client_address = "127.0.0.1:5000";
  info.request_bytes = 10;
  info.response_bytes = 20;
  info.trace = parseTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "");
  metrics.started(info, metrics.series(SeriesKey{Protocol::kGrpc, UpstreamProtocol::kHttp,
                                                 "simple", "", "r1", "up"}));
  info.callStats()->endpoint = "127.0.0.1:9000";
  info.call->attempts = 1;
  info.call->shm_handoff = true;
  std::string line = AccessLog::format(AccessEntry{&info, "ModelInfer", "", 0}, true);
  for (std::string_view want :
       {"\"request_id\":\"req-1\"", "\"client\":\"127.0.0.1:5000\"", "\"protocol\":\"grpc\"",
        "\"endpoint\":\"ModelInfer\"", "\"model\":\"simple\"", "\"route\":\"r1\"",
        "\"upstream\":\"up\"", "\"upstream_endpoint\":\"127.0.0.1:9000\"", "\"status\":\"OK\"",
        "\"bytes_in\":10", "\"bytes_out\":20", "\"shm_handoff\":true",
        "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\""}) {
    EXPECT_NE(line.find(want), std::string::npos) << want << " in " << line;
  }
  std::string text = AccessLog::format(AccessEntry{&info, "ModelInfer", "", 0}, false);
  EXPECT_NE(text.find(" model=simple version=- route=r1 upstream=up "), std::string::npos) << text;
  RequestMetrics::finish(info, grpcOutcome(0), Clock::now());
}

TEST(AccessLog, SamplesSuccessesEvenlyAndKeepsEveryFailure) {
  char path[] = "/tmp/infergate-access-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  config::ObservabilityConfig::AccessLog c;
  c.enabled = true;
  c.path = path;
  c.sample_percent = 10;
  {
    auto log = AccessLog::open(c);
    ASSERT_TRUE(log.ok()) << log.status();
    RequestInfo info;
    info.start = Clock::now();
    for (int i = 0; i < 100; ++i) (*log)->record(AccessEntry{&info, "infer", "/v2/models/m/infer", 200});
    for (int i = 0; i < 5; ++i) (*log)->record(AccessEntry{&info, "infer", "/v2/models/m/infer", 503});
    // An answer cut short after its 200 head: a failure, kept, and marked.
    RequestInfo cut;
    cut.start = Clock::now();
    cut.cut = true;
    for (int i = 0; i < 3; ++i) (*log)->record(AccessEntry{&cut, "infer", "/v2/models/m/infer", 200});
  }  // the destructor writes out what is buffered
  std::string text = readFile(path);
  ::unlink(path);
  size_t lines = 0, failures = 0;
  for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; ++at) ++lines;
  for (size_t at = 0; (at = text.find("\"status\":\"503\"", at)) != std::string::npos; ++at) ++failures;
  EXPECT_EQ(failures, 5u);
  size_t cuts = 0;
  for (size_t at = 0; (at = text.find("\"cut\":true", at)) != std::string::npos; ++at) ++cuts;
  EXPECT_EQ(cuts, 3u);
  EXPECT_EQ(lines, 18u);  // 10 of the 100 successes, the 5 failures and the 3 cut answers
  EXPECT_NE(text.find("\"target\":\"/v2/models/m/infer\""), std::string::npos);
}

TEST(AccessLog, NamesTheModelAndRouteWithRequestMetricsOff) {
  char path[] = "/tmp/infergate-access-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  config::ObservabilityConfig::AccessLog c;
  c.enabled = true;
  c.path = path;
  {
    auto log = AccessLog::open(c);
    ASSERT_TRUE(log.ok()) << log.status();
    Recorder recorder(nullptr, std::move(*log));
    RequestInfo info;
    info.start = Clock::now();
    recorder.routed(info, SeriesKey{Protocol::kHttp, UpstreamProtocol::kGrpc, "resnet", "2",
                                    "vision", "triton"});
    recorder.finishHttp(info, 200, "infer", "/v2/models/resnet/versions/2/infer");
  }
  std::string text = readFile(path);
  ::unlink(path);
  EXPECT_NE(text.find("\"model\":\"resnet\",\"version\":\"2\",\"route\":\"vision\","
                      "\"upstream\":\"triton\""),
            std::string::npos)
      << text;
}

TEST(AccessLog, AFileThatCannotBeOpenedIsNamed) {
  config::ObservabilityConfig::AccessLog c;
  c.path = "/nonexistent-dir/access.log";
  auto log = AccessLog::open(c);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(std::string(log.status().message()).find("/nonexistent-dir/access.log"), std::string::npos);
}

}  // namespace
}  // namespace infergate::gateway::telemetry
