#include "gateway/settings_store.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "gateway/upstream/builtin/repository.h"

namespace infergate::gateway {
namespace {

constexpr char kDefaultTrace[] =
    R"({"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1","log_frequency":"0",)"
    R"("trace_file":"","trace_mode":"triton"})";
constexpr char kDefaultLog[] =
    R"({"log_file":"","log_info":true,"log_warning":true,"log_error":true,)"
    R"("log_verbose_level":0,"log_format":"default"})";

absl::StatusCode codeOf(const codecs::Status& s) { return s.code(); }

TEST(SettingsStore, ReportsTritonDefaultsAsJson) {
  SettingsStore store;
  EXPECT_EQ(store.traceJson("").value(), kDefaultTrace);
  EXPECT_EQ(store.logJson(), kDefaultLog);
}

TEST(SettingsStore, UpdatesGlobalTraceSettings) {
  SettingsStore store;
  auto out = store.updateTraceJson(
      "", R"({"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"10","trace_count":"5",)"
          R"("log_frequency":"2"})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"({"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"10","trace_count":"5",)"
                  R"("log_frequency":"2","trace_file":"","trace_mode":"triton"})");
  EXPECT_EQ(store.traceJson("").value(), *out);
  TraceSettings s = store.trace("").value();
  EXPECT_TRUE(s.timestamps);
  EXPECT_TRUE(s.tensors);
  EXPECT_EQ(s.rate, 10u);
}

TEST(SettingsStore, RefusesOffCombinedWithOtherLevels) {
  SettingsStore store;
  auto out = store.updateTraceJson("", R"({"trace_level":["OFF","TIMESTAMPS"]})");
  EXPECT_EQ(codeOf(out.status()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(out.status()), "Expect only one trace level 'OFF' is specified");
}

TEST(SettingsStore, IgnoresUnknownLevelStrings) {
  SettingsStore store;
  ASSERT_TRUE(store.updateTraceJson("", R"({"trace_level":["TIMESTAMPS"]})").ok());
  auto out = store.updateTraceJson("", R"({"trace_level":["LOUD"]})");
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(store.trace("").value().timestamps);  // unchanged
  ASSERT_TRUE(store.updateTraceJson("", R"({"trace_level":["OFF"]})").ok());
  EXPECT_FALSE(store.trace("").value().timestamps);
}

TEST(SettingsStore, RefusesOutOfRangeAndMalformedNumbers) {
  SettingsStore store;
  for (const char* body :
       {R"({"trace_rate":"-1"})", R"({"trace_rate":"4294967296"})", R"({"trace_count":"-2"})",
        R"({"trace_count":"2147483648"})", R"({"log_frequency":"x"})", R"({"trace_rate":""})"}) {
    auto out = store.updateTraceJson("", body);
    EXPECT_EQ(codeOf(out.status()), absl::StatusCode::kInvalidArgument) << body;
  }
  EXPECT_EQ(codecs::messageOf(store.updateTraceJson("", R"({"trace_count":"-2"})").status()),
            "Unable to parse 'trace_count'. Expecting value >= -1, got: -2");
  EXPECT_EQ(codecs::messageOf(store.updateTraceJson("", R"({"trace_rate":"abc"})").status()),
            "Unable to parse 'trace_rate', got: abc");
  EXPECT_EQ(store.traceJson("").value(), kDefaultTrace);  // nothing applied
}

TEST(SettingsStore, ReadsNumbersAsStoiDoes) {
  SettingsStore store;
  ASSERT_TRUE(store.updateTraceJson("", R"({"trace_rate":" 42abc","trace_count":"+7"})").ok());
  EXPECT_EQ(store.trace("").value().rate, 42u);
  EXPECT_EQ(store.trace("").value().count, 7);
}

TEST(SettingsStore, RefusesTraceFile) {
  SettingsStore store;
  auto out = store.updateTraceJson("", R"({"trace_file":"/tmp/x","trace_rate":"5"})");
  EXPECT_EQ(codeOf(out.status()), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(store.trace("").value().rate, 1000u);
  inference::TraceSettingRequest request;
  (*request.mutable_settings())["trace_file"].add_value("/tmp/x");
  EXPECT_EQ(codeOf(store.traceSetting(request).status()), absl::StatusCode::kUnimplemented);
}

TEST(SettingsStore, RefusesTypeErrorsAndBadJsonAsInvalidArgument) {
  SettingsStore store;
  for (const char* body : {R"({"trace_rate":5})", R"({"trace_level":"TIMESTAMPS"})",
                           R"({"trace_level":[1]})", "", "{", "[1]", "not json"}) {
    EXPECT_EQ(codeOf(store.updateTraceJson("", body).status()), absl::StatusCode::kInvalidArgument)
        << body;
  }
}

TEST(SettingsStore, ModelOverridesFollowGlobalForOtherKeys) {
  SettingsStore store;
  ASSERT_TRUE(store.updateTraceJson("m", R"({"trace_rate":"7"})").ok());
  ASSERT_TRUE(store.updateTraceJson("", R"({"trace_rate":"9","trace_count":"3"})").ok());
  TraceSettings m = store.trace("m").value();
  EXPECT_EQ(m.rate, 7u);  // its own
  EXPECT_EQ(m.count, 3);  // the global one
  EXPECT_EQ(store.trace("other").value().rate, 9u);
  // null clears the override: back to the global value.
  ASSERT_TRUE(store.updateTraceJson("m", R"({"trace_rate":null})").ok());
  EXPECT_EQ(store.trace("m").value().rate, 9u);
  // null on a global key: back to the start-up value.
  ASSERT_TRUE(store.updateTraceJson("", R"({"trace_rate":null})").ok());
  EXPECT_EQ(store.trace("").value().rate, 1000u);
}

TEST(SettingsStore, ProtoFormClearsWithAnEmptyEntryAndRefusesManyValues) {
  SettingsStore store;
  inference::TraceSettingRequest request;
  request.set_model_name("m");
  (*request.mutable_settings())["trace_level"].add_value("TENSORS");
  (*request.mutable_settings())["trace_count"].add_value("4");
  auto out = store.traceSetting(request);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->settings().at("trace_level").value(0), "TENSORS");
  EXPECT_EQ(out->settings().at("trace_count").value(0), "4");
  EXPECT_EQ(out->settings().at("trace_mode").value(0), "triton");
  EXPECT_EQ(out->settings().at("trace_file").value_size(), 1);

  inference::TraceSettingRequest clear;
  clear.set_model_name("m");
  (*clear.mutable_settings())["trace_level"];  // no values: clear
  out = store.traceSetting(clear);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->settings().at("trace_level").value(0), "OFF");
  EXPECT_EQ(out->settings().at("trace_count").value(0), "4");

  inference::TraceSettingRequest many;
  (*many.mutable_settings())["trace_rate"].add_value("1");
  (*many.mutable_settings())["trace_rate"].add_value("2");
  EXPECT_EQ(codecs::messageOf(store.traceSetting(many).status()),
            "expect only 1 value for 'trace_rate'");

  inference::TraceSettingRequest read;  // empty map: read only
  read.set_model_name("m");
  EXPECT_EQ(store.traceSetting(read)->settings().at("trace_count").value(0), "4");
}

TEST(SettingsStore, AsksTheRepositoryAboutModels) {
  auto repository = builtin::ModelRepository::createDemo({"simple", "sleep"});
  SettingsStore store(repositoryModelCheck(repository));
  EXPECT_TRUE(store.traceJson("simple").ok());
  auto unknown = store.updateTraceJson("nope", R"({"trace_rate":"1"})");
  EXPECT_EQ(codeOf(unknown.status()), absl::StatusCode::kNotFound);
  ASSERT_TRUE(repository->unload("sleep").ok());
  auto unready = store.traceJson("sleep");
  EXPECT_EQ(codeOf(unready.status()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(unready.status()), "Request for unknown model : sleep");
  inference::TraceSettingRequest request;
  request.set_model_name("nope");
  EXPECT_EQ(codeOf(store.traceSetting(request).status()), absl::StatusCode::kNotFound);
}

TEST(SettingsStore, UpdatesLogSettingsFromJson) {
  SettingsStore store;
  auto out = store.updateLogJson(
      R"({"log_info":false,"log_verbose_level":2,"log_format":"ISO8601","log_error":null,)"
      R"("log_file":null,"unknown":1})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"({"log_file":"","log_info":false,"log_warning":true,"log_error":true,)"
                  R"("log_verbose_level":2,"log_format":"ISO8601"})");
  EXPECT_EQ(store.log().verbose_level, 2u);
}

TEST(SettingsStore, RefusesLogFileBadFormatAndTypeErrors) {
  SettingsStore store;
  EXPECT_EQ(codeOf(store.updateLogJson(R"({"log_file":"/tmp/log"})").status()),
            absl::StatusCode::kUnimplemented);
  auto format = store.updateLogJson(R"({"log_info":false,"log_format":"json"})");
  EXPECT_EQ(codeOf(format.status()), absl::StatusCode::kUnavailable);  // HTTP: 503
  EXPECT_EQ(codecs::messageOf(format.status()), "invalid argument for log_format, got: json");
  for (const char* body : {R"({"log_info":"yes"})", R"({"log_verbose_level":-1})",
                           R"({"log_verbose_level":1.5})", R"({"log_format":3})", ""}) {
    EXPECT_EQ(codeOf(store.updateLogJson(body).status()), absl::StatusCode::kInvalidArgument)
        << body;
  }
  EXPECT_EQ(store.logJson(), kDefaultLog);  // nothing applied
}

TEST(SettingsStore, LogSettingsProtoEnforcesTypes) {
  SettingsStore store;
  inference::LogSettingsRequest request;
  (*request.mutable_settings())["log_warning"].set_bool_param(false);
  (*request.mutable_settings())["log_verbose_level"].set_uint32_param(3);
  auto out = store.logSettings(request);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->settings().at("log_warning").bool_param());
  EXPECT_EQ(out->settings().at("log_verbose_level").uint32_param(), 3u);
  EXPECT_EQ(out->settings().at("log_format").string_param(), "default");

  inference::LogSettingsRequest bad_type;
  (*bad_type.mutable_settings())["log_info"].set_string_param("true");
  EXPECT_EQ(codecs::messageOf(store.logSettings(bad_type).status()),
            "expect boolean for 'log_info'");
  inference::LogSettingsRequest bad_format;
  (*bad_format.mutable_settings())["log_format"].set_string_param("json");
  EXPECT_EQ(codeOf(store.logSettings(bad_format).status()), absl::StatusCode::kInvalidArgument);
  inference::LogSettingsRequest file;
  (*file.mutable_settings())["log_file"].set_string_param("/tmp/log");
  EXPECT_EQ(codeOf(store.logSettings(file).status()), absl::StatusCode::kUnimplemented);
}

TEST(SettingsStore, IsSafeFromManyThreads) {
  SettingsStore store;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < 200; ++i) {
        std::string model = "m" + std::to_string(i % 3);
        ASSERT_TRUE(
            store.updateTraceJson(model, R"({"trace_rate":")" + std::to_string(t) + R"("})").ok());
        ASSERT_TRUE(store.traceJson(model).ok());
        ASSERT_TRUE(store.updateLogJson(R"({"log_verbose_level":1})").ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(store.log().verbose_level, 1u);
}

}  // namespace
}  // namespace infergate::gateway
