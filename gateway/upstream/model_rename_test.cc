// renameInJson and rewriteModelFields / rewriteStreamModelFields (model_rename.h).
#include "gateway/upstream/model_rename.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <random>

#include "codecs/protobuf_wire.h"
#include "grpc_service.pb.h"

namespace infergate::gateway::upstream {
namespace {

using google::protobuf::util::MessageDifferencer;

// ---- renameInJson -------------------------------------------------------------------------

TEST(AdminTranscode, RenameInJsonReplacesOnlyTheTopLevelStringKeepingEveryOtherByte) {
  EXPECT_EQ(
      renameInJson(R"({"model_name":"up","model_version":"1","outputs":[]})", "model_name", "pub"),
      R"({"model_name":"pub","model_version":"1","outputs":[]})");
  // Nested members of the same name, keys and braces inside strings, odd spacing, other
  // bytes (UTF-8 and not) are left alone.
  const std::string json =
      "\n{ \"x\" : {\"name\":\"inner\"}, \"s\":\"a\\\"name\\\":\\\"no}]\", \"name\"\t:  "
      "\"up\\\"q\" "
      ",\"z\":[1,{\"name\":2},-1.5e3,true,null,NaN], \"u\":\"\xc3\xa9\xff\" }\r\n";
  const std::string expected =
      "\n{ \"x\" : {\"name\":\"inner\"}, \"s\":\"a\\\"name\\\":\\\"no}]\", \"name\"\t:  \"pub\" "
      ",\"z\":[1,{\"name\":2},-1.5e3,true,null,NaN], \"u\":\"\xc3\xa9\xff\" }\r\n";
  EXPECT_EQ(renameInJson(json, "name", "pub"), expected);
}

TEST(AdminTranscode, RenameInJsonEscapesTheValueAndMatchesEscapedKeys) {
  EXPECT_EQ(renameInJson(R"({"name":"a"})", "name", "q\"b\\c\n\x01"),
            R"({"name":"q\"b\\c\n\u0001"})");
  EXPECT_EQ(renameInJson(R"({"n\u0061me":"a","b":1})", "name", "z"), R"({"n\u0061me":"z","b":1})");
  // A duplicated key: every occurrence, whichever a reader believes.
  EXPECT_EQ(renameInJson(R"({"name":"a","name":"b"})", "name", "z"), R"({"name":"z","name":"z"})");
}

TEST(AdminTranscode, RenameInJsonRefusesWhatItCannotRewrite) {
  for (std::string_view json : {
           R"({"name":1})",
           R"({"name":{"a":"b"}})",
           R"({"name":null})",
           R"({"name":"a","name":2})",  // one occurrence is not a string
           R"({"other":"y"})",
           R"({})",
           R"([{"name":"y"}])",
           R"("name")",
           "",
           R"({"a":"unterminated)",
           R"({"a" "b","name":"x"})",
           R"({"a":1,,"name":"x"})",
           R"({"a":1,"name":"x",})",
           R"({"a":[},"name":"x"})",
           R"({"a":[1,],"name":"x"})",
           R"({"name":"x"} x)",
           R"({"name":"x"}})",
           R"({"a":tru,"name":"x"})",
           R"({"a":-,"name":"x"})",
           R"({"name":"x")",
           "{\"name\":\"x\\",
       }) {
    EXPECT_EQ(renameInJson(json, "name", "z"), std::nullopt) << json;
  }
}

TEST(AdminTranscode, RenameInJsonHandlesDeepNestingWithoutRecursion) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string json = R"({"a":)" + deep + R"(,"name":"x"})";
  auto renamed = renameInJson(json, "name", "y");
  ASSERT_TRUE(renamed.has_value());
  EXPECT_TRUE(renamed->ends_with(R"(,"name":"y"})"));
  EXPECT_EQ(renameInJson(R"({"a":)" + std::string(1000, '['), "name", "y"), std::nullopt);
}

// ---- rewriteModelFields ---------------------------------------------------------------------

constexpr size_t kTensorBytes = 64 * 1024;

inference::ModelInferRequest sampleRequest() {
  inference::ModelInferRequest r;
  r.set_model_name("upstream-model");
  r.set_model_version("3");
  r.set_id("req-7");
  (*r.mutable_parameters())["sequence_id"].set_int64_param(42);
  auto* in = r.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(kTensorBytes / 4);
  r.add_outputs()->set_name("OUTPUT0");
  r.add_raw_input_contents(std::string(kTensorBytes, '\x5a'));
  return r;
}

