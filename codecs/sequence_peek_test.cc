#include "codecs/sequence_peek.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codecs/json_request_decoder.h"

namespace infergate::codecs {
namespace {

// What a failing expectation prints: the key and the flags.
std::string describe(const SequenceRef& ref) {
  std::string out = ref.present() ? ref.key() : "none";
  if (ref.start) out += " start";
  if (ref.end) out += " end";
  return out;
}

SequenceRef peek(std::string_view json) {
  StatusOr<SequenceRef> ref = peekSequenceFromJson(json);
  EXPECT_TRUE(ref.ok()) << json << ": " << ref.status();
  return ref.ok() ? *ref : SequenceRef{};
}

void expectError(std::string_view json, absl::StatusCode code, std::string_view fragment,
                 DecodeLimits limits = {}) {
  StatusOr<SequenceRef> ref = peekSequenceFromJson(json, json.size(), limits);
  ASSERT_FALSE(ref.ok()) << json;
  EXPECT_EQ(ref.status().code(), code) << messageOf(ref.status());
  EXPECT_NE(messageOf(ref.status()).find(fragment), std::string_view::npos)
      << "message: " << messageOf(ref.status()) << "\nexpected to contain: " << fragment;
}

TEST(SequenceRef, KeySeparatesIntAndStringIds) {
  SequenceRef as_int{.kind = SequenceRef::Kind::kInt, .int_id = 5};
  SequenceRef as_string{.kind = SequenceRef::Kind::kString, .string_id = "5"};
  EXPECT_EQ(as_int.key(), "i:5");
  EXPECT_EQ(as_string.key(), "s:5");
  EXPECT_EQ(SequenceRef{}.key(), "");
  EXPECT_FALSE(SequenceRef{}.present());
}

TEST(SequencePeekJson, ReadsIntegerIdAndFlags) {
  SequenceRef ref = peek(R"({"parameters":{"sequence_id":42,"sequence_start":true,
                                           "sequence_end":false}})");
  EXPECT_EQ(ref.kind, SequenceRef::Kind::kInt);
  EXPECT_EQ(ref.int_id, 42u);
  EXPECT_TRUE(ref.start);
  EXPECT_FALSE(ref.end);
  EXPECT_EQ(ref.key(), "i:42");
}

TEST(SequencePeekJson, ReadsStringIdUnescaped) {
  SequenceRef ref = peek(R"({"parameters":{"sequence_end":true,"sequence_id":"a\"b\u00e9"}})");
  EXPECT_EQ(ref.kind, SequenceRef::Kind::kString);
  EXPECT_EQ(ref.string_id, "a\"b\xc3\xa9");
  EXPECT_TRUE(ref.end);
  EXPECT_EQ(ref.int_id, 0u);
}

TEST(SequencePeekJson, ReadsTheWholeUint64Range) {
  EXPECT_EQ(peek(R"({"parameters":{"sequence_id":18446744073709551615}})").int_id,
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(peek(R"({"parameters":{"sequence_id":9223372036854775808}})").int_id,
            uint64_t{1} << 63);
  EXPECT_EQ(peek(R"({"parameters":{"sequence_id":1}})").key(), "i:1");
}

TEST(SequencePeekJson, ZeroAndEmptyAreNoSequence) {
  EXPECT_FALSE(peek(R"({"parameters":{"sequence_id":0,"sequence_start":true}})").present());
  EXPECT_FALSE(peek(R"({"parameters":{"sequence_id":""}})").present());
  EXPECT_TRUE(peek(R"({"parameters":{"sequence_id":0,"sequence_start":true}})").start);
}

TEST(SequencePeekJson, IdsOfOtherKindsAreNoSequence) {
  for (std::string_view id :
       {"-1", "-9223372036854775808", "1.0", "1e3", "0.5", "true", "null", "[1]", "{\"a\":1}",
        "18446744073709551616", "123456789012345678901234567890", "1e400", "-0", "1E2"}) {
    std::string json = R"({"parameters":{"sequence_id":)" + std::string(id) + "}}";
    SequenceRef ref = peek(json);
    EXPECT_FALSE(ref.present()) << json << " -> " << describe(ref);
  }
}

TEST(SequencePeekJson, FlagsAreTrueOnlyForBooleanTrue) {
  for (std::string_view flag : {"1", "\"true\"", "null", "[true]", "{}", "false"}) {
    std::string json = R"({"parameters":{"sequence_id":7,"sequence_start":)" + std::string(flag) +
                       R"(,"sequence_end":)" + std::string(flag) + "}}";
    SequenceRef ref = peek(json);
    EXPECT_FALSE(ref.start) << json;
    EXPECT_FALSE(ref.end) << json;
    EXPECT_EQ(ref.int_id, 7u) << json;
  }
}

TEST(SequencePeekJson, NoParametersIsNoSequence) {
  EXPECT_EQ(peek("{}"), SequenceRef{});
  EXPECT_EQ(peek(R"({"parameters":{}})"), SequenceRef{});
  EXPECT_EQ(peek(R"({"parameters":{"priority":1,"sequence":5,"Sequence_id":5}})"), SequenceRef{});
}

TEST(SequencePeekJson, IgnoresSequenceKeysOutsideTopLevelParameters) {
  SequenceRef ref = peek(R"({"sequence_id":1,"id":"x",
      "inputs":[{"name":"a","shape":[1],"datatype":"INT32","data":[1],
                 "parameters":{"sequence_id":2,"sequence_start":true}}],
      "outputs":[{"name":"o","parameters":{"sequence_id":3}}],
      "other":{"parameters":{"sequence_id":4}}})");
  EXPECT_EQ(ref, SequenceRef{});
}

