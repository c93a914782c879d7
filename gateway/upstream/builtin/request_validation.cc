#include "gateway/upstream/builtin/request_validation.h"

#include "codecs/bytes_tensor.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::InferInput;
using codecs::InferRequest;
using codecs::invalidArgument;
using codecs::Status;

// Triton's LogRequest(): "[request id: <id>] " when the request has an id.
std::string logRequest(const InferRequest& request) {
  return request.id.empty() ? std::string() : codecs::strCat("[request id: ", request.id, "] ");
}

Status checkInputCount(const ModelSpec& spec, const InferRequest& request,
                       const std::string& prefix) {
  if (request.inputs.size() == spec.inputs.size()) return absl::OkStatus();
  // Built exactly as core does, including its quirk: with nothing missing the list is
  // "]" (its pop_back() takes the opening bracket).
  std::string missing = "[";
  for (const TensorSpec& t : spec.inputs) {
    if (request.findInput(t.name) == nullptr) missing += codecs::strCat("'", t.name, "',");
  }
  missing.pop_back();
  missing += "]";
  std::string given = "[";
  for (const InferInput& in : request.inputs) given += codecs::strCat("'", in.name, "',");
  given.pop_back();
  given += "]";
  if (request.inputs.empty()) given = "[]";
  return invalidArgument(prefix, "expected ", spec.inputs.size(), " inputs but got ",
                         request.inputs.size(), " inputs for model '", spec.name, "'. Got inputs ",
                         given, ", but missing required inputs ", missing,
                         ". Please provide all required inputs.");
}

Status unexpectedInput(const ModelSpec& spec, const InferInput& in) {
  return invalidArgument("unexpected inference input '", in.name, "' for model '", spec.name, "'");
}

codecs::StatusOr<int64_t> batchSizeOf(const ModelSpec& spec, const InferRequest& request,
                                      const std::string& prefix) {
  if (spec.max_batch_size == 0) return 0;
  int64_t batch = 0;
  bool have_batch = false;
  for (const InferInput& in : request.inputs) {
    if (spec.findInput(in.name) == nullptr) return unexpectedInput(spec, in);
    if (in.shape.rank() == 0) {
      return invalidArgument(prefix, "input '", in.name,
                             "' has no shape but model requires batch dimension for '", spec.name,
                             "'");
    }
    if (!have_batch) {
      batch = in.shape[0];
      have_batch = true;
    } else if (in.shape[0] != batch) {
      return invalidArgument(prefix, "input '", in.name,
                             "' batch size does not match other inputs for '", spec.name, "'");
    }
  }
  if (batch > spec.max_batch_size) {
    return invalidArgument(prefix, "inference request batch-size must be <= ", spec.max_batch_size,
                           " for '", spec.name, "'");
  }
  return batch;
}

Status checkTypeAndShape(const ModelSpec& spec, const InferInput& in, const TensorSpec& config,
                         const std::string& prefix) {
  if (in.datatype != config.datatype) {
    return invalidArgument(prefix, "inference input '", in.name, "' data-type is '",
                           codecs::dataTypeName(in.datatype), "', but model '", spec.name,
                           "' expects '", codecs::dataTypeName(config.datatype), "'");
  }
  const size_t skip = spec.max_batch_size > 0 ? 1 : 0;
  bool match = in.shape.rank() == config.dims.rank() + skip;
  for (size_t i = 0; match && i < config.dims.rank(); ++i) {
    const int64_t dim = in.shape[i + skip];
    if (dim < 0) {
      return invalidArgument(prefix, "All input dimensions should be specified for input '",
                             in.name, "' for model '", spec.name, "', got ", in.shape.toString());
    }
    if (config.dims[i] != -1 && config.dims[i] != dim) match = false;
  }
  if (match) return absl::OkStatus();
  codecs::Shape full;
  std::string note;
  if (spec.max_batch_size > 0) {
    full.push_back(-1);
    note =
        "NOTE: Setting a non-zero max_batch_size in the model config requires a batch "
        "dimension to be prepended to each input shape. If you want to specify the full "
        "shape including the batch dim in your input dims config, try setting "
        "max_batch_size to zero. See the model configuration docs for more info on "
        "max_batch_size.";
  }
  for (int64_t d : config.dims) full.push_back(d);
  return invalidArgument(prefix, "unexpected shape for input '", in.name, "' for model '",
                         spec.name, "'. Expected ", full.toString(), ", got ", in.shape.toString(),
                         ". ", note);
}

