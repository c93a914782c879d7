#include "gateway/frontends/http_routes.h"

#include <gtest/gtest.h>

namespace infergate::gateway::frontends {
namespace {

TEST(HttpRoutes, MatchesEveryTritonRoute) {
  struct Case {
    std::string_view method, path;
    HttpEndpoint endpoint;
    std::string_view model, version, region;
  };
  const Case cases[] = {
      {"GET", "/v2/health/live", HttpEndpoint::kHealthLive, "", "", ""},
      {"GET", "/v2/health/ready", HttpEndpoint::kHealthReady, "", "", ""},
      {"GET", "/v2", HttpEndpoint::kServerMetadata, "", "", ""},
      {"GET", "/v2/models/simple", HttpEndpoint::kModelMetadata, "simple", "", ""},
      {"GET", "/v2/models/simple/versions/3", HttpEndpoint::kModelMetadata, "simple", "3", ""},
      {"GET", "/v2/models/simple/ready", HttpEndpoint::kModelReady, "simple", "", ""},
      {"POST", "/v2/models/simple/infer", HttpEndpoint::kModelInfer, "simple", "", ""},
      {"POST", "/v2/models/simple/versions/12/infer", HttpEndpoint::kModelInfer, "simple", "12", ""},
      {"POST", "/v2/models/llm/generate", HttpEndpoint::kModelGenerate, "llm", "", ""},
      {"POST", "/v2/models/llm/generate_stream", HttpEndpoint::kModelGenerateStream, "llm", "", ""},
      {"GET", "/v2/models/simple/config", HttpEndpoint::kModelConfig, "simple", "", ""},
      {"GET", "/v2/models/simple/versions/1/stats", HttpEndpoint::kModelStats, "simple", "1", ""},
      {"GET", "/v2/models/stats", HttpEndpoint::kAllModelStats, "", "", ""},
      {"POST", "/v2/models/simple/trace/setting", HttpEndpoint::kModelTraceSetting, "simple", "", ""},
      {"GET", "/v2/trace/setting", HttpEndpoint::kTraceSetting, "", "", ""},
      {"POST", "/v2/logging", HttpEndpoint::kLogging, "", "", ""},
      {"POST", "/v2/repository/index", HttpEndpoint::kRepositoryIndex, "", "", ""},
      {"POST", "/v2/repository/models/simple/load", HttpEndpoint::kRepositoryLoad, "simple", "", ""},
      {"POST", "/v2/repository/models/simple/unload", HttpEndpoint::kRepositoryUnload, "simple", "", ""},
      {"GET", "/v2/systemsharedmemory/status", HttpEndpoint::kSystemShmStatus, "", "", ""},
      {"GET", "/v2/systemsharedmemory/region/r0/status", HttpEndpoint::kSystemShmStatus, "", "", "r0"},
      {"POST", "/v2/systemsharedmemory/region/r0/register", HttpEndpoint::kSystemShmRegister, "", "", "r0"},
      {"POST", "/v2/systemsharedmemory/unregister", HttpEndpoint::kSystemShmUnregister, "", "", ""},
      {"POST", "/v2/cudasharedmemory/region/c/register", HttpEndpoint::kCudaShmRegister, "", "", "c"},
      {"GET", "/v2/cudasharedmemory/status", HttpEndpoint::kCudaShmStatus, "", "", ""},
      {"POST", "/v2/cudasharedmemory/region/c/unregister", HttpEndpoint::kCudaShmUnregister, "", "", "c"},
  };
  for (const Case& c : cases) {
    HttpRoute r = matchHttpRoute(c.method, c.path);
    EXPECT_EQ(r.endpoint, c.endpoint) << c.path;
    EXPECT_TRUE(r.method_allowed) << c.method << " " << c.path;
    EXPECT_EQ(r.model, c.model) << c.path;
    EXPECT_EQ(r.version, c.version) << c.path;
    EXPECT_EQ(r.region, c.region) << c.path;
  }
}

TEST(HttpRoutes, RefusesWhatTritonDoesNotRoute) {
  const char* not_found[] = {
      "/v2/", "/v2/health/live/", "/v2/models/simple/", "/v2/models/simple/versions/v10",
      "/v2/models/simple/versions/1/trace/setting", "/v2/models//infer", "/v3",
      "/v2/models/simple/versions/-1", "/v2/models/simple/explain", "/", "",
      "/v2/systemsharedmemory/region/r/x", "/v2/repository/models/m/reload",
  };
  for (const char* path : not_found) {
    EXPECT_EQ(matchHttpRoute("GET", path).endpoint, HttpEndpoint::kNotFound) << path;
  }
}

TEST(HttpRoutes, KeepsNamesVerbatimAndIgnoresNothingElse) {
  HttpRoute r = matchHttpRoute("POST", "/v2/models/my%20model/infer");
  EXPECT_EQ(r.endpoint, HttpEndpoint::kModelInfer);
  EXPECT_EQ(r.model, "my%20model");  // never percent-decoded
  EXPECT_EQ(matchHttpRoute("GET", "/v2/models/stats/ready").model, "stats");
}

TEST(HttpRoutes, FlagsWrongMethods) {
  EXPECT_FALSE(matchHttpRoute("GET", "/v2/models/m/infer").method_allowed);
  EXPECT_FALSE(matchHttpRoute("HEAD", "/v2/health/live").method_allowed);
  EXPECT_FALSE(matchHttpRoute("POST", "/v2").method_allowed);
  EXPECT_FALSE(matchHttpRoute("GET", "/v2/systemsharedmemory/region/r/register").method_allowed);
  EXPECT_EQ(matchHttpRoute("GET", "/v2/models/m/infer").endpoint, HttpEndpoint::kModelInfer);
}

TEST(HttpRoutes, KeepsTheRepositoryNameSegment) {
  HttpRoute r = matchHttpRoute("POST", "/v2/repository/other/models/m/load");
  EXPECT_EQ(r.endpoint, HttpEndpoint::kRepositoryLoad);
  EXPECT_EQ(r.repository, "other");
  EXPECT_EQ(matchHttpRoute("POST", "/v2/repository/other/index").repository, "other");
}

TEST(HttpRoutes, NamesRestrictedApiCategories) {
  EXPECT_EQ(endpointCategory(HttpEndpoint::kModelReady), "health");
  EXPECT_EQ(endpointCategory(HttpEndpoint::kModelGenerate), "inference");
  EXPECT_EQ(endpointCategory(HttpEndpoint::kCudaShmStatus), "shared-memory");
  EXPECT_EQ(endpointCategory(HttpEndpoint::kNotFound), "");
}

TEST(HttpRoutes, NamesEndpointsForMetrics) {
  EXPECT_EQ(endpointName(matchHttpRoute("POST", "/v2/models/m/infer").endpoint), "infer");
  EXPECT_EQ(endpointName(matchHttpRoute("GET", "/v2/models/m/versions/1").endpoint), "model_metadata");
  EXPECT_EQ(endpointName(matchHttpRoute("GET", "/v2/models/stats").endpoint), "statistics");
  EXPECT_EQ(endpointName(matchHttpRoute("GET", "/nope").endpoint), "not_found");
}

}  // namespace
}  // namespace infergate::gateway::frontends
