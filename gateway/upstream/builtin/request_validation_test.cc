#include "gateway/upstream/builtin/request_validation.h"

#include <gtest/gtest.h>

#include "gateway/upstream/builtin/builtin_test_util.h"
#include "gateway/upstream/builtin/demo_models.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;
using testing::bytesInput;
using testing::iota32;
using testing::simpleRequest;
using testing::tensorInput;

std::string errorOf(const ModelSpec& spec, const codecs::InferRequest& request) {
  auto result = validateRequest(spec, request);
  if (result.ok()) return "OK batch " + std::to_string(*result);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(codecs::messageOf(result.status()));
}

class SimpleValidation : public ::testing::Test {
 protected:
  std::shared_ptr<Model> model_ = makeSimpleModel();
  const ModelSpec& spec_ = model_->spec();
};

TEST_F(SimpleValidation, AcceptsAValidBatch) {
  EXPECT_EQ(errorOf(spec_, simpleRequest()), "OK batch 1");
  codecs::InferRequest r = simpleRequest();
  r.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {8, 16}, iota32(0, 128));
  r.inputs[1] = tensorInput("INPUT1", DataType::kInt32, {8, 16}, iota32(0, 128));
  EXPECT_EQ(errorOf(spec_, r), "OK batch 8");
}

TEST_F(SimpleValidation, RejectsAMissingInputWithTritonsMessage) {
  codecs::InferRequest r = simpleRequest();
  r.inputs.pop_back();
  EXPECT_EQ(errorOf(spec_, r),
            "expected 2 inputs but got 1 inputs for model 'simple'. Got inputs ['INPUT0'], but "
            "missing required inputs ['INPUT1']. Please provide all required inputs.");
  r.inputs.clear();
  EXPECT_EQ(errorOf(spec_, r),
            "expected 2 inputs but got 0 inputs for model 'simple'. Got inputs [], but missing "
            "required inputs ['INPUT0','INPUT1']. Please provide all required inputs.");
}

TEST_F(SimpleValidation, ReproducesTritonsListQuirkWhenNothingIsMissing) {
  codecs::InferRequest r = simpleRequest();
  r.inputs.push_back(tensorInput("EXTRA", DataType::kInt32, {1, 16}, iota32(0, 16)));
  EXPECT_EQ(errorOf(spec_, r),
            "expected 2 inputs but got 3 inputs for model 'simple'. Got inputs "
            "['INPUT0','INPUT1','EXTRA'], but missing required inputs ]. Please provide all "
            "required inputs.");
}

TEST_F(SimpleValidation, RejectsUnknownNames) {
  codecs::InferRequest r = simpleRequest();
  r.inputs[1].name = "INPUTX";
  EXPECT_EQ(errorOf(spec_, r), "unexpected inference input 'INPUTX' for model 'simple'");
  r = simpleRequest();
  r.outputs.push_back({.name = "OUTPUT9"});
  EXPECT_EQ(errorOf(spec_, r), "unexpected inference output 'OUTPUT9' for model 'simple'");
}

TEST_F(SimpleValidation, RejectsDuplicateInputs) {
  codecs::InferRequest r = simpleRequest();
  r.inputs[1].name = "INPUT0";
  EXPECT_EQ(errorOf(spec_, r), "input 'INPUT0' already exists in request");
}

TEST_F(SimpleValidation, ChecksTheBatchDimension) {
  codecs::InferRequest r = simpleRequest();
  r.inputs[0].shape = {};
  EXPECT_EQ(errorOf(spec_, r),
            "input 'INPUT0' has no shape but model requires batch dimension for 'simple'");
  r = simpleRequest();
  r.inputs[1] = tensorInput("INPUT1", DataType::kInt32, {2, 16}, iota32(0, 32));
  EXPECT_EQ(errorOf(spec_, r),
            "input 'INPUT1' batch size does not match other inputs for 'simple'");
  r.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {9, 16}, iota32(0, 144));
  r.inputs[1] = tensorInput("INPUT1", DataType::kInt32, {9, 16}, iota32(0, 144));
  EXPECT_EQ(errorOf(spec_, r), "inference request batch-size must be <= 8 for 'simple'");
}

TEST_F(SimpleValidation, RejectsWrongDatatypeAndShape) {
  codecs::InferRequest r = simpleRequest();
  r.inputs[1] = tensorInput("INPUT1", DataType::kFp32, {1, 16}, std::vector<float>(16, 1.f));
  EXPECT_EQ(errorOf(spec_, r),
            "inference input 'INPUT1' data-type is 'FP32', but model 'simple' expects 'INT32'");
  r = simpleRequest();
  r.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {1, 15}, iota32(0, 15));
  EXPECT_EQ(errorOf(spec_, r),
            "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got "
            "[1,15]. NOTE: Setting a non-zero max_batch_size in the model config requires a "
            "batch dimension to be prepended to each input shape. If you want to specify the "
            "full shape including the batch dim in your input dims config, try setting "
            "max_batch_size to zero. See the model configuration docs for more info on "
            "max_batch_size.");
}