TEST(SequencePeekJson, LastKeyWinsAndRepeatedParametersObjectsAdd) {
  SequenceRef ref = peek(R"({"parameters":{"sequence_id":1,"sequence_start":true,"sequence_id":"s"},
      "inputs":[],"parameters":{"sequence_end":true}})");
  EXPECT_EQ(ref.key(), "s:s");
  EXPECT_TRUE(ref.start);
  EXPECT_TRUE(ref.end);
  // A later id of another kind clears an earlier valid one.
  EXPECT_FALSE(peek(R"({"parameters":{"sequence_id":1,"sequence_id":-1}})").present());
  EXPECT_FALSE(peek(R"({"parameters":{"sequence_id":"x","sequence_id":""}})").present());
}

TEST(SequencePeekJson, MatchesEscapedKeys) {
  SequenceRef ref =
      peek(R"({"param\u0065ters":{"sequence\u005fid":9,"sequence_\u0073tart":true}})");
  EXPECT_EQ(ref.key(), "i:9");
  EXPECT_TRUE(ref.start);
}

TEST(SequencePeekJson, SkipsManyTensorsUnread) {
  std::string json = R"({"inputs":[)";
  for (int i = 0; i < 1000; ++i) {
    if (i > 0) json += ",";
    json += R"({"name":"in)" + std::to_string(i) +
            R"(","shape":[4],"datatype":"FP32","data":[1.5,NaN,2,3]})";
  }
  json += R"(],"parameters":{"sequence_id":"late","sequence_end":true}})";
  SequenceRef ref = peek(json);
  EXPECT_EQ(ref.key(), "s:late");
  EXPECT_TRUE(ref.end);
}

TEST(SequencePeekJson, ParsesInPlaceWhenPaddingIsReadable) {
  std::string json = R"({"parameters":{"sequence_id":3}})";
  std::string padded = json + std::string(64, ' ');
  StatusOr<SequenceRef> ref =
      peekSequenceFromJson(std::string_view(padded.data(), json.size()), padded.size());
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->key(), "i:3");
}

TEST(SequencePeekJson, RejectsInvalidJsonWithInvalidArgument) {
  expectError("", absl::StatusCode::kInvalidArgument, "JSON");
  expectError("[]", absl::StatusCode::kInvalidArgument, "must be a JSON object");
  expectError("5", absl::StatusCode::kInvalidArgument, "must be a JSON object");
  expectError(R"({"parameters":5})", absl::StatusCode::kInvalidArgument,
              "'parameters' must be a JSON object");
  for (std::string_view bad : {"1x", "01", "1.", "-", "1e", "tru", "nul", "\"\\x\""}) {
    expectError(R"({"parameters":{"sequence_id":)" + std::string(bad) + "}}",
                absl::StatusCode::kInvalidArgument, "parameter 'sequence_id'");
    expectError(R"({"parameters":{"sequence_end":)" + std::string(bad) + "}}",
                absl::StatusCode::kInvalidArgument, "parameter 'sequence_end'");
  }
  expectError(R"({"parameters":{"sequence_id":"a})", absl::StatusCode::kInvalidArgument, "JSON");
  expectError(R"({"parameters":{"sequence_id":1})", absl::StatusCode::kInvalidArgument, "JSON");
  expectError(R"({"parameters" {"sequence_id":1}})", absl::StatusCode::kInvalidArgument, "JSON");
  expectError(R"({"inputs":[{]})", absl::StatusCode::kInvalidArgument, "JSON");
}

