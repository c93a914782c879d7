// The protobuf peek's shared-memory flag (protobuf_peek.h): whether some input or output
// of a ModelInferRequest names a shared-memory region, found without decoding it, checked
// against protobuf and the decoder on hand-made and generated messages.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "codecs/protobuf_peek.h"
#include "codecs/protobuf_peek_test_util.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_wire.h"
#include "grpc_service.pb.h"

// ---- the shared-memory flag ----------------------------------------------------------

namespace infergate::codecs {
namespace {

using namespace peek_test;  // NOLINT(google-build-using-namespace)

// Hand-made tensors: an input (InferInputTensor) and a requested output, whose
// parameters are field 4 and field 2.
std::string inputTensor(std::string_view name, std::string_view fields) {
  return lenField(5, lenField(1, name) + lenField(2, "UINT8") + varintField(3, 4) +
                         std::string(fields));
}
std::string outputTensor(std::string_view name, std::string_view fields) {
  return lenField(6, lenField(1, name) + std::string(fields));
}
std::string inputEntry(std::string_view body) { return lenField(4, body); }
std::string outputEntry(std::string_view body) { return lenField(2, body); }

void addShm(google::protobuf::Map<std::string, inference::InferParameter>& params,
            const std::string& region) {
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_offset"].set_int64_param(0);
  params["shared_memory_byte_size"].set_int64_param(16);
}

// The flag's other oracle: the gateway's own full decoder. Where it decodes the message,
// the flag is exactly "some input or output got shared_memory".
bool namesSharedMemory(const InferRequest& decoded) {
  for (const InferInput& input : decoded.inputs) {
    if (input.shared_memory.has_value()) return true;
  }
  for (const RequestedOutput& output : decoded.outputs) {
    if (output.shared_memory.has_value()) return true;
  }
  return false;
}

void expectFlagMatchesDecoder(const std::string& bytes, bool want) {
  Buffer message = Buffer::fromString(bytes);
  StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(namesSharedMemory(*decoded), want);
  StatusOr<ModelRef> ref = peekModelInferRequest(message.span());
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->shared_memory, want);
}

// `bytes` peeks to `want`, and both peeks, the protobuf oracle and the full decoder agree.
void expectSharedMemoryFlag(const std::string& bytes, bool want) {
  expectPeeksAgree(bytes);
  expectFlagMatchesDecoder(bytes, want);
}

TEST(ProtobufPeekSharedMemory, FalseWithoutSharedMemory) {
  expectSharedMemoryFlag(sampleRequest().SerializeAsString(), false);
  StatusOr<ModelRef> ref = peekModelInferRequest(std::span<const uint8_t>());
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->shared_memory);
}

TEST(ProtobufPeekSharedMemory, TrueForAnInputWithTheKey) {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  auto* shm = request.add_inputs();
  shm->set_name("IN_SHM");
  shm->set_datatype("FP32");
  shm->add_shape(4);
  addShm(*shm->mutable_parameters(), "input_region");
  auto* plain = request.add_inputs();  // the other input carries its data inline
  plain->set_name("IN");
  plain->set_datatype("UINT8");
  plain->add_shape(3);
  request.add_raw_input_contents("abc");
  request.add_outputs()->set_name("OUT");
  std::string bytes = request.SerializeAsString();
  expectSharedMemoryFlag(bytes, true);  // the peeked model name, too (expectPeeksAgree)
}

TEST(ProtobufPeekSharedMemory, TrueForAnOutputWithTheKey) {
  inference::ModelInferRequest request = sampleRequest();
  auto* output = request.add_outputs();
  output->set_name("OUT_SHM");
  (*output->mutable_parameters())["binary_data"].set_bool_param(false);
  addShm(*output->mutable_parameters(), "output_region");
  expectSharedMemoryFlag(request.SerializeAsString(), true);
}

