// repeat_int32: Triton's decoupled repeat example (repeat_backend, qa/L0_decoupled).
//
//   IN    INT32  [-1]   the values to send back, one response each
//   DELAY UINT32 [-1]   milliseconds before response i (after the previous emission)
//   WAIT  UINT32 [1]    milliseconds after the last response until the request completes
//   OUT   INT32  [1]    IN[i]
//   IDX   UINT32 [1]    i
//
// Like the Triton backend it never marks a data response final: completion is a FINAL
// flag without a response (Execution::complete_after = WAIT). ModelRepository::infer()
// turns that into an empty final response when the stream asked for
// triton_enable_empty_final_response. Each DELAY and WAIT is clamped to kMaxSleep.

#include <algorithm>

#include "gateway/upstream/builtin/demo_models.h"
#include "gateway/upstream/builtin/tensor_access.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;

std::chrono::microseconds clampedMs(uint32_t ms) {
  return std::min<std::chrono::microseconds>(std::chrono::milliseconds(ms), kMaxSleep);
}

class RepeatModel : public Model {
 public:
  RepeatModel() {
    spec_.name = "repeat_int32";
    spec_.max_batch_size = 0;
    spec_.decoupled = true;
    spec_.inputs = {{"IN", DataType::kInt32, {-1}},
                    {"DELAY", DataType::kUint32, {-1}},
                    {"WAIT", DataType::kUint32, {1}}};
    spec_.outputs = {{"OUT", DataType::kInt32, {1}}, {"IDX", DataType::kUint32, {1}}};
  }

  const ModelSpec& spec() const override { return spec_; }

  Execution execute(const codecs::InferRequest& request) override {
    const codecs::InferInput* in = request.findInput("IN");
    const codecs::InferInput* delay = request.findInput("DELAY");
    const codecs::InferInput* wait = request.findInput("WAIT");
    Execution e;
    if (in->shape != delay->shape) {
      TimedResponse r;
      r.response = codecs::invalidArgument("expected IN and DELAY shape to match, got ",
                                           in->shape.toString(), " and ", delay->shape.toString());
      r.final = true;
      r.from_model = true;
      e.responses.push_back(std::move(r));
      return e;
    }
    const size_t count = in->data.size() / sizeof(int32_t);
    for (size_t i = 0; i < count; ++i) {
      codecs::InferResponse response;
      response.outputs.push_back(
          makeOutput("OUT", DataType::kInt32, {1},
                     bufferOf(std::vector<int32_t>{loadElement<int32_t>(in->data, i)})));
      response.outputs.push_back(
          makeOutput("IDX", DataType::kUint32, {1},
                     bufferOf(std::vector<uint32_t>{static_cast<uint32_t>(i)})));
      TimedResponse r;
      r.response = std::move(response);
      r.delay = clampedMs(loadElement<uint32_t>(delay->data, i));
      e.responses.push_back(std::move(r));
    }
    e.complete_after = clampedMs(loadElement<uint32_t>(wait->data, 0));
    return e;
  }

 private:
  ModelSpec spec_;
};

}  // namespace

std::shared_ptr<Model> makeRepeatModel() { return std::make_shared<RepeatModel>(); }

}  // namespace infergate::gateway::builtin
