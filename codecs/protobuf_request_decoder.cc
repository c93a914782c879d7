#include "codecs/protobuf_request_decoder.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "codecs/protobuf_wire.h"

namespace infergate::codecs {
namespace {

using Bytes = std::span<const uint8_t>;

// ModelInferRequest field numbers.
constexpr uint32_t kModelName = 1, kModelVersion = 2, kId = 3, kParameters = 4, kInputs = 5,
                   kOutputs = 6, kRawInputContents = 7;

// The top-level fields, gathered in one pass (they may come in any order).
struct TopLevel {
  std::string_view model_name, model_version, id;
  std::vector<Bytes> inputs, outputs, raw;
};

struct PendingInput {
  InferInput input;
  std::vector<Bytes> contents;  // every occurrence of InferInputTensor.contents
};

Status gatherTopLevel(Bytes message, const DecodeLimits& limits, Parameters& parameters,
                      TopLevel& top) {
  return forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(Bytes value, reader.readLengthDelimited());
    switch (tag.number) {
      case kModelName: {
        INFERGATE_ASSIGN_OR_RETURN(top.model_name, asUtf8(value, "the model name"));
        return absl::OkStatus();
      }
      case kModelVersion: {
        INFERGATE_ASSIGN_OR_RETURN(top.model_version, asUtf8(value, "the model version"));
        return absl::OkStatus();
      }
      case kId: {
        INFERGATE_ASSIGN_OR_RETURN(top.id, asUtf8(value, "the request id"));
        return absl::OkStatus();
      }
      case kParameters:
        return decodeParameterEntry(value, "the request", "", parameters);
      case kInputs:
        return pushCapped(top.inputs, value, "request", "inputs", limits);
      case kOutputs:
        return pushCapped(top.outputs, value, "request", "outputs", limits);
      case kRawInputContents:
        return pushCapped(top.raw, value, "request", "raw_input_contents entries", limits);
      default:
        return absl::OkStatus();  // an unknown LEN field, already skipped
    }
  });
}

// ---- tensor parameters lifted into fields -----------------------------------------

// An int64_param >= 0 under `key`, removed from `params`; nothing when absent.
StatusOr<std::optional<uint64_t>> takeNonNegativeInt64(Parameters& params, std::string_view key,
                                                       std::string_view tensor) {
  const ParamValue* value = params.find(key);
  if (value == nullptr) return std::optional<uint64_t>();
  const int64_t* number = std::get_if<int64_t>(value);
  if (number == nullptr) {
    return invalidArgument("tensor '", tensor, "': parameter '", key, "' must be an int64_param");
  }
  if (*number < 0) {
    return invalidArgument("tensor '", tensor, "': parameter '", key, "' must be >= 0, got ",
                           *number);
  }
  uint64_t out = static_cast<uint64_t>(*number);
  params.erase(key);
  return std::optional<uint64_t>(out);
}

Status liftSharedMemory(Parameters& params, std::string_view tensor,
                        std::optional<SharedMemoryRef>& out) {
  std::optional<std::string> region;
  if (const ParamValue* value = params.find(param::kShmRegion)) {
    const std::string* name = std::get_if<std::string>(value);
    if (name == nullptr) {
      return invalidArgument("tensor '", tensor, "': parameter '", param::kShmRegion,
                             "' must be a string_param");
    }
    region = *name;
    params.erase(param::kShmRegion);
  }
  INFERGATE_ASSIGN_OR_RETURN(std::optional<uint64_t> offset,
                             takeNonNegativeInt64(params, param::kShmOffset, tensor));
  INFERGATE_ASSIGN_OR_RETURN(std::optional<uint64_t> byte_size,
                             takeNonNegativeInt64(params, param::kShmByteSize, tensor));
  if (!region) {
    if (offset || byte_size) {
      return invalidArgument("tensor '", tensor, "': '", param::kShmOffset, "' and '",
                             param::kShmByteSize, "' need '", param::kShmRegion, "'");
    }
    return absl::OkStatus();
  }
  if (!byte_size) {
    return invalidArgument("tensor '", tensor, "': '", param::kShmRegion, "' needs '",
                           param::kShmByteSize, "'");
  }
  out = SharedMemoryRef{std::move(*region), offset.value_or(0), *byte_size};
  return absl::OkStatus();
}

// ---- inputs ------------------------------------------------------------------------