inference::ModelInferResponse sampleResponse() {
  inference::ModelInferResponse r;
  r.set_model_name("upstream-model");
  r.set_model_version("3");
  r.set_id("req-7");
  auto* out = r.add_outputs();
  out->set_name("OUTPUT0");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(kTensorBytes / 4);
  r.add_raw_output_contents(std::string(kTensorBytes, '\x3c'));
  return r;
}

template <typename Message>
Message parsedChain(const codecs::BufferChain& chain) {
  Message m;
  EXPECT_TRUE(m.ParseFromString(chain.toString()));
  return m;
}

// Every segment past the first (the new fields 1 and 2) lies inside `original`'s memory:
// nothing but the names was copied.
void expectOnlyTheNamesCopied(const codecs::BufferChain& chain, const codecs::Buffer& original) {
  ASSERT_FALSE(chain.segments().empty());
  size_t copied = 0;
  for (size_t i = 0; i < chain.segments().size(); ++i) {
    const codecs::Buffer& s = chain.segments()[i];
    const bool inside =
        s.data() >= original.data() && s.data() + s.size() <= original.data() + original.size();
    if (!inside) copied += s.size();
    EXPECT_TRUE(inside || i == 0) << "segment " << i;
  }
  EXPECT_LT(copied, 64u);
  EXPECT_GT(chain.size(), kTensorBytes);
}

TEST(AdminTranscodeRewrite, ReplacesTheNamesOfARequestWithoutCopyingTensors) {
  const inference::ModelInferRequest original = sampleRequest();
  const codecs::Buffer message = codecs::Buffer::fromString(original.SerializeAsString());
  struct Case {
    std::string_view model;
    std::optional<std::string_view> version;
    std::string_view expected_version;
  };
  for (const Case& c : {Case{"public", std::nullopt, "3"}, Case{"public", "", ""},
                        Case{"public", "12", "12"}, Case{"", std::nullopt, "3"}}) {
    auto chain = rewriteModelFields(message, c.model, c.version);
    ASSERT_TRUE(chain.ok()) << chain.status();
    inference::ModelInferRequest expected = original;
    expected.set_model_name(std::string(c.model));
    expected.set_model_version(std::string(c.expected_version));
    EXPECT_TRUE(
        MessageDifferencer::Equals(parsedChain<inference::ModelInferRequest>(*chain), expected))
        << c.model << " " << c.expected_version;
    expectOnlyTheNamesCopied(*chain, message);
    // proto3 writes no empty string: the chain is exactly what protobuf would serialize.
    EXPECT_EQ(chain->size(), expected.ByteSizeLong());
  }
}

TEST(AdminTranscodeRewrite, ReplacesTheNamesOfAResponseWithoutCopyingTensors) {
  const inference::ModelInferResponse original = sampleResponse();
  const codecs::Buffer message = codecs::Buffer::fromString(original.SerializeAsString());
  auto chain = rewriteModelFields(message, "public", std::nullopt);
  ASSERT_TRUE(chain.ok()) << chain.status();
  inference::ModelInferResponse expected = original;
  expected.set_model_name("public");
  EXPECT_TRUE(
      MessageDifferencer::Equals(parsedChain<inference::ModelInferResponse>(*chain), expected));
  expectOnlyTheNamesCopied(*chain, message);
}

// Fields in any order, repeated names (the last wins), a name field of another wire type
// and unknown fields: the result parses as protobuf parses the original, renamed.
TEST(AdminTranscodeRewrite, FollowsProtobufRulesForOddlyOrderedMessages) {
  std::string wire;
  codecs::WireWriter w(wire);
  w.bytesField(3, "id-1");
  w.bytesField(1, "first");
  w.bytesField(7, std::string(1000, 'r'));
  w.bytesField(2, "4");
  w.varintField(99, 123456);  // unknown
  w.bytesField(1, "second");
  w.varintField(2, 5);   // model_version as a varint: an unknown field to protobuf
  w.bytesField(2, "6");  // the last model_version
  w.bytesField(7, "tail");
  const codecs::Buffer message = codecs::Buffer::fromString(wire);
  inference::ModelInferRequest expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  ASSERT_EQ(expected.model_version(), "6");
  expected.set_model_name("public");
  auto chain = rewriteModelFields(message, "public", std::nullopt);
  ASSERT_TRUE(chain.ok()) << chain.status();
  inference::ModelInferRequest parsed = parsedChain<inference::ModelInferRequest>(*chain);
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected));
  EXPECT_EQ(parsed.GetReflection()->GetUnknownFields(parsed).field_count(), 2);
}