TEST(ProtobufPeekSharedMemory, OnlyTheExactKeyCounts) {
  const std::vector<std::pair<std::string, bool>> keys = {
      {"shared_memory_regionX", false}, {"shared_memory_regio", false},
      {"Shared_memory_region", false},  {"shared_memory_region ", false},
      {"", false},                      {"shared_memory_region", true},
  };
  for (const auto& [k, want] : keys) {
    SCOPED_TRACE(k);
    inference::ModelInferRequest request = sampleRequest();
    auto& in = *request.mutable_inputs(0)->mutable_parameters();
    in[k].set_string_param("region");
    in["shared_memory_byte_size"].set_int64_param(16);
    auto& out = *request.mutable_outputs(0)->mutable_parameters();
    out[k].set_string_param("region");
    out["shared_memory_byte_size"].set_int64_param(16);
    if (want) request.clear_raw_input_contents();  // the input's data is in the region
    std::string bytes = request.SerializeAsString();
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->shared_memory, want);
    expectPeeksAgree(bytes);
    if (want) expectFlagMatchesDecoder(bytes, true);  // the others lack a region: refused
  }
}

TEST(ProtobufPeekSharedMemory, ByteSizeOrOffsetAloneIsFalse) {
  // The decoder refuses these (no region); the flag only says whether a region is named.
  for (const char* k : {"shared_memory_byte_size", "shared_memory_offset"}) {
    inference::ModelInferRequest request = sampleRequest();
    (*request.mutable_inputs(0)->mutable_parameters())[k].set_int64_param(16);
    (*request.mutable_outputs(0)->mutable_parameters())[k].set_int64_param(16);
    std::string bytes = request.SerializeAsString();
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_FALSE(ref->shared_memory) << k;
    expectPeeksAgree(bytes);
  }
}

TEST(ProtobufPeekSharedMemory, FalseWhenTheKeyIsOnlyInBytesOrValues) {
  // Everything here holds the text "shared_memory_region", and even a whole serialized
  // shm input, but never as a tensor parameter's key. Raw and typed data in two messages:
  // the decoder refuses them mixed.
  inference::ModelInferRequest shm_input;
  addShm(*shm_input.add_inputs()->mutable_parameters(), "r");
  const std::string lookalike = shm_input.SerializeAsString() + "shared_memory_region";

  inference::ModelInferRequest raw;
  raw.set_model_name("shared_memory_region");
  raw.set_id("shared_memory_region");
  (*raw.mutable_parameters())["shared_memory_region"].set_string_param("r");  // request-level
  auto* input = raw.add_inputs();
  input->set_name("shared_memory_region");
  input->set_datatype("UINT8");
  input->add_shape(static_cast<int64_t>(lookalike.size()));
  (*input->mutable_parameters())["note"].set_string_param("shared_memory_region");
  raw.add_raw_input_contents(lookalike);
  auto* output = raw.add_outputs();
  output->set_name("shared_memory_region");
  (*output->mutable_parameters())["binary_data"].set_bool_param(true);

  inference::ModelInferRequest typed;
  auto* contents = typed.add_inputs();
  contents->set_name("typed");
  contents->set_datatype("BYTES");
  contents->add_shape(2);
  contents->mutable_contents()->add_bytes_contents(lookalike);
  contents->mutable_contents()->add_bytes_contents("shared_memory_region");
  (*typed.add_outputs()->mutable_parameters())["x"].set_string_param("shared_memory_region");

  for (const inference::ModelInferRequest& request : {raw, typed}) {
    std::string bytes = request.SerializeAsString();
    ASSERT_NE(bytes.find(lookalike), std::string::npos);
    expectSharedMemoryFlag(bytes, false);
  }
}

TEST(ProtobufPeekSharedMemory, AnOutputsParametersAreItsFieldTwo) {
  // InferRequestedOutputTensor.parameters is field 2 (field 4 is InferInputTensor's): an
  // entry written as an output's field 4 is an unknown field to protobuf and the decoder.
  const std::string shm_entry = key("shared_memory_region") + value(stringMember("r"));
  std::string bytes = outputTensor("OUT", inputEntry(shm_entry));
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_FALSE(ref->shared_memory);
  expectPeeksAgree(bytes);
  bytes = outputTensor("OUT", outputEntry(shm_entry));
  ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->shared_memory);
  expectPeeksAgree(bytes);
}

