// The `observability` section: request metrics, the access log and the operational log;
// every key, its default, and every error with its position.

#include <gtest/gtest.h>

#include <string>

#include "config/config_loader.h"
#include "config/loader_test_helpers.h"

namespace infergate::config {
namespace {

using AccessFormat = ObservabilityConfig::AccessLog::Format;
using Level = ObservabilityConfig::Log::Level;
using LogFormat = ObservabilityConfig::Log::Format;

// Lines 1-3: listener, upstream, route; `rest` from line 4.
std::string withSection(std::string_view rest) {
  return "listeners: { http: { address: \"127.0.0.1:8000\" } }\n"
         "upstreams: [{ name: a, protocol: builtin }]\n"
         "routes: [{ match: { model: \"*\" }, upstream: a }]\n" +
         std::string(rest);
}

TEST(ObservabilityConfig, DefaultsMeasureEverythingAndLogNoRequest) {
  auto r = parse(withSection(""));
  ASSERT_TRUE(r.ok()) << r.status();
  const ObservabilityConfig& o = r->observability;
  EXPECT_TRUE(o.request_metrics);
  EXPECT_EQ(o.max_series, 2000u);
  EXPECT_FALSE(o.access_log.enabled);
  EXPECT_EQ(o.access_log.format, AccessFormat::kJson);
  EXPECT_EQ(o.access_log.path, "-");
  EXPECT_EQ(o.access_log.sample_percent, 100u);
  EXPECT_EQ(o.log.level, Level::kInfo);
  EXPECT_EQ(o.log.format, LogFormat::kJson);
}

TEST(ObservabilityConfig, ReadsEveryKey) {
  auto r = parse(withSection(R"(observability:
  request_metrics: false
  max_series: 50
  access_log: { enabled: true, format: text, path: /var/log/infergate.log, sample_percent: 5 }
  log: { level: verbose, format: text }
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  const ObservabilityConfig& o = r->observability;
  EXPECT_FALSE(o.request_metrics);
  EXPECT_EQ(o.max_series, 50u);
  EXPECT_TRUE(o.access_log.enabled);
  EXPECT_EQ(o.access_log.format, AccessFormat::kText);
  EXPECT_EQ(o.access_log.path, "/var/log/infergate.log");
  EXPECT_EQ(o.access_log.sample_percent, 5u);
  EXPECT_EQ(o.log.level, Level::kVerbose);
  EXPECT_EQ(o.log.format, LogFormat::kText);
}

TEST(ObservabilityConfig, RejectsBadValuesNamingThem) {
  expectErrors(withSection(R"(observability:
  max_series: 0
  access_log: { format: xml, path: "", sample_percent: 101, rotate: daily }
  log: { level: debug }
  tracing: on
)"),
               {"test.yaml:5:15: observability.max_series: must be between 1 and 1000000, got 0",
                "test.yaml:6:25: observability.access_log.format: unknown format \"xml\" "
                "(allowed: json, text)",
                "test.yaml:6:36: observability.access_log.path: an access log path must not "
                "be empty (\"-\" is standard output)",
                "test.yaml:6:56: observability.access_log.sample_percent: must be between 1 "
                "and 100, got 101",
                "test.yaml:6:61: observability.access_log.rotate: unknown key \"rotate\" "
                "(allowed: enabled, format, path, sample_percent)",
                "test.yaml:7:17: observability.log.level: unknown level \"debug\" (allowed: "
                "error, warning, info, verbose)",
                "test.yaml:8:3: observability.tracing: unknown key \"tracing\" (allowed: "
                "request_metrics, max_series, access_log, log)"});
}

}  // namespace
}  // namespace infergate::config
