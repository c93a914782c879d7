// ModelRepository::infer(): resolve, validate, execute, post-process, record.

#include <variant>

#include "gateway/upstream/builtin/classification.h"
#include "gateway/upstream/builtin/repository.h"

namespace infergate::gateway::builtin {
namespace {

using Clock = std::chrono::steady_clock;
using codecs::InferRequest;
using codecs::InferResponse;
using codecs::Status;

Execution refusal(Status status) {
  Execution e;
  TimedResponse r;
  r.response = std::move(status);
  r.final = true;
  e.responses.push_back(std::move(r));
  return e;
}

bool boolParam(const codecs::Parameters& parameters, std::string_view key) {
  const codecs::ParamValue* value = parameters.find(key);
  const bool* b = value ? std::get_if<bool>(value) : nullptr;
  return b != nullptr && *b;
}

// Requested outputs only (all when none were named), classified where asked; names set.
Status shapeResponse(InferResponse& response, const InferRequest& request, const ModelSpec& spec,
                     const std::string& version) {
  if (!request.outputs.empty()) {
    std::vector<codecs::InferOutput> kept;
    for (codecs::InferOutput& out : response.outputs) {
      const codecs::RequestedOutput* wanted = request.findOutput(out.name);
      if (wanted == nullptr) continue;
      if (wanted->classification > 0) {
        INFERGATE_ASSIGN_OR_RETURN(codecs::InferOutput classified,
                                   classify(out, wanted->classification, spec.max_batch_size > 0));
        kept.push_back(std::move(classified));
      } else {
        kept.push_back(std::move(out));
      }
    }
    response.outputs = std::move(kept);
  }
  response.model_name = spec.name;
  response.model_version = version;
  response.id = request.id;
  return absl::OkStatus();
}

// Post-processes the model's responses in place; nothing follows a final one or an error.
void finish(Execution& e, const InferRequest& request, const ModelSpec& spec,
            const std::string& version, bool streaming) {
  if (!spec.decoupled && e.responses.size() != 1) {
    e = refusal(codecs::internalError("model '", spec.name, "' produced ", e.responses.size(),
                                      " responses instead of one"));
    return;
  }
  size_t kept = 0;
  bool finished = false;
  for (; kept < e.responses.size() && !finished; ++kept) {
    TimedResponse& r = e.responses[kept];
    if (!spec.decoupled || !r.response.ok()) r.final = true;
    finished = r.final;
    if (!r.response.ok()) continue;
    Status shaped = shapeResponse(*r.response, request, spec, version);
    if (!shaped.ok()) {
      r.response = std::move(shaped);
      r.final = finished = true;
      r.from_model = false;
      continue;
    }
    if (streaming) r.response->parameters.set(std::string(codecs::param::kFinalResponse), r.final);
  }
  e.responses.erase(e.responses.begin() + static_cast<std::ptrdiff_t>(kept), e.responses.end());
  if (finished) {
    e.complete_after = std::chrono::microseconds(0);
    return;
  }
  if (streaming && boolParam(request.parameters, codecs::param::kEnableEmptyFinalResponse)) {
    InferResponse empty;
    empty.id = request.id;
    empty.model_name = request.model_name;
    empty.model_version = request.model_version;
    empty.parameters.set(std::string(codecs::param::kFinalResponse), true);
    TimedResponse r;
    r.response = std::move(empty);
    r.delay = e.complete_after;
    r.final = true;
    e.responses.push_back(std::move(r));
    e.complete_after = std::chrono::microseconds(0);
  }
}

uint64_t epochMillis(std::chrono::microseconds later) {
  auto now = std::chrono::system_clock::now().time_since_epoch() + later;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

}  // namespace

Execution ModelRepository::infer(const InferRequest& request, bool streaming) {
  const Clock::time_point arrival = Clock::now();
  codecs::StatusOr<Resolved> resolved = resolve(request.model_name, request.model_version);
  if (!resolved.ok()) return refusal(resolved.status());
  const ModelSpec& spec = resolved->model->spec();
  if (!streaming) {
    Status unary = decoupledUnaryError(spec, UnaryPath::kGrpc);
    if (!unary.ok()) return refusal(std::move(unary));
  }
  codecs::StatusOr<int64_t> batch = validateRequest(spec, request);
  if (!batch.ok()) return refusal(batch.status());

  const Clock::time_point exec_start = Clock::now();
  Execution e = resolved->model->execute(request);
  const Clock::time_point exec_end = Clock::now();
  bool model_error = false;
  bool refused = false;
  for (const TimedResponse& r : e.responses) {
    model_error = model_error || (!r.response.ok() && r.from_model);
    refused = refused || (!r.response.ok() && !r.from_model);
  }
  finish(e, request, spec, resolved->version, streaming);
  const Clock::time_point post_end = Clock::now();

  std::chrono::microseconds delays = e.complete_after;
  for (const TimedResponse& r : e.responses) delays += r.delay;
  const uint64_t total_ns = nanosOf(post_end - arrival + delays);
  ModelStatistics& stats = *resolved->stats;
  if (model_error) {
    stats.recordFailure(total_ns, epochMillis(delays));
  } else if (!refused) {
    RequestTiming t;
    t.batch_size = static_cast<uint64_t>(std::max<int64_t>(1, *batch));
    t.queue_ns = nanosOf(exec_start - arrival);
    t.compute_infer_ns = nanosOf(exec_end - exec_start + delays);
    t.compute_output_ns = nanosOf(post_end - exec_end);
    t.total_ns = total_ns;
    t.end_ms = epochMillis(delays);
    stats.recordSuccess(t);
  }
  if (!refused) {
    std::chrono::nanoseconds elapsed = exec_end - arrival;
    for (size_t i = 0; i < e.responses.size(); ++i) {
      const TimedResponse& r = e.responses[i];
      elapsed += r.delay;
      const bool empty = r.response.ok() && r.response->outputs.empty() && spec.decoupled;
      stats.recordResponse(i, r.response.ok(), empty, nanosOf(r.delay), nanosOf(elapsed));
    }
  }
  return e;
}

}  // namespace infergate::gateway::builtin
