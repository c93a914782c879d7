#include "codecs/json_value.h"

#include <gtest/gtest.h>

namespace infergate::codecs {
namespace {

TEST(JsonValue, ParsesNestedDocumentsExactly) {
  auto v = parseJson(R"({"parameters":{"config":"{}","n":18446744073709551615,"i":-3,"d":0.5,"b":true,"z":null},"a":[1,"x"]})");
  ASSERT_TRUE(v.ok()) << v.status();
  const JsonValue* p = v->find("parameters");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->find("config")->asString(), "{}");
  EXPECT_EQ(*p->find("n")->asUint(), 18446744073709551615ULL);
  EXPECT_EQ(*p->find("i")->asInt(), -3);
  EXPECT_FALSE(p->find("i")->asUint().has_value());
  EXPECT_EQ(p->find("d")->asDouble(), 0.5);
  EXPECT_TRUE(p->find("b")->asBool());
  EXPECT_TRUE(p->find("z")->isNull());
  EXPECT_EQ(v->find("a")->asArray().size(), 2u);
  EXPECT_EQ(v->toJson(), R"({"parameters":{"config":"{}","n":18446744073709551615,"i":-3,"d":0.5,"b":true,"z":null},"a":[1,"x"]})");
}

TEST(JsonValue, ParsesScalarDocuments) {
  EXPECT_EQ(parseJson("\"s\"")->asString(), "s");
  EXPECT_TRUE(parseJson("true")->asBool());
  EXPECT_EQ(*parseJson("7")->asUint(), 7u);
}

TEST(JsonValue, RejectsMalformedAndTrailingInput) {
  EXPECT_FALSE(parseJson("").ok());
  EXPECT_FALSE(parseJson("{").ok());
  EXPECT_FALSE(parseJson("{} x").ok());
  EXPECT_FALSE(parseJson(std::string(100, '[') + std::string(100, ']')).ok());
  auto r = parseJson("{\"a\":}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace infergate::codecs

namespace infergate::codecs {
namespace {

// Literals that only start like null / true / false are errors, never exceptions.
TEST(JsonValueLiterals, MalformedLiteralsAreErrors) {
  for (std::string_view text : {"not json", "[nul]", "{\"a\":nope}", "nulll", "[tru]", "fals"}) {
    StatusOr<JsonValue> v = parseJson(text);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  ASSERT_TRUE(parseJson("[null]").ok());
  EXPECT_TRUE(parseJson("[null]")->asArray()[0].isNull());
}

}  // namespace
}  // namespace infergate::codecs