TEST(ProtobufPeekSharedMemory, FollowsProtobufOnHandMadeTensors) {
  const std::string region = "shared_memory_region";
  const std::string size = key("shared_memory_byte_size") + value(int64Member(16));
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"key after its value", inputTensor("a", inputEntry(value(stringMember("r")) + key(region)))},
      {"last key field wins (not shm)",
       inputTensor("a", inputEntry(key(region) + value(stringMember("r")) + key("other")))},
      {"last key field wins (shm)",
       outputTensor("o", outputEntry(key("other") + value(stringMember("r")) + key(region)))},
      {"a varint key is unknown", inputTensor("a", inputEntry(varintField(1, 7)))},
      {"an entry without a value still names the key", inputTensor("a", inputEntry(key(region)))},
      {"a later entry of another key does not clear it",
       outputTensor("o", outputEntry(key(region) + value(stringMember("r"))) +
                             outputEntry(key("x") + value(stringMember("y"))))},
      {"the parameters field as a varint is unknown", inputTensor("a", varintField(4, 1))},
      {"unknown fields in the tensor and the entry",
       outputTensor("o", varintField(9, 1) + std::string("\x1d\x01\x02\x03\x04", 5) +
                             outputEntry(varintField(5, 3) + key(region) + lenField(7, "zz")))},
      {"a group inside an entry", inputTensor("a", inputEntry(std::string("\x2b\x08\x01\x2c", 4) +
                                                              key(region)))},
      {"the key in the input's name and datatype fields",
       lenField(5, lenField(1, region) + lenField(2, region))},
      {"an input split in two elements (not merged)",
       inputTensor("a", "") + inputTensor("b", inputEntry(key(region) + value(stringMember("r"))))},
      {"shm on both", inputTensor("a", inputEntry(key(region) + value(stringMember("r"))) +
                                           inputEntry(size)) +
                          outputTensor("o", outputEntry(key(region) + value(stringMember("q"))))},
      {"empty tensors", lenField(5, "") + lenField(6, "")},
  };
  for (const auto& [what, tensors] : cases) {
    SCOPED_TRACE(what);
    std::string bytes = lenField(1, "m") + tensors;
    expectPeeksAgree(bytes);
    for (size_t i = 0; i <= bytes.size(); ++i) expectPeeksAgree(bytes, {i});
  }
}

TEST(ProtobufPeekSharedMemory, RejectsMalformedTensors) {
  const std::string bad[] = {
      lenField(5, std::string("\x0a\x05", 2) + "ab"),        // name longer than the input
      lenField(6, std::string("\x12\x09", 2) + "ab"),        // parameters past the output
      lenField(5, inputEntry(std::string("\x0a\x05", 2))),   // key longer than its entry
      lenField(6, outputEntry(std::string("\x00", 1))),      // field number 0 in the entry
      lenField(5, std::string("\x0f", 1)),                   // wire type 7 in the input
      lenField(6, std::string("\x10", 1)),                   // truncated varint in the output
      lenField(5, std::string("\x19\x01", 2)),               // fixed64 past the input's end
  };
  for (const std::string& tensor : bad) {
    const std::string bytes = lenField(1, "m") + tensor + lenField(2, "1");
    expectEveryPeekRefuses(bytes);
  }
}