StatusOr<PendingInput> decodeInput(Bytes bytes, const DecodeLimits& limits) {
  PendingInput pending;
  InferInput& input = pending.input;
  std::string_view datatype;
  INFERGATE_RETURN_IF_ERROR(forEachField(bytes, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.number == 3) return readShapeDims(reader, tag, input.name, input.shape);
    if (tag.type != WireType::kLen || tag.number > 5) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(Bytes value, reader.readLengthDelimited());
    if (tag.number == 1) {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view name, asUtf8(value, "an input name"));
      input.name = std::string(name);
    }
    if (tag.number == 2) {
      INFERGATE_ASSIGN_OR_RETURN(datatype, asUtf8(value, "a datatype"));
    }
    if (tag.number == 4) return decodeParameterEntry(value, "input", input.name, input.parameters);
    if (tag.number == 5) pending.contents.push_back(value);
    return absl::OkStatus();
  }));
  input.datatype = dataTypeFromName(datatype);
  if (input.datatype == DataType::kInvalid) {
    return invalidArgument("input '", input.name, "' has an invalid datatype '", datatype, "'");
  }
  INFERGATE_RETURN_IF_ERROR(checkShapeLimits(input.shape, input.name, limits));
  INFERGATE_RETURN_IF_ERROR(liftSharedMemory(input.parameters, input.name, input.shared_memory));
  if (input.shared_memory && !pending.contents.empty()) {
    return invalidArgument("input '", input.name,
                           "' has both shared memory parameters and a contents field");
  }
  return pending;
}

Status rejectDuplicateNames(const std::vector<PendingInput>& inputs) {
  std::vector<std::string_view> names;
  names.reserve(inputs.size());
  for (const PendingInput& p : inputs) names.push_back(p.input.name);
  std::sort(names.begin(), names.end());
  auto duplicate = std::adjacent_find(names.begin(), names.end());
  if (duplicate != names.end()) {
    return invalidArgument("input '", *duplicate, "' is given more than once");
  }
  return absl::OkStatus();
}

// Attaches each non-shm input's data: typed contents, else the next raw entry.
Status attachData(std::vector<PendingInput>& inputs, const std::vector<Bytes>& raw,
                  const Buffer& message, std::string_view model, const DecodeLimits& limits) {
  size_t next_raw = 0;
  for (PendingInput& pending : inputs) {
    InferInput& input = pending.input;
    if (input.shared_memory) continue;
    if (!pending.contents.empty()) {
      if (!raw.empty()) {
        return invalidArgument(
            "contents field must not be specified when using "
            "raw_input_contents for '",
            input.name, "' for model '", model, "'");
      }
      INFERGATE_ASSIGN_OR_RETURN(
          input.data, typedContentsToRaw(input.name, input.datatype, input.shape, pending.contents,
                                         limits.max_tensor_bytes));
      continue;
    }
    if (next_raw >= raw.size()) {
      return invalidArgument("unable to find data for input tensor '", input.name, "' for model '",
                             model, "'");
    }
    Bytes entry = raw[next_raw++];
    input.data = message.slice(static_cast<size_t>(entry.data() - message.data()), entry.size());
    INFERGATE_RETURN_IF_ERROR(
        validateTensorData(input.name, input.datatype, input.shape, input.data));
  }
  if (next_raw < raw.size()) {
    return invalidArgument("request has ", raw.size(), " raw_input_contents entries but its ",
                           "inputs without shared memory or contents use only ", next_raw);
  }
  return absl::OkStatus();
}

// ---- requested outputs ---------------------------------------------------------------

Status liftOutputParameters(RequestedOutput& output) {
  Parameters& params = output.parameters;
  if (const ParamValue* value = params.find(param::kClassification)) {
    const int64_t* count = std::get_if<int64_t>(value);
    if (count == nullptr) {
      return invalidArgument("output '", output.name, "': parameter '", param::kClassification,
                             "' must be an int64_param");
    }
    if (*count <= 0) {  // PROTOCOL 9.1: 0 is refused too (Triton's words say ">= 0")
      return invalidArgument("output '", output.name, "': parameter '", param::kClassification,
                             "' must be > 0, got ", *count);
    }
    output.classification = static_cast<uint64_t>(*count);
    params.erase(param::kClassification);
  }
  if (const ParamValue* value = params.find(param::kBinaryData)) {
    const bool* binary = std::get_if<bool>(value);
    if (binary == nullptr) {
      return invalidArgument("output '", output.name, "': parameter '", param::kBinaryData,
                             "' must be a bool_param");
    }
    output.binary_data = *binary;
    params.erase(param::kBinaryData);
  }
  return liftSharedMemory(params, output.name, output.shared_memory);
}