// Every prefix of a message: the rewrite succeeds exactly when protobuf can parse the
// prefix, and then gives the prefix's message renamed; otherwise INVALID_ARGUMENT.
template <typename Message>
void expectPrefixesHandledAsProtobufDoes(const Message& original,
                                         std::optional<std::string_view> version) {
  const std::string bytes = original.SerializeAsString();
  size_t accepted = 0;
  for (size_t n = 0; n <= bytes.size(); ++n) {
    const codecs::Buffer prefix = codecs::Buffer::copyOf(std::string_view(bytes).substr(0, n));
    auto chain = rewriteModelFields(prefix, "public", version);
    Message expected;
    const bool parses = expected.ParseFromString(bytes.substr(0, n));
    ASSERT_EQ(chain.ok(), parses) << "prefix " << n << ": " << chain.status();
    if (!chain.ok()) {
      ASSERT_EQ(chain.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++accepted;
    expected.set_model_name("public");
    if (version) expected.set_model_version(std::string(*version));
    ASSERT_TRUE(MessageDifferencer::Equals(parsedChain<Message>(*chain), expected)) << n;
  }
  EXPECT_GT(accepted, 5u);  // the field boundaries
  EXPECT_LT(accepted, bytes.size() / 2);
}

TEST(AdminTranscodeRewrite, EveryTruncationIsRefusedOrAValidShorterMessage) {
  inference::ModelInferRequest request = sampleRequest();
  request.mutable_raw_input_contents(0)->resize(300);  // two-byte lengths, a short loop
  expectPrefixesHandledAsProtobufDoes(request, std::nullopt);
  inference::ModelInferResponse response = sampleResponse();
  response.mutable_raw_output_contents(0)->resize(300);
  expectPrefixesHandledAsProtobufDoes(response, std::string_view("2"));
}

// Arbitrary bytes never crash the rewrite; what it accepts it writes back as well-formed
// wire format, which a second rewrite leaves as it is.
TEST(AdminTranscodeRewrite, ArbitraryBytesAreRefusedOrRewrittenConsistently) {
  std::mt19937 random(20261121);
  size_t accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes(random() % 48, '\0');
    for (char& c : bytes) c = static_cast<char>(random() % 4 == 0 ? random() % 0x20 : random());
    for (bool stream : {false, true}) {
      const codecs::Buffer message = codecs::Buffer::copyOf(bytes);
      auto once = stream ? rewriteStreamModelFields(message, "m", std::nullopt)
                         : rewriteModelFields(message, "m", std::nullopt);
      if (!once.ok()) {
        ASSERT_EQ(once.status().code(), absl::StatusCode::kInvalidArgument);
        continue;
      }
      ++accepted;
      const codecs::Buffer flat = codecs::Buffer::copyOf(once->toString());
      auto twice = stream ? rewriteStreamModelFields(flat, "m", std::nullopt)
                          : rewriteModelFields(flat, "m", std::nullopt);
      ASSERT_TRUE(twice.ok()) << twice.status();
      EXPECT_EQ(twice->toString(), flat.view());
    }
  }
  EXPECT_GT(accepted, 50u);
}

// ---- rewriteStreamModelFields ---------------------------------------------------------------

TEST(AdminTranscodeRewrite, StreamRewritesInsideTheInferResponseAndKeepsTheError) {
  inference::ModelStreamInferResponse stream;
  stream.set_error_message("partial: \xe2\x9c\x93");
  *stream.mutable_infer_response() = sampleResponse();
  const codecs::Buffer message = codecs::Buffer::fromString(stream.SerializeAsString());
  auto chain = rewriteStreamModelFields(message, "public", std::string_view("1"));
  ASSERT_TRUE(chain.ok()) << chain.status();
  inference::ModelStreamInferResponse expected = stream;
  expected.mutable_infer_response()->set_model_name("public");
  expected.mutable_infer_response()->set_model_version("1");
  EXPECT_TRUE(MessageDifferencer::Equals(parsedChain<inference::ModelStreamInferResponse>(*chain),
                                         expected));
  // error_message, then new length + names (one copied segment), then the tensors' slice.
  size_t copied = 0;
  for (const codecs::Buffer& s : chain->segments()) {
    const bool inside = s.data() >= message.data() && s.data() < message.data() + message.size();
    if (!inside) copied += s.size();
  }
  EXPECT_LT(copied, 64u);
  EXPECT_EQ(chain->size(), expected.ByteSizeLong());
}

// The length of infer_response is written anew: here it grows past 127 bytes, so its
// varint grows from one byte to two.
TEST(AdminTranscodeRewrite, StreamRecomputesTheLengthPrefix) {
  inference::ModelStreamInferResponse stream;
  inference::ModelInferResponse* inner = stream.mutable_infer_response();
  inner->set_model_name("m");
  inner->add_raw_output_contents(std::string(100, 'x'));
  ASSERT_LT(inner->ByteSizeLong(), 128u);
  const codecs::Buffer message = codecs::Buffer::fromString(stream.SerializeAsString());
  const std::string long_name(60, 'n');
  auto chain = rewriteStreamModelFields(message, long_name, std::nullopt);
  ASSERT_TRUE(chain.ok()) << chain.status();
  inference::ModelStreamInferResponse expected = stream;
  expected.mutable_infer_response()->set_model_name(long_name);
  ASSERT_GE(expected.infer_response().ByteSizeLong(), 128u);
  EXPECT_EQ(chain->toString(), expected.SerializeAsString());
}

TEST(AdminTranscodeRewrite, StreamWithoutAnInferResponseIsUnchanged) {
  inference::ModelStreamInferResponse stream;
  stream.set_error_message("model failed");
  const std::string bytes = stream.SerializeAsString();
  auto chain = rewriteStreamModelFields(codecs::Buffer::copyOf(bytes), "public", std::nullopt);
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->toString(), bytes);
}