TEST(ProtobufPeekSharedMemory, TheSegmentedPeekRefusesGroupsInsideATensor) {
  // The contiguous peek skips a (proto2) group as protobuf does; the segmented one refuses
  // it, and its callers fall back to the contiguous one.
  std::string bytes = lenField(1, "m") +
                      inputTensor("a", std::string("\x3b\x08\x01\x3c", 4) +
                                           inputEntry(key("shared_memory_region")));
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->shared_memory);
  auto segments = cut(bytes, {bytes.size() / 2});
  EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProtobufSegmentedPeek, FindsSharedMemoryOnAnOutputAtEverySplit) {
  inference::ModelInferRequest request;
  request.set_model_name("shm-model");
  auto* typed = request.add_inputs();  // typed contents: an input bigger than a segment
  typed->set_name("TYPED");
  typed->set_datatype("INT32");
  typed->add_shape(100);
  for (int i = 0; i < 100; ++i) typed->mutable_contents()->add_int_contents(1000 + i);
  (*typed->mutable_parameters())["note"].set_string_param(std::string(130, 'n'));
  request.add_outputs()->set_name("PLAIN");
  auto* output = request.add_outputs();
  output->set_name("OUT_SHM");
  (*output->mutable_parameters())["binary_data"].set_bool_param(true);
  addShm(*output->mutable_parameters(), std::string(140, 'r'));  // 2-byte entry lengths
  std::string bytes = request.SerializeAsString();
  expectSharedMemoryFlag(bytes, true);
  for (size_t i = 0; i <= bytes.size(); ++i) {
    for (size_t j : {i, std::min(i + 1, bytes.size()), std::min(i + 9, bytes.size())}) {
      auto segments = cut(bytes, {i, j});
      StatusOr<OwnedModelRef> ref = peekModelInferRequest(std::span(segments));
      ASSERT_TRUE(ref.ok()) << "split at " << i << "," << j << ": " << ref.status();
      EXPECT_TRUE(ref->shared_memory) << "split at " << i << "," << j;
      EXPECT_EQ(ref->model_name, "shm-model");
    }
  }
  // Without the output's region the same cuts find nothing.
  output->mutable_parameters()->erase("shared_memory_region");
  bytes = request.SerializeAsString();
  for (size_t i = 0; i <= bytes.size(); ++i) {
    auto segments = cut(bytes, {i});
    StatusOr<OwnedModelRef> ref = peekModelInferRequest(std::span(segments));
    ASSERT_TRUE(ref.ok()) << "split at " << i << ": " << ref.status();
    EXPECT_FALSE(ref->shared_memory) << "split at " << i;
  }
}

// ---- property: generated tensors -----------------------------------------------------

const char* const kTensorKeys[] = {"shared_memory_region",    "shared_memory_offset",
                                   "shared_memory_byte_size", "shared_memory_regionX",
                                   "binary_data",             "classification"};

void addTensorParameters(google::protobuf::Map<std::string, inference::InferParameter>& params,
                         std::mt19937_64& rng) {
  if (rng() % 3 == 0) {  // a complete, valid region: the decoder accepts it
    addShm(params, "region-" + std::to_string(rng() % 10));
    return;
  }
  for (size_t n = rng() % 3; n > 0; --n) {
    params[kTensorKeys[rng() % std::size(kTensorKeys)]] = generateParameter(rng);
  }
}

TEST(ProtobufPeekSharedMemory, AgreesWithProtobufAndTheDecoderOnGeneratedRequests) {
  std::mt19937_64 rng(20250301);
  int decoded_ok = 0, decoded_shm = 0;
  for (int round = 0; round < 2000; ++round) {
    inference::ModelInferRequest request;
    request.set_model_name("m");
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
      auto* input = request.add_inputs();
      input->set_name("in" + std::to_string(i));
      input->set_datatype("UINT8");
      size_t n = rng() % 100;
      input->add_shape(static_cast<int64_t>(n));
      if (rng() % 2) {
        addTensorParameters(*input->mutable_parameters(), rng);
      }
      if (!input->parameters().contains("shared_memory_region")) {
        request.add_raw_input_contents(std::string(n, 'x'));
      }
    }
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
      auto* output = request.add_outputs();
      output->set_name("out" + std::to_string(i));
      if (rng() % 2) addTensorParameters(*output->mutable_parameters(), rng);
    }
    std::string bytes = request.SerializeAsString();
    SCOPED_TRACE("round " + std::to_string(round));
    expectPeeksAgree(bytes, randomCuts(rng, bytes.size()));

    Buffer message = Buffer::fromString(bytes);
    StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
    StatusOr<ModelRef> ref = peekModelInferRequest(message.span());
    ASSERT_TRUE(ref.ok());
    if (!decoded.ok()) continue;
    ++decoded_ok;
    const bool any = namesSharedMemory(*decoded);
    decoded_shm += any;
    EXPECT_EQ(ref->shared_memory, any);
  }
  // Neither side of the comparison with the decoder is vacuous.
  EXPECT_GT(decoded_ok, 300);
  EXPECT_GT(decoded_shm, 100);
  EXPECT_GT(decoded_ok - decoded_shm, 100);
}

}  // namespace
}  // namespace infergate::codecs