StatusOr<RequestedOutput> decodeOutput(Bytes bytes) {
  RequestedOutput output;
  INFERGATE_RETURN_IF_ERROR(forEachField(bytes, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || (tag.number != 1 && tag.number != 2)) {
      return reader.skip(tag);
    }
    INFERGATE_ASSIGN_OR_RETURN(Bytes value, reader.readLengthDelimited());
    if (tag.number == 1) {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view name, asUtf8(value, "an output name"));
      output.name = std::string(name);
      return absl::OkStatus();
    }
    return decodeParameterEntry(value, "output", output.name, output.parameters);
  }));
  INFERGATE_RETURN_IF_ERROR(liftOutputParameters(output));
  return output;
}

}  // namespace

namespace {

// The kinds gRPC allows for the request parameters Triton reads itself (PROTOCOL 9.2-9.4,
// pitfall 11): a kind it does not take is INVALID_ARGUMENT, naming the key and the kind.
Status checkRequestParameterKinds(const Parameters& parameters) {
  for (const auto& [key, value] : parameters) {
    const bool is_int64 = std::holds_alternative<int64_t>(value);
    const bool is_uint64 = std::holds_alternative<uint64_t>(value);
    const bool is_bool = std::holds_alternative<bool>(value);
    const bool is_string = std::holds_alternative<std::string>(value);
    std::string_view wanted;
    if (key == param::kSequenceId) {
      if (is_string || is_int64) continue;  // an int64 is taken as the uint64 id Triton keeps
      wanted = "an int64_param or a string_param";
    } else if (key == param::kSequenceStart || key == param::kSequenceEnd) {
      if (is_bool) continue;
      wanted = "a bool_param";
    } else if (key == param::kPriority) {
      if (is_uint64 || (is_int64 && std::get<int64_t>(value) >= 0)) continue;
      wanted = "a non-negative int64_param or a uint64_param";
    } else if (key == param::kTimeout) {
      if (is_int64 && std::get<int64_t>(value) >= 0) continue;
      wanted = "a non-negative int64_param";
    } else if (key == param::kEnableEmptyFinalResponse) {
      if (is_bool) continue;
      wanted = "a bool_param";
    } else if (key.substr(0, param::kTritonPrefix.size()) == param::kTritonPrefix) {
      return invalidArgument("parameter keys starting with 'triton_' are reserved for Triton "
                             "usage and should not be specified: '",
                             key, "'");
    } else {
      if (!is_uint64) continue;
      wanted = "an int64_param, bool_param, string_param or double_param (not uint64_param)";
    }
    return invalidArgument("parameter '", key, "' must be ", wanted);
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<InferRequest> ProtobufRequestDecoder::decode(const Buffer& message) const {
  if (message.size() > limits_.max_binary_body_bytes) {
    return resourceExhausted("ModelInferRequest of ", message.size(),
                             " bytes exceeds the limit of ", limits_.max_binary_body_bytes);
  }
  InferRequest request;
  TopLevel top;
  INFERGATE_RETURN_IF_ERROR(gatherTopLevel(message.span(), limits_, request.parameters, top));
  INFERGATE_RETURN_IF_ERROR(checkRequestParameterKinds(request.parameters));
  request.model_name = top.model_name;
  request.model_version = top.model_version;
  request.id = top.id;

  std::vector<PendingInput> inputs;
  inputs.reserve(top.inputs.size());
  for (Bytes bytes : top.inputs) {
    INFERGATE_ASSIGN_OR_RETURN(PendingInput input, decodeInput(bytes, limits_));
    inputs.push_back(std::move(input));
  }
  INFERGATE_RETURN_IF_ERROR(rejectDuplicateNames(inputs));
  INFERGATE_RETURN_IF_ERROR(attachData(inputs, top.raw, message, top.model_name, limits_));
  request.inputs.reserve(inputs.size());
  for (PendingInput& pending : inputs) request.inputs.push_back(std::move(pending.input));

  request.outputs.reserve(top.outputs.size());
  for (Bytes bytes : top.outputs) {
    INFERGATE_ASSIGN_OR_RETURN(RequestedOutput output, decodeOutput(bytes));
    request.outputs.push_back(std::move(output));
  }
  return request;
}

}  // namespace infergate::codecs