TEST_F(SimpleValidation, RejectsAByteSizeMismatch) {
  codecs::InferRequest r = simpleRequest();
  r.inputs[1].data = codecs::Buffer::fromString(std::string(68, '\0'));
  EXPECT_EQ(errorOf(spec_, r),
            "input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 68");
}

TEST_F(SimpleValidation, PrefixesNormalizeErrorsWithTheRequestId) {
  codecs::InferRequest r = simpleRequest();
  r.id = "abc";
  r.inputs[1].data = codecs::Buffer::fromString(std::string(60, '\0'));
  EXPECT_EQ(errorOf(spec_, r),
            "[request id: abc] input byte size mismatch for input 'INPUT1' for model 'simple'. "
            "Expected 64, got 60");
}

TEST(RequestValidation, ShapeMessageHasNoNoteForANonBatchingModel) {
  auto sleep = makeSleepModel();
  codecs::InferRequest r;
  r.model_name = "sleep";
  r.inputs.push_back(tensorInput("INPUT0", DataType::kInt32, {2}, std::vector<int32_t>{1, 2}));
  EXPECT_EQ(errorOf(sleep->spec(), r),
            "unexpected shape for input 'INPUT0' for model 'sleep'. Expected [1], got [2]. ");
  r.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {1}, std::vector<int32_t>{5});
  EXPECT_EQ(errorOf(sleep->spec(), r), "OK batch 0");
}

TEST(RequestValidation, ChecksBytesElementCountsAndFraming) {
  auto model = makeSimpleStringModel();
  codecs::InferRequest r;
  r.model_name = "simple_string";
  r.inputs.push_back(bytesInput("INPUT0", {1, 16}, std::vector<std::string>(16, "1")));
  r.inputs.push_back(bytesInput("INPUT1", {1, 16}, std::vector<std::string>(14, "1")));
  EXPECT_EQ(errorOf(model->spec(), r),
            "expected 16 string elements for inference input 'INPUT1' for model "
            "'simple_string', got 14");
  r.inputs[1] = bytesInput("INPUT1", {1, 16}, std::vector<std::string>(18, "1"));
  EXPECT_EQ(errorOf(model->spec(), r),
            "unexpected number of string elements 17 for inference input 'INPUT1' for model "
            "'simple_string', expecting 16");
  std::string truncated = codecs::serializeBytesElements(std::vector<std::string>(15, "1"));
  truncated += std::string(
      "\x05\x00\x00\x00"
      "ab",
      6);
  r.inputs[1].data = codecs::Buffer::fromString(truncated);
  EXPECT_EQ(errorOf(model->spec(), r),
            "incomplete string data for inference input 'INPUT1' for model 'simple_string', "
            "expecting string of length 5 but only 2 bytes available");
  truncated.resize(truncated.size() - 4);
  r.inputs[1].data = codecs::Buffer::fromString(truncated);
  EXPECT_EQ(errorOf(model->spec(), r),
            "incomplete string length indicator for inference input 'INPUT1' for model "
            "'simple_string', expecting 4 bytes but only 2 bytes available. Please make sure "
            "the string length indicator is in one buffer.");
}

TEST(RequestValidation, AcceptsVariableDimsAndZeroElements) {
  auto model = makeIdentityModel(DataType::kFp32);
  codecs::InferRequest r;
  r.model_name = "identity_fp32";
  r.inputs.push_back(tensorInput("INPUT0", DataType::kFp32, {3, 0}, std::vector<float>{}));
  EXPECT_EQ(errorOf(model->spec(), r), "OK batch 3");
  r.inputs[0] = tensorInput("INPUT0", DataType::kFp32, {2, 1000}, std::vector<float>(2000));
  EXPECT_EQ(errorOf(model->spec(), r), "OK batch 2");
}

TEST(RequestValidation, RefusesUnresolvedSharedMemory) {
  auto model = makeIdentityModel(DataType::kUint8);
  codecs::InferRequest r;
  r.model_name = "identity_uint8";
  codecs::InferInput in;
  in.name = "INPUT0";
  in.datatype = DataType::kUint8;
  in.shape = {1, 4};
  in.shared_memory = codecs::SharedMemoryRef{"region0", 0, 4};
  r.inputs.push_back(in);
  EXPECT_EQ(errorOf(model->spec(), r),
            "input 'INPUT0' of model 'identity_uint8' refers to shared-memory region 'region0', "
            "which the builtin upstream cannot read: shared memory must be resolved before the "
            "request reaches it");
}

TEST(RequestValidation, DecoupledModelsAreRefusedOnUnaryPaths) {
  auto repeat = makeRepeatModel();
  codecs::Status http = decoupledUnaryError(repeat->spec(), UnaryPath::kHttp);
  EXPECT_EQ(http.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(codecs::messageOf(http),
            "HTTP end point doesn't support models with decoupled transaction policy");
  codecs::Status grpc = decoupledUnaryError(repeat->spec(), UnaryPath::kGrpc);
  EXPECT_EQ(codecs::messageOf(grpc),
            "ModelInfer RPC doesn't support models with decoupled transaction policy");
  EXPECT_TRUE(decoupledUnaryError(makeSimpleModel()->spec(), UnaryPath::kGrpc).ok());
}

}  // namespace
}  // namespace infergate::gateway::builtin
