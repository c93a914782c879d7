#pragma once

// What the protobuf peek's tests share (protobuf_peek_test.cc, protobuf_peek_shm_test.cc):
// messages and their wire pieces, the message cut into segments, and the oracles the peeks
// are checked against (the generated types' own decode). Test-only, header-only.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/protobuf_peek.h"
#include "codecs/protobuf_wire.h"
#include "codecs/sequence_peek.h"
#include "grpc_service.pb.h"

namespace infergate::codecs::peek_test {

inline std::span<const uint8_t> spanOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

inline inference::ModelInferRequest sampleRequest() {
  inference::ModelInferRequest request;
  request.set_model_name("resnet50");
  request.set_model_version("3");
  request.set_id("req-1");
  (*request.mutable_parameters())["priority"].set_uint64_param(1);
  auto* input = request.add_inputs();
  input->set_name("INPUT0");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  request.add_outputs()->set_name("OUTPUT0");
  request.add_raw_input_contents(std::string(16, '\x01'));
  return request;
}

// The message cut into segments at the given offsets.
inline std::vector<std::span<const uint8_t>> cut(const std::string& bytes, std::vector<size_t> at) {
  std::vector<std::span<const uint8_t>> segments;
  size_t from = 0;
  at.push_back(bytes.size());
  for (size_t to : at) {
    segments.push_back({reinterpret_cast<const uint8_t*>(bytes.data()) + from, to - from});
    from = to;
  }
  return segments;
}

// What a failing expectation prints: the key and the flags.
inline std::string describe(const SequenceRef& ref) {
  std::string out = ref.present() ? ref.key() : "none";
  if (ref.start) out += " start";
  if (ref.end) out += " end";
  return out;
}

// The sequence of a fully decoded message, by the rules of sequence_peek.h, written
// against the generated types as an independent oracle.
inline SequenceRef oracle(const inference::ModelInferRequest& request) {
  SequenceRef want;
  const auto& params = request.parameters();
  if (auto it = params.find("sequence_id"); it != params.end()) {
    const inference::InferParameter& id = it->second;
    if (id.parameter_choice_case() == inference::InferParameter::kInt64Param &&
        id.int64_param() != 0) {
      want.kind = SequenceRef::Kind::kInt;
      want.int_id = static_cast<uint64_t>(id.int64_param());
    } else if (id.parameter_choice_case() == inference::InferParameter::kUint64Param &&
               id.uint64_param() != 0) {
      want.kind = SequenceRef::Kind::kInt;
      want.int_id = id.uint64_param();
    } else if (id.parameter_choice_case() == inference::InferParameter::kStringParam &&
               !id.string_param().empty()) {
      want.kind = SequenceRef::Kind::kString;
      want.string_id = id.string_param();
    }
  }
  auto flag = [&](const char* key) {
    auto it = params.find(key);
    return it != params.end() &&
           it->second.parameter_choice_case() == inference::InferParameter::kBoolParam &&
           it->second.bool_param();
  };
  want.start = flag("sequence_start");
  want.end = flag("sequence_end");
  return want;
}

// Whether protobuf itself finds a tensor parameter keyed shared_memory_region: the
// oracle of the peek's shared_memory flag.
inline bool sharedMemoryOracle(const inference::ModelInferRequest& request) {
  for (const auto& input : request.inputs()) {
    if (input.parameters().contains("shared_memory_region")) return true;
  }
  for (const auto& output : request.outputs()) {
    if (output.parameters().contains("shared_memory_region")) return true;
  }
  return false;
}

// Both peeks, the segmented one cut at `cuts`, must equal the full decode's sequence and
// shared-memory flag.
inline void expectPeeksAgree(const std::string& bytes, std::vector<size_t> cuts = {}) {
  inference::ModelInferRequest full;
  ASSERT_TRUE(full.ParseFromString(bytes)) << "the test built an invalid message";
  SequenceRef want = oracle(full);
  bool want_shm = sharedMemoryOracle(full);
  StatusOr<ModelRef> whole = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(describe(whole->sequence), describe(want));
  EXPECT_EQ(whole->sequence, want);
  EXPECT_EQ(whole->model_name, full.model_name());
  EXPECT_EQ(whole->shared_memory, want_shm);
  auto segments = cut(bytes, std::move(cuts));
  StatusOr<OwnedModelRef> owned = peekModelInferRequest(std::span(segments));
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(owned->sequence, want) << describe(owned->sequence) << " vs " << describe(want);
  EXPECT_EQ(owned->model_name, full.model_name());
  EXPECT_EQ(owned->shared_memory, want_shm);
}

// Hand-made wire pieces, for what the generated types never write.
inline std::string lenField(uint32_t number, std::string_view body) {
  std::string out;
  WireWriter(out).bytesField(number, body);
  return out;
}

inline std::string varintField(uint32_t number, uint64_t value) {
  std::string out;
  WireWriter(out).varintField(number, value);
  return out;
}

inline inference::InferParameter generateParameter(std::mt19937_64& rng) {
  inference::InferParameter p;
  switch (rng() % 12) {
    case 0:
      break;  // no member set
    case 1:
      p.set_bool_param(rng() % 2);
      break;
    case 2:
      p.set_int64_param(0);
      break;
    case 3:
      p.set_int64_param(static_cast<int64_t>(rng() % 1000));
      break;
    case 4:
      p.set_int64_param(static_cast<int64_t>(rng()));  // often negative
      break;
    case 5:
      p.set_string_param("");
      break;
    case 6:
      p.set_string_param(std::to_string(rng() % 1000));
      break;
    case 7:
      p.set_string_param(std::string(rng() % 400, static_cast<char>('a' + rng() % 26)));
      break;
    case 8:
      p.set_double_param(static_cast<double>(rng() % 100) / 4);
      break;
    case 9:
      p.set_uint64_param(rng() % 2 ? 0 : rng());
      break;
    default:
      p.set_bool_param(true);
      break;
  }
  return p;
}

// Up to four offsets at which to cut a message of `size` bytes, in order.
inline std::vector<size_t> randomCuts(std::mt19937_64& rng, size_t size) {
  std::vector<size_t> cuts;
  for (size_t c = rng() % 5; c > 0; --c) cuts.push_back(rng() % (size + 1));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// A malformed message: protobuf refuses it, and so do both peeks (INVALID_ARGUMENT), the
// segmented one at every split.
inline void expectEveryPeekRefuses(const std::string& bytes) {
  inference::ModelInferRequest full;
  EXPECT_FALSE(full.ParseFromString(bytes));
  EXPECT_EQ(peekModelInferRequest(spanOf(bytes)).status().code(), absl::StatusCode::kInvalidArgument);
  for (size_t i = 0; i <= bytes.size(); ++i) {
    auto segments = cut(bytes, {i});
    EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(), absl::StatusCode::kInvalidArgument)
        << "split at " << i;
  }
}

// A parameters map entry (field 4 of a request) and its pieces: the key, the value (an
// InferParameter) and that value's members.
inline std::string entry(std::string_view body) { return lenField(4, body); }
inline std::string key(std::string_view k) { return lenField(1, k); }
inline std::string value(std::string_view infer_parameter) { return lenField(2, infer_parameter); }
inline std::string int64Member(int64_t v) { return varintField(2, static_cast<uint64_t>(v)); }
inline std::string boolMember(uint64_t v) { return varintField(1, v); }
inline std::string stringMember(std::string_view s) { return lenField(3, s); }

}  // namespace infergate::codecs::peek_test
