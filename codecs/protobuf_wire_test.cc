#include "codecs/protobuf_wire.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

std::span<const uint8_t> spanOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string varintBytes(uint64_t value) {
  std::string out;
  WireWriter(out).varint(value);
  return out;
}

TEST(WireWriter, WritesVarintsAsProtobufDoes) {
  EXPECT_EQ(varintBytes(0), std::string("\x00", 1));
  EXPECT_EQ(varintBytes(1), "\x01");
  EXPECT_EQ(varintBytes(127), "\x7f");
  EXPECT_EQ(varintBytes(128), "\x80\x01");
  EXPECT_EQ(varintBytes(300), "\xac\x02");
  EXPECT_EQ(varintBytes(std::numeric_limits<uint64_t>::max()),
            "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 16383ull, 16384ull, 1ull << 63}) {
    EXPECT_EQ(varintBytes(v).size(), varintSize(v)) << v;
  }
}

TEST(WireReader, ReadsVarintsBackAtEveryWidth) {
  for (int bits = 0; bits <= 64; ++bits) {
    uint64_t v = bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
    std::string bytes = varintBytes(v);
    WireReader reader(spanOf(bytes));
    StatusOr<uint64_t> got = reader.readVarint();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, v);
    EXPECT_TRUE(reader.done());
  }
}