Status checkBytesElements(const ModelSpec& spec, const InferInput& in, uint64_t expected,
                          const std::string& prefix) {
  const uint8_t* p = in.data.data();
  size_t remaining = in.data.size();
  uint64_t count = 0;
  while (remaining > 0) {
    if (count == expected) {
      return invalidArgument(prefix, "unexpected number of string elements ", count + 1,
                             " for inference input '", in.name, "' for model '", spec.name,
                             "', expecting ", expected);
    }
    if (remaining < 4) {
      return invalidArgument(prefix, "incomplete string length indicator for inference input '",
                             in.name, "' for model '", spec.name, "', expecting 4 bytes but only ",
                             remaining,
                             " bytes available. Please make sure the string length indicator "
                             "is in one buffer.");
    }
    const uint32_t len = codecs::loadU32Le(p);
    p += 4;
    remaining -= 4;
    if (len > remaining) {
      return invalidArgument(prefix, "incomplete string data for inference input '", in.name,
                             "' for model '", spec.name, "', expecting string of length ", len,
                             " but only ", remaining, " bytes available");
    }
    p += len;
    remaining -= len;
    ++count;
  }
  if (count != expected) {
    return invalidArgument(prefix, "expected ", expected, " string elements for inference input '",
                           in.name, "' for model '", spec.name, "', got ", count);
  }
  return absl::OkStatus();
}

Status checkData(const ModelSpec& spec, const InferInput& in, const std::string& prefix) {
  INFERGATE_ASSIGN_OR_RETURN(int64_t elements, in.shape.elementCount(in.name));
  if (in.shared_memory.has_value() && in.data.empty() && elements > 0) {
    return invalidArgument(prefix, "input '", in.name, "' of model '", spec.name,
                           "' refers to shared-memory region '", in.shared_memory->region,
                           "', which the builtin upstream cannot read: shared memory must be "
                           "resolved before the request reaches it");
  }
  if (in.datatype == codecs::DataType::kBytes) {
    return checkBytesElements(spec, in, static_cast<uint64_t>(elements), prefix);
  }
  INFERGATE_ASSIGN_OR_RETURN(uint64_t expected,
                             in.shape.byteSize(codecs::elementSize(in.datatype), in.name));
  if (expected != in.data.size()) {
    return invalidArgument(prefix, "input byte size mismatch for input '", in.name, "' for model '",
                           spec.name, "'. Expected ", expected, ", got ", in.data.size());
  }
  return absl::OkStatus();
}

}  // namespace

codecs::StatusOr<int64_t> validateRequest(const ModelSpec& spec, const InferRequest& request) {
  const std::string prefix = logRequest(request);
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (request.inputs[j].name == request.inputs[i].name) {
        return invalidArgument(prefix, "input '", request.inputs[i].name,
                               "' already exists in request");
      }
    }
  }
  for (const codecs::RequestedOutput& out : request.outputs) {
    if (spec.findOutput(out.name) == nullptr) {
      return invalidArgument("unexpected inference output '", out.name, "' for model '", spec.name,
                             "'");
    }
  }
  INFERGATE_RETURN_IF_ERROR(checkInputCount(spec, request, prefix));
  INFERGATE_ASSIGN_OR_RETURN(int64_t batch, batchSizeOf(spec, request, prefix));
  for (const InferInput& in : request.inputs) {
    const TensorSpec* config = spec.findInput(in.name);
    if (config == nullptr) return unexpectedInput(spec, in);
    INFERGATE_RETURN_IF_ERROR(checkTypeAndShape(spec, in, *config, prefix));
  }
  for (const InferInput& in : request.inputs) {
    INFERGATE_RETURN_IF_ERROR(checkData(spec, in, prefix));
  }
  return batch;
}

codecs::Status decoupledUnaryError(const ModelSpec& spec, UnaryPath path) {
  if (!spec.decoupled) return absl::OkStatus();
  return codecs::unimplemented(path == UnaryPath::kHttp ? "HTTP end point" : "ModelInfer RPC",
                               " doesn't support models with decoupled transaction policy");
}

}  // namespace infergate::gateway::builtin