TEST(SequencePeekJson, RejectsValidHeaderFollowedByJunk) {
  expectError(R"({"parameters":{"sequence_id":1}} x)", absl::StatusCode::kInvalidArgument, "");
  expectError(R"({"parameters":{"sequence_id":1}}{})", absl::StatusCode::kInvalidArgument, "");
  expectError(R"({"parameters":{"sequence_id":1}}])", absl::StatusCode::kInvalidArgument, "");
}

TEST(SequencePeekJson, RejectsOverLimitText) {
  DecodeLimits limits;
  limits.max_json_bytes = 16;
  expectError(R"({"parameters":{"sequence_id":1}})", absl::StatusCode::kResourceExhausted,
              "exceeds the limit", limits);
}

TEST(SequencePeekJson, TruncatedAtEveryByteFailsCleanly) {
  std::string json = R"({"id":"r","parameters":{"sequence_id":"abc","sequence_start":true},)"
                     R"("inputs":[{"name":"a","shape":[2],"datatype":"INT32","data":[1,2]}]})";
  for (size_t n = 0; n < json.size(); ++n) {
    StatusOr<SequenceRef> ref = peekSequenceFromJson(std::string_view(json).substr(0, n));
    ASSERT_FALSE(ref.ok()) << n;
    EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  EXPECT_EQ(peek(json).key(), "s:abc");
}

// ---- sequenceOf --------------------------------------------------------------------

Parameters paramsOf(std::initializer_list<Parameters::Entry> entries) {
  Parameters params;
  for (const auto& [key, value] : entries) params.set(key, value);
  return params;
}

TEST(SequenceOf, ReadsEveryIdKind) {
  EXPECT_EQ(sequenceOf(paramsOf({{"sequence_id", int64_t{5}}})).key(), "i:5");
  EXPECT_EQ(sequenceOf(paramsOf({{"sequence_id", uint64_t{5}}})).key(), "i:5");
  EXPECT_EQ(sequenceOf(paramsOf({{"sequence_id", std::string("5")}})).key(), "s:5");
  // A gRPC int64_param as Triton takes it: its bits, as the HTTP uint64 of the same id.
  EXPECT_EQ(sequenceOf(paramsOf({{"sequence_id", int64_t{-1}}})).key(), "i:18446744073709551615");
}

TEST(SequenceOf, OtherKindsZeroAndEmptyAreNoSequence) {
  for (const ParamValue& id : {ParamValue(int64_t{0}), ParamValue(uint64_t{0}),
                               ParamValue(std::string()), ParamValue(true), ParamValue(1.0)}) {
    EXPECT_FALSE(sequenceOf(paramsOf({{"sequence_id", id}})).present());
  }
  EXPECT_EQ(sequenceOf(Parameters()), SequenceRef{});
}

TEST(SequenceOf, FlagsAreTrueOnlyForBoolTrue) {
  SequenceRef ref = sequenceOf(paramsOf({{"sequence_start", true}, {"sequence_end", true}}));
  EXPECT_TRUE(ref.start);
  EXPECT_TRUE(ref.end);
  EXPECT_FALSE(ref.present());
  ref = sequenceOf(paramsOf({{"sequence_start", int64_t{1}}, {"sequence_end", std::string("1")}}));
  EXPECT_FALSE(ref.start);
  EXPECT_FALSE(ref.end);
  EXPECT_FALSE(sequenceOf(paramsOf({{"sequence_start", false}})).start);
}

// ---- property: generated headers ----------------------------------------------------

// One generated parameter value: its JSON text and what the peek must make of it.
struct GeneratedValue {
  std::string json;
  std::optional<uint64_t> int_id;        // a valid integer id (0 included)
  std::optional<std::string> string_id;  // a valid string id ("" included)
  std::optional<bool> flag;              // a JSON boolean
};

GeneratedValue generateValue(std::mt19937_64& rng) {
  switch (rng() % 12) {
    case 0:
      return {"0", uint64_t{0}};
    case 1: {
      uint64_t v = rng() % 1000;
      return {std::to_string(v), v};
    }
    case 2: {
      uint64_t v = rng();
      return {std::to_string(v), v};
    }
    case 3:
      return {"-" + std::to_string(rng() % 1000 + 1)};
    case 4: {
      std::string s = std::to_string(rng() % 100);
      return {"\"" + s + "\"", std::nullopt, s};
    }
    case 5:
      return {"\"\"", std::nullopt, std::string()};
    case 6:
      return {"\"seq\\u0041\\n\"", std::nullopt, std::string("seqA\n")};
    case 7:
      return {"true", std::nullopt, std::nullopt, true};
    case 8:
      return {"false", std::nullopt, std::nullopt, false};
    case 9:
      return {std::to_string(rng() % 100) + ".25"};
    case 10:
      return {"null"};
    default:
      return {R"([1,{"sequence_id":2}])"};
  }
}

const char* kKeys[] = {"sequence_id", "sequence_start", "sequence_end",
                       "priority",    "custom",         "sequence_ids"};

TEST(SequencePeekJson, AgreesWithTheModelAndTheFullDecoderOnGeneratedHeaders) {
  std::mt19937_64 rng(20240611);
  int decoded_ok = 0;
  for (int round = 0; round < 3000; ++round) {
    SequenceRef want;
    std::vector<std::string> others;
    others.push_back(R"("inputs":[{"name":"x","shape":[3],"datatype":"INT64",)"
                     R"("data":[1,2,3],"parameters":{"sequence_id":99}}])");
    if (rng() % 2) others.push_back(R"("id":"r)" + std::to_string(round) + "\"");
    if (rng() % 3 == 0) others.push_back(R"("outputs":[{"name":"y"}])");
    std::vector<std::string> members;  // the parameters objects, in order
    int objects = static_cast<int>(rng() % 3);
    for (int o = 0; o < objects; ++o) {
      std::string object = "\"parameters\":{";
      int count = static_cast<int>(rng() % 5);
      for (int k = 0; k < count; ++k) {
        std::string_view key = kKeys[rng() % std::size(kKeys)];
        GeneratedValue value = generateValue(rng);
        if (k > 0) object += ",";
        object += "\"" + std::string(key) + "\":" + value.json;
        if (key == "sequence_id") {
          want.kind = SequenceRef::Kind::kNone;
          want.int_id = 0;
          want.string_id.clear();
          if (value.int_id && *value.int_id != 0) {
            want.kind = SequenceRef::Kind::kInt;
            want.int_id = *value.int_id;
          } else if (value.string_id && !value.string_id->empty()) {
            want.kind = SequenceRef::Kind::kString;
            want.string_id = *value.string_id;
          }
        } else if (key == "sequence_start") {
          want.start = value.flag.value_or(false);
        } else if (key == "sequence_end") {
          want.end = value.flag.value_or(false);
        }
      }
      members.push_back(object + "}");
    }
    // The other members anywhere among them (the parameters objects keep their order).
    for (std::string& other : others) {
      members.insert(members.begin() + static_cast<long>(rng() % (members.size() + 1)),
                     std::move(other));
    }
    std::string json = "{";
    for (size_t i = 0; i < members.size(); ++i) json += (i ? "," : "") + members[i];
    json += "}";

    SequenceRef got = peek(json);
    EXPECT_EQ(describe(got), describe(want)) << json;
    EXPECT_EQ(got, want) << json;
    StatusOr<JsonInferRequestHeader> decoded = JsonRequestDecoder().decode(json);
    if (decoded.ok()) {
      ++decoded_ok;
      EXPECT_EQ(sequenceOf(decoded->request.parameters), got) << json;
    }
  }
  EXPECT_GT(decoded_ok, 300);  // the comparison with the decoder is not vacuous
}

}  // namespace
}  // namespace infergate::codecs