TEST(WireReader, RejectsElevenByteVarint) {
  std::string bytes(10, '\xff');
  bytes += '\x01';
  WireReader reader(spanOf(bytes));
  EXPECT_EQ(reader.readVarint().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WireReader, RejectsVarintPastSixtyFourBits) {
  std::string bytes(9, '\xff');
  bytes += '\x02';  // bit 64
  WireReader reader(spanOf(bytes));
  EXPECT_EQ(reader.readVarint().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WireReader, RejectsTruncatedVarint) {
  for (std::string bytes : {std::string("\x80"), std::string("\xff\xff"), std::string()}) {
    WireReader reader(spanOf(bytes));
    EXPECT_EQ(reader.readVarint().status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(WireReader, RejectsInvalidTags) {
  const std::string cases[] = {
      std::string("\x00", 1),               // field 0
      std::string("\x0e"),                  // field 1, wire type 6
      std::string("\x0f"),                  // field 1, wire type 7
      std::string("\x80\x80\x80\x80\x10"),  // tag past 32 bits
      std::string("\x8a"),                  // truncated tag
  };
  for (const std::string& bytes : cases) {
    WireReader reader(spanOf(bytes));
    EXPECT_EQ(reader.readTag().status().code(), absl::StatusCode::kInvalidArgument)
        << testing::PrintToString(bytes);
  }
}

TEST(WireReader, ReadsTheLargestFieldNumber) {
  std::string bytes;
  WireWriter(bytes).tag(kMaxFieldNumber, WireType::kI32);
  WireReader reader(spanOf(bytes));
  StatusOr<FieldTag> tag = reader.readTag();
  ASSERT_TRUE(tag.ok());
  EXPECT_EQ(tag->number, kMaxFieldNumber);
  EXPECT_EQ(tag->type, WireType::kI32);
}

TEST(WireReader, RejectsLengthPastEnd) {
  std::string bytes(
      "\x05"
      "abcd");  // length 5, 4 bytes follow
  WireReader reader(spanOf(bytes));
  StatusOr<std::span<const uint8_t>> value = reader.readLengthDelimited();
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  // A length that would overflow size_t arithmetic.
  std::string huge = varintBytes(std::numeric_limits<uint64_t>::max()) + "x";
  WireReader huge_reader(spanOf(huge));
  EXPECT_EQ(huge_reader.readLengthDelimited().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WireReader, RejectsTruncatedFixedValues) {
  std::string three("abc");
  WireReader r32(spanOf(three));
  EXPECT_EQ(r32.readFixed32().status().code(), absl::StatusCode::kInvalidArgument);
  std::string seven("abcdefg");
  WireReader r64(spanOf(seven));
  EXPECT_EQ(r64.readFixed64().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WireReader, ReadsFixedValuesLittleEndian) {
  std::string bytes("\x01\x02\x03\x04\x01\x02\x03\x04\x05\x06\x07\x08");
  WireReader reader(spanOf(bytes));
  EXPECT_EQ(*reader.readFixed32(), 0x04030201u);
  EXPECT_EQ(*reader.readFixed64(), 0x0807060504030201ull);
  EXPECT_TRUE(reader.done());
}

// One field of every wire type, a group holding a nested group among them.
std::string everyWireType() {
  std::string out;
  WireWriter w(out);
  w.varintField(20, 300);
  w.tag(21, WireType::kI64);
  w.fixed64(0x1122334455667788ull);
  w.bytesField(22, "length-delimited");
  w.tag(23, WireType::kStartGroup);
  w.varintField(1, 7);
  w.tag(2, WireType::kStartGroup);
  w.bytesField(3, "inner");
  w.tag(2, WireType::kEndGroup);
  w.tag(23, WireType::kEndGroup);
  w.tag(24, WireType::kI32);
  out.append("\x01\x02\x03\x04", 4);
  return out;
}

TEST(WireReader, SkipsEveryWireType) {
  std::string bytes = everyWireType();
  std::vector<uint32_t> seen;
  Status status = forEachField(spanOf(bytes), [&](FieldTag tag, WireReader& reader) {
    seen.push_back(tag.number);
    return reader.skip(tag);
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(seen, (std::vector<uint32_t>{20, 21, 22, 23, 24}));
}

TEST(WireReader, GeneratedParserAgreesUnknownFieldsAreSkippable) {
  // Protobuf itself keeps these as unknown fields of any message.
  inference::ModelInferRequest parsed;
  std::string bytes = everyWireType();
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.model_name(), "");
}

TEST(WireReader, RejectsBrokenGroups) {
  auto skipAll = [](const std::string& bytes) {
    return forEachField(spanOf(bytes),
                        [](FieldTag tag, WireReader& reader) { return reader.skip(tag); });
  };
  std::string unterminated, mismatched, stray, deep;
  WireWriter(unterminated).tag(5, WireType::kStartGroup);
  WireWriter u(unterminated);
  u.varintField(1, 1);
  WireWriter m(mismatched);
  m.tag(5, WireType::kStartGroup);
  m.tag(6, WireType::kEndGroup);
  WireWriter(stray).tag(5, WireType::kEndGroup);
  WireWriter d(deep);
  for (int i = 0; i < 100; ++i) d.tag(5, WireType::kStartGroup);
  for (int i = 0; i < 100; ++i) d.tag(5, WireType::kEndGroup);
  for (const std::string* bytes : {&unterminated, &mismatched, &stray, &deep}) {
    EXPECT_EQ(skipAll(*bytes).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(WireReader, EmptyPayloadHasNoFields) {
  int calls = 0;
  Status status = forEachField({}, [&](FieldTag tag, WireReader& reader) {
    ++calls;
    return reader.skip(tag);
  });
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(calls, 0);
}

TEST(WireReader, TrailingJunkThatIsNotATagIsAnError) {
  std::string bytes = everyWireType();
  for (std::string junk : {std::string("\x00", 1), std::string("\xff"), std::string("\x0f")}) {
    std::string with_junk = bytes + junk;
    Status status = forEachField(spanOf(with_junk),
                                 [](FieldTag tag, WireReader& reader) { return reader.skip(tag); });
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(WireWriter, NestedMessageLengthsGrowPastOneByte) {
  // A sub-message longer than 127 bytes needs a 2-byte length, inserted after the fact.
  std::string out;
  WireWriter w(out);
  size_t outer = w.beginMessage(5);
  w.bytesField(1, std::string(200, 'x'));
  size_t inner = w.beginMessage(4);
  w.bytesField(1, "k");
  w.endMessage(inner);
  w.endMessage(outer);
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  ASSERT_EQ(parsed.inputs_size(), 1);
  EXPECT_EQ(parsed.inputs(0).name(), std::string(200, 'x'));
  EXPECT_EQ(parsed.inputs(0).parameters().count("k"), 1u);
}

TEST(ParameterEntry, WritesEveryKindAsTheGeneratedParserReadsIt) {
  std::string out;
  WireWriter w(out);
  writeParameterEntry(w, 4, "b", false);
  writeParameterEntry(w, 4, "i", int64_t{-5});
  writeParameterEntry(w, 4, "s", std::string());
  writeParameterEntry(w, 4, "d", 0.0);
  writeParameterEntry(w, 4, "u", std::numeric_limits<uint64_t>::max());
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  const auto& p = parsed.parameters();
  // Zero values are still set: the oneof member is always written.
  EXPECT_EQ(p.at("b").parameter_choice_case(), inference::InferParameter::kBoolParam);
  EXPECT_FALSE(p.at("b").bool_param());
  EXPECT_EQ(p.at("i").int64_param(), -5);
  EXPECT_EQ(p.at("s").parameter_choice_case(), inference::InferParameter::kStringParam);
  EXPECT_EQ(p.at("d").parameter_choice_case(), inference::InferParameter::kDoubleParam);
  EXPECT_EQ(p.at("u").uint64_param(), std::numeric_limits<uint64_t>::max());
}

Status decodeEntries(const inference::ModelInferRequest& request, Parameters& out) {
  std::string bytes = request.SerializeAsString();
  return forEachField(spanOf(bytes), [&](FieldTag tag, WireReader& reader) -> Status {
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> entry, reader.readLengthDelimited());
    return decodeParameterEntry(entry, "the request", "", out);
  });
}

TEST(ParameterEntry, DecodesEveryKindExactly) {
  inference::ModelInferRequest request;
  auto& p = *request.mutable_parameters();
  p["b"].set_bool_param(true);
  p["i"].set_int64_param(std::numeric_limits<int64_t>::min());
  p["s"].set_string_param("text");
  p["d"].set_double_param(2.5);
  p["u"].set_uint64_param(std::numeric_limits<uint64_t>::max());
  Parameters params;
  ASSERT_TRUE(decodeEntries(request, params).ok());
  ASSERT_EQ(params.size(), 5u);
  EXPECT_EQ(*params.find("b"), ParamValue(true));
  EXPECT_EQ(*params.find("i"), ParamValue(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(*params.find("s"), ParamValue(std::string("text")));
  EXPECT_EQ(*params.find("d"), ParamValue(2.5));
  EXPECT_EQ(*params.find("u"), ParamValue(std::numeric_limits<uint64_t>::max()));
}

TEST(ParameterEntry, RejectsAValueWithNoKind) {
  inference::ModelInferRequest request;
  (*request.mutable_parameters())["empty"];
  Parameters params;
  Status status = decodeEntries(request, params);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(messageOf(status).find("empty"), std::string_view::npos);
}

TEST(ParameterEntry, RejectsTooManyParameters) {
  inference::ModelInferRequest request;
  for (size_t i = 0; i <= kMaxParametersPerMap; ++i) {
    (*request.mutable_parameters())["k" + std::to_string(i)].set_bool_param(true);
  }
  Parameters params;
  EXPECT_EQ(decodeEntries(request, params).code(), absl::StatusCode::kResourceExhausted);
}

Status readShape(const std::string& bytes, Shape& shape) {
  return forEachField(spanOf(bytes), [&](FieldTag tag, WireReader& reader) {
    return readShapeDims(reader, tag, "t", shape);
  });
}

TEST(Shape, ReadsPackedAndUnpackedDims) {
  std::string bytes;
  WireWriter w(bytes);
  writeShape(w, 3, Shape{1, 300});
  w.varintField(3, 7);  // unpacked, appended
  Shape shape;
  ASSERT_TRUE(readShape(bytes, shape).ok());
  EXPECT_EQ(shape, (Shape{1, 300, 7}));
}

TEST(Shape, RejectsNegativeDims) {
  std::string bytes;
  WireWriter(bytes).varintField(3, static_cast<uint64_t>(int64_t{-1}));
  Shape shape;
  EXPECT_EQ(readShape(bytes, shape).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Shape, RejectsTooManyDims) {
  std::string bytes;
  WireWriter w(bytes);
  for (size_t i = 0; i <= kMaxShapeRank; ++i) w.varintField(3, 1);
  Shape shape;
  EXPECT_EQ(readShape(bytes, shape).code(), absl::StatusCode::kResourceExhausted);
}

TEST(Shape, WritesNothingForAScalar) {
  std::string bytes;
  WireWriter w(bytes);
  writeShape(w, 3, Shape{});
  EXPECT_TRUE(bytes.empty());
}

TEST(SpliceChain, CutsTheGlueAroundEachTensor) {
  Buffer a = Buffer::fromString("AAAA");
  Buffer b = Buffer::fromString("BB");
  ChainCut cuts[] = {{2, &a}, {3, &b}};
  BufferChain chain = spliceChain("xyzw", cuts);
  EXPECT_EQ(chain.toString(), "xyAAAAzBBw");
  ASSERT_EQ(chain.segments().size(), 5u);
  EXPECT_EQ(chain.segments()[1].data(), a.data());
  EXPECT_EQ(chain.segments()[3].data(), b.data());
}

}  // namespace
}  // namespace infergate::codecs