// protobuf merges a sub-message that appears twice; each part is renamed, so the merge is too.
TEST(AdminTranscodeRewrite, StreamRenamesEveryInferResponsePart) {
  inference::ModelInferResponse first;
  first.set_model_name("up");
  first.set_model_version("2");
  first.set_id("a");
  inference::ModelInferResponse second;
  second.set_model_name("up");
  second.add_raw_output_contents("xyz");
  std::string wire;
  codecs::WireWriter w(wire);
  w.bytesField(2, first.SerializeAsString());
  w.bytesField(1, "err");
  w.bytesField(2, second.SerializeAsString());
  inference::ModelStreamInferResponse expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  expected.mutable_infer_response()->set_model_name("public");
  auto chain = rewriteStreamModelFields(codecs::Buffer::copyOf(wire), "public", std::nullopt);
  ASSERT_TRUE(chain.ok()) << chain.status();
  auto parsed = parsedChain<inference::ModelStreamInferResponse>(*chain);
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected));
  EXPECT_EQ(parsed.infer_response().model_version(), "2");
}

TEST(AdminTranscodeRewrite, StreamRefusesAMalformedInferResponse) {
  std::string wire;
  codecs::WireWriter w(wire);
  w.bytesField(1, "err");
  w.bytesField(2, std::string("\x0a\x05\x61", 3));  // model_name of 5 bytes, 1 present
  auto chain = rewriteStreamModelFields(codecs::Buffer::copyOf(wire), "public", std::nullopt);
  ASSERT_EQ(chain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(codecs::messageOf(chain.status()).starts_with("infer_response: ")) << chain.status();

  inference::ModelStreamInferResponse stream;
  *stream.mutable_infer_response() = sampleResponse();
  stream.mutable_infer_response()->mutable_raw_output_contents(0)->resize(200);
  const std::string bytes = stream.SerializeAsString();
  for (size_t n = 0; n <= bytes.size(); ++n) {
    auto prefix =
        rewriteStreamModelFields(codecs::Buffer::copyOf(bytes.substr(0, n)), "p", std::nullopt);
    inference::ModelStreamInferResponse parsed;
    ASSERT_EQ(prefix.ok(), parsed.ParseFromString(bytes.substr(0, n))) << n;
  }
}

}  // namespace
}  // namespace infergate::gateway::upstream
