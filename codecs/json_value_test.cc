#include "codecs/json_value.h"

#include <gtest/gtest.h>

namespace infergate::codecs {
namespace {

// A text cut off inside a number used to be read on into the stale bytes of the per-thread
// copy (what the previous, longer document left there), so the same bad body got different
// errors, or a different number, from one call to the next.
TEST(ParseJson, ATextCutOffInATokenReadsTheSameWhateverCameBefore) {
  const std::string digits = "[" + std::string(4000, '7') + "]";
  std::string first_error;
  for (int round = 0; round < 4; ++round) {
    (void)parseJson(round % 2 ? digits : std::string(4000, ' ') + "{}");  // pollute the copy
    auto r = parseJson(R"({"INPUT0": [1)");
    ASSERT_FALSE(r.ok());
    if (round == 0) first_error = std::string(messageOf(r.status()));
    EXPECT_EQ(messageOf(r.status()), first_error);
    auto n = parseJson("12");  // a whole number document ends at the text's end
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(n->toJson(), "12");
  }
}

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
