#pragma once

// A builtin demo model: its description (ModelSpec) and a pure, non-blocking execute().
//
// A model never sleeps, blocks or starts a thread. execute() returns every response it
// will ever produce for a request, each with the delay after which it is due; the caller
// (an event loop) arms timers and emits them. ModelRepository::infer() validates the
// request before execute() sees it, so a model may assume input names, datatypes, shapes
// and byte sizes match its spec.
//
// Thread safety: spec() is immutable after construction; execute() may run on any number
// of threads at once (models with state guard it themselves).

#include <chrono>
#include <string>
#include <vector>

#include "codecs/data_type.h"
#include "codecs/infer.h"
#include "codecs/shape.h"
#include "codecs/status.h"

namespace infergate::gateway::builtin {

struct TensorSpec {
  std::string name;
  codecs::DataType datatype = codecs::DataType::kInvalid;
  codecs::Shape dims;  // without the batch dim; -1 = variable
};

struct ModelSpec {
  std::string name;
  std::string platform = "builtin";
  std::vector<std::string> versions = {"1"};
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs, outputs;
  bool decoupled = false;
  bool sequence = false;
  // Sequence models: the idle time after which a sequence's state is dropped (rendered
  // as sequence_batching.max_sequence_idle_microseconds in the config).
  std::chrono::microseconds sequence_idle{0};

  const TensorSpec* findInput(std::string_view name) const;
  const TensorSpec* findOutput(std::string_view name) const;
};

struct TimedResponse {
  codecs::StatusOr<codecs::InferResponse> response;
  std::chrono::microseconds delay{0};  // after the previous emission (the first: after arrival)
  // This emission completes the request (Triton's FINAL flag; on a stream it carries
  // triton_final_response=true). Set by ModelRepository::infer() on every non-decoupled
  // response and on every error; a decoupled model may set it on its last response.
  bool final = false;
  // Set by the model on an error it raised while executing (after the request reached
  // it). On a gRPC stream Triton sends such an in-band error with model_name,
  // model_version and triton_final_response=true; errors raised before (unknown model,
  // bad shape, a sequence-batcher refusal) carry only the id. Only these errors count as
  // failures in the statistics.
  bool from_model = false;
};

struct Execution {
  std::vector<TimedResponse> responses;  // non-decoupled: exactly one; decoupled: 0..N
  // When no response is final: the request completes this long after the last emission
  // (after arrival when there is none) with no message, as a decoupled Triton backend
  // sending only the FINAL flag does. Zero otherwise.
  std::chrono::microseconds complete_after{0};
};

class Model {
 public:
  virtual ~Model() = default;
  // Immutable; safe from any thread.
  virtual const ModelSpec& spec() const = 0;
  // `request` has passed validateRequest() against spec(). Responses hold every output of
  // the model, in spec order; the repository filters them to the requested ones and
  // stamps model name, version and id. An error status ends the request.
  virtual Execution execute(const codecs::InferRequest& request) = 0;
  // Drops per-model state (sequences); called when the model is unloaded.
  virtual void reset() {}
};

}  // namespace infergate::gateway::builtin
