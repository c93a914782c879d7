// The stream relay's reads of a ModelStreamInferResponse (stream_response_peek.h), on
// messages protobuf itself serialized and on broken ones.

#include "codecs/stream_response_peek.h"

#include <gtest/gtest.h>

#include <optional>
#include <span>
#include <string>

#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

std::span<const uint8_t> bytesOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string answer(std::string_view model, std::optional<bool> final_flag, std::string_view error = "") {
  inference::ModelStreamInferResponse r;
  if (!error.empty()) r.set_error_message(std::string(error));
  if (!model.empty() || final_flag) {
    inference::ModelInferResponse* infer = r.mutable_infer_response();
    infer->set_model_name(std::string(model));
    infer->set_id("7");
    infer->add_outputs()->set_name("OUTPUT0");
    infer->add_raw_output_contents("\x01\x02\x03\x04");
    if (final_flag) (*infer->mutable_parameters())["triton_final_response"].set_bool_param(*final_flag);
    (*infer->mutable_parameters())["other"].set_bool_param(false);
  }
  return r.SerializeAsString();
}

TEST(StreamResponsePeekTest, ModelNameIsTheInferResponses) {
  const std::string message = answer("resnet", std::nullopt);
  EXPECT_EQ(peekStreamResponseModel(bytesOf(message)), "resnet");
  EXPECT_EQ(peekStreamResponseModel(bytesOf(answer("", std::nullopt, "failed"))), std::nullopt);
  // Truncated: no name rather than a wrong one.
  EXPECT_EQ(peekStreamResponseModel(bytesOf(message.substr(0, message.size() - 3))), std::nullopt);
}

TEST(StreamResponsePeekTest, FinalUnlessTheFlagSaysOtherwise) {
  StreamAnswer plain = peekStreamAnswer(bytesOf(answer("m", std::nullopt)));
  EXPECT_TRUE(plain.final);
  EXPECT_FALSE(plain.error);
  StreamAnswer more = peekStreamAnswer(bytesOf(answer("m", false)));
  EXPECT_FALSE(more.final);
  EXPECT_FALSE(more.error);
  StreamAnswer last = peekStreamAnswer(bytesOf(answer("m", true)));
  EXPECT_TRUE(last.final);
  EXPECT_FALSE(last.error);
}

TEST(StreamResponsePeekTest, AnErrorOrABrokenMessageIsAFinalError) {
  StreamAnswer error = peekStreamAnswer(bytesOf(answer("", std::nullopt, "model failed")));
  EXPECT_TRUE(error.final);
  EXPECT_TRUE(error.error);
  const std::string message = answer("m", false);
  StreamAnswer broken = peekStreamAnswer(bytesOf(message.substr(0, message.size() - 2)));
  EXPECT_TRUE(broken.final);
  EXPECT_TRUE(broken.error);
}

}  // namespace
}  // namespace infergate::codecs
