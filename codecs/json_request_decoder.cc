#include "codecs/json_request_decoder.h"

#include "codecs/json_internal.h"

namespace infergate::codecs {
namespace {

using namespace json_internal;  // NOLINT: the codec's own plumbing

bool isReservedTritonKey(std::string_view key) {
  return key.substr(0, param::kTritonPrefix.size()) == param::kTritonPrefix;
}

Status decodeRequestParameters(od::value value, InferRequest& request) {
  od::object object;
  if (value.get_object().get(object)) {
    return invalidArgument("request 'parameters' must be a JSON object");
  }
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "parameters");
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(error, "parameters");
    std::string owned_key(key);  // the key view dies at the next string decode
    if (request.parameters.contains(owned_key) ||
        (owned_key == param::kBinaryDataOutput && request.binary_data_output)) {
      return repeatedKey("request 'parameters'", owned_key);
    }
    if (isReservedTritonKey(owned_key)) {
      return invalidArgument("parameter keys starting with 'triton_' are reserved for Triton "
                             "usage and should not be specified: '",
                             owned_key, "'");
    }
    if (owned_key == param::kBinaryDataOutput) {
      INFERGATE_ASSIGN_OR_RETURN(request.binary_data_output,
                                 decodeBool(field.value(), param::kBinaryDataOutput));
      continue;
    }
    INFERGATE_ASSIGN_OR_RETURN(ParamValue v, decodeParamValue(field.value(), owned_key));
    if (owned_key == param::kSequenceId) {
      bool ok = std::holds_alternative<std::string>(v) ||
                (std::holds_alternative<int64_t>(v) && std::get<int64_t>(v) >= 0) ||
                std::holds_alternative<uint64_t>(v);
      if (!ok) {
        return invalidArgument("parameter 'sequence_id' must be an unsigned integer or a string");
      }
    } else if (owned_key == param::kSequenceStart || owned_key == param::kSequenceEnd) {
      if (!std::holds_alternative<bool>(v)) {
        return invalidArgument("parameter '", owned_key, "' must be a boolean");
      }
    } else if (owned_key == param::kPriority || owned_key == param::kTimeout) {
      bool ok = (std::holds_alternative<int64_t>(v) && std::get<int64_t>(v) >= 0) ||
                std::holds_alternative<uint64_t>(v);
      if (!ok) {
        return invalidArgument("parameter '", owned_key, "' must be an unsigned integer");
      }
    }
    if (request.parameters.size() == kMaxParametersPerMap) {
      return resourceExhausted("more than ", kMaxParametersPerMap, " parameters in the request");
    }
    request.parameters.set(std::move(owned_key), std::move(v));
  }
  return absl::OkStatus();
}

// The tensor-level parameters shared by inputs and requested outputs.
struct TensorParams {
  std::optional<uint64_t> binary_data_size;
  std::optional<bool> binary_data;
  std::optional<uint64_t> classification;
  std::optional<std::string> shm_region;
  std::optional<uint64_t> shm_offset;
  std::optional<uint64_t> shm_byte_size;
  Parameters others;
};

Status decodeTensorParameters(od::value value, std::string_view tensor, TensorParams& out) {
  od::object object;
  if (value.get_object().get(object)) {
    return invalidArgument("tensor '", tensor, "': 'parameters' must be a JSON object");
  }
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "parameters");
    std::string_view key_view;
    if (auto error = field.unescaped_key().get(key_view)) return jsonError(error, "parameters");
    std::string key(key_view);
    const bool repeated =
        (key == param::kBinaryDataSize && out.binary_data_size) ||
        (key == param::kBinaryData && out.binary_data) ||
        (key == param::kClassification && out.classification) ||
        (key == param::kShmRegion && out.shm_region) || (key == param::kShmOffset && out.shm_offset) ||
        (key == param::kShmByteSize && out.shm_byte_size) || out.others.contains(key);
    if (repeated) return repeatedKey(strCat("tensor '", tensor, "' parameters"), key);
    if (key == param::kBinaryDataSize) {
      INFERGATE_ASSIGN_OR_RETURN(out.binary_data_size, decodeUint(field.value(), key));
    } else if (key == param::kBinaryData) {
      INFERGATE_ASSIGN_OR_RETURN(out.binary_data, decodeBool(field.value(), key));
    } else if (key == param::kClassification) {
      INFERGATE_ASSIGN_OR_RETURN(out.classification, decodeUint(field.value(), key));
    } else if (key == param::kShmRegion) {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view region, decodeString(field.value(), key));
      out.shm_region = std::string(region);
    } else if (key == param::kShmOffset) {
      INFERGATE_ASSIGN_OR_RETURN(out.shm_offset, decodeUint(field.value(), key));
    } else if (key == param::kShmByteSize) {
      INFERGATE_ASSIGN_OR_RETURN(out.shm_byte_size, decodeUint(field.value(), key));
    } else {
      INFERGATE_ASSIGN_OR_RETURN(ParamValue v, decodeParamValue(field.value(), key));
      if (out.others.size() == kMaxParametersPerMap) {
        return resourceExhausted("more than ", kMaxParametersPerMap, " parameters in tensor '",
                                 tensor, "'");
      }
      out.others.set(std::move(key), std::move(v));
    }
  }
  return absl::OkStatus();
}

std::optional<SharedMemoryRef> shmRefOf(const TensorParams& p) {
  if (!p.shm_region) return std::nullopt;
  return SharedMemoryRef{*p.shm_region, p.shm_offset.value_or(0), p.shm_byte_size.value_or(0)};
}

class InputDecoder {
 public:
  InputDecoder(const DecodeLimits& limits) : limits_(limits) {}

  Status decode(od::value value, size_t index, JsonInferRequestHeader& header) {
    od::object object;
    if (value.get_object().get(object)) {
      return invalidArgument("input ", index, " must be a JSON object");
    }
    InferInput input;
    TensorParams params;
    bool has_name = false, has_datatype = false, has_shape = false, has_data = false;
    bool has_parameters = false, data_deferred = false;
    std::string tensor_label = "#" + std::to_string(index);
    for (auto field_result : object) {
      od::field field;
      if (auto error = std::move(field_result).get(field)) return jsonError(error, "input");
      std::string_view key;
      if (auto error = field.unescaped_key().get(key)) return jsonError(error, "input");
      const bool repeated = (key == "name" && has_name) || (key == "datatype" && has_datatype) ||
                            (key == "shape" && has_shape) || (key == "data" && has_data) ||
                            (key == "parameters" && has_parameters);
      if (repeated) return repeatedKey(strCat("input '", tensor_label, "'"), key);
      if (key == "name") {
        INFERGATE_ASSIGN_OR_RETURN(std::string_view name, decodeString(field.value(), "name"));
        input.name = std::string(name);
        tensor_label = input.name;
        has_name = true;
      } else if (key == "datatype") {
        INFERGATE_ASSIGN_OR_RETURN(std::string_view dt, decodeString(field.value(), "datatype"));
        input.datatype = dataTypeFromName(dt);
        if (input.datatype == DataType::kInvalid) {
          return invalidArgument("input '", tensor_label, "': invalid datatype '", dt, "'");
        }
        has_datatype = true;
      } else if (key == "shape") {
        INFERGATE_ASSIGN_OR_RETURN(input.shape, decodeShape(field.value(), tensor_label, limits_));
        has_shape = true;
      } else if (key == "parameters") {
        has_parameters = true;
        INFERGATE_RETURN_IF_ERROR(decodeTensorParameters(field.value(), tensor_label, params));
      } else if (key == "data") {
        has_data = true;
        if (has_name && has_datatype && has_shape) {
          INFERGATE_ASSIGN_OR_RETURN(input.data, decodeTensorData(field.value(), input.datatype,
                                                                  input.shape, tensor_label,
                                                                  limits_));
        } else {
          data_deferred = true;  // skipped now; found again once type and shape are known
        }
      }
    }
    if (!has_name) return invalidArgument("input ", index, " has no 'name'");
    if (!has_datatype) return invalidArgument("input '", input.name, "' has no 'datatype'");
    if (!has_shape) return invalidArgument("input '", input.name, "' has no 'shape'");
    INFERGATE_RETURN_IF_ERROR(checkOneDataSource(input.name, has_data, params));
    if (data_deferred) {
      if (auto error = object.reset().error()) return jsonError(error, "input");
      od::value data;
      if (auto error = object.find_field_unordered("data").get(data)) {
        return jsonError(error, "input");
      }
      INFERGATE_ASSIGN_OR_RETURN(input.data, decodeTensorData(data, input.datatype, input.shape,
                                                              input.name, limits_));
    }
    input.shared_memory = shmRefOf(params);
    if (!params.shm_region && (params.shm_offset || params.shm_byte_size)) {
      return invalidArgument("input '", input.name,
                             "': shared_memory_offset / shared_memory_byte_size given without "
                             "shared_memory_region");
    }
    if (params.binary_data || params.classification) {
      // Output-only keys on an input: kept as ordinary parameters so nothing is lost.
      if (params.binary_data) params.others.set(std::string(param::kBinaryData), *params.binary_data);
      if (params.classification) {
        params.others.set(std::string(param::kClassification), *params.classification);
      }
    }
    input.parameters = std::move(params.others);
    for (const InferInput& other : header.request.inputs) {
      if (other.name == input.name) {
        return invalidArgument("input '", input.name, "' appears more than once");
      }
    }
    if (params.binary_data_size) {
      header.binary_inputs.push_back({header.request.inputs.size(), *params.binary_data_size});
    }
    header.request.inputs.push_back(std::move(input));
    return absl::OkStatus();
  }

 private:
  static Status checkOneDataSource(const std::string& name, bool has_data,
                                   const TensorParams& params) {
    int sources = (has_data ? 1 : 0) + (params.binary_data_size ? 1 : 0) +
                  (params.shm_region ? 1 : 0);
    if (sources == 1) return absl::OkStatus();
    std::string given;
    if (has_data) given += " 'data'";
    if (params.binary_data_size) given += " 'binary_data_size'";
    if (params.shm_region) given += " 'shared_memory_region'";
    if (given.empty()) given = " none";
    return invalidArgument("input '", name,
                           "' must have exactly one of 'data', 'binary_data_size' or "
                           "'shared_memory_region'; given:",
                           given);
  }

  const DecodeLimits& limits_;
};

Status decodeOutput(od::value value, size_t index, InferRequest& request) {
  od::object object;
  if (value.get_object().get(object)) {
    return invalidArgument("output ", index, " must be a JSON object");
  }
  RequestedOutput output;
  TensorParams params;
  bool has_name = false, has_parameters = false;
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "output");
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(error, "output");
    if ((key == "name" && has_name) || (key == "parameters" && has_parameters)) {
      return repeatedKey(has_name ? strCat("output '", output.name, "'")
                                  : strCat("output ", index),
                         key);
    }
    if (key == "name") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view name, decodeString(field.value(), "name"));
      output.name = std::string(name);
      has_name = true;
    } else if (key == "parameters") {
      has_parameters = true;
      INFERGATE_RETURN_IF_ERROR(decodeTensorParameters(
          field.value(), has_name ? output.name : "#" + std::to_string(index), params));
    }
  }
  if (!has_name) return invalidArgument("output ", index, " has no 'name'");
  output.binary_data = params.binary_data;
  output.classification = params.classification.value_or(0);
  output.shared_memory = shmRefOf(params);
  if (output.shared_memory && output.classification) {
    return invalidArgument("output '", output.name,
                           "': shared memory and classification cannot be used together");
  }
  if (output.shared_memory && output.binary_data.value_or(false)) {
    return invalidArgument("output '", output.name,
                           "': shared memory and binary_data cannot be used together");
  }
  if (params.binary_data_size) {
    params.others.set(std::string(param::kBinaryDataSize), *params.binary_data_size);
  }
  output.parameters = std::move(params.others);
  if (request.findOutput(output.name)) {
    return invalidArgument("output '", output.name, "' is requested more than once");
  }
  request.outputs.push_back(std::move(output));
  return absl::OkStatus();
}

}  // namespace

StatusOr<JsonInferRequestHeader> JsonRequestDecoder::decode(std::string_view json,
                                                            size_t readable) const {
  Document document;
  INFERGATE_RETURN_IF_ERROR(document.parse(json, readable, limits_));
  INFERGATE_ASSIGN_OR_RETURN(od::object root, rootObject(document, "the inference request"));
  JsonInferRequestHeader header;
  bool has_id = false, has_parameters = false, has_inputs = false, has_outputs = false;
  InputDecoder input_decoder(limits_);
  for (auto field_result : root) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "the request");
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(error, "the request");
    bool* seen = key == "id"           ? &has_id
                 : key == "parameters" ? &has_parameters
                 : key == "inputs"     ? &has_inputs
                 : key == "outputs"    ? &has_outputs
                                       : nullptr;
    if (seen && *seen) return repeatedKey("the inference request", key);
    if (seen) *seen = true;
    if (key == "id") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view id, decodeString(field.value(), "id"));
      header.request.id = std::string(id);
    } else if (key == "parameters") {
      INFERGATE_RETURN_IF_ERROR(decodeRequestParameters(field.value(), header.request));
    } else if (key == "inputs") {
      od::array inputs;
      if (field.value().get_array().get(inputs)) {
        return invalidArgument("'inputs' must be an array");
      }
      size_t index = 0;
      for (auto input_result : inputs) {
        od::value input;
        if (auto error = std::move(input_result).get(input)) return jsonError(error, "inputs");
        if (index >= limits_.max_tensors) {
          return resourceExhausted("more than ", limits_.max_tensors, " inputs");
        }
        INFERGATE_RETURN_IF_ERROR(input_decoder.decode(input, index++, header));
      }
    } else if (key == "outputs") {
      od::array outputs;
      if (field.value().get_array().get(outputs)) {
        return invalidArgument("'outputs' must be an array");
      }
      size_t index = 0;
      for (auto output_result : outputs) {
        od::value output;
        if (auto error = std::move(output_result).get(output)) return jsonError(error, "outputs");
        if (index >= limits_.max_tensors) {
          return resourceExhausted("more than ", limits_.max_tensors, " outputs");
        }
        INFERGATE_RETURN_IF_ERROR(decodeOutput(output, index++, header.request));
      }
    }
  }
  if (!has_inputs) return invalidArgument("the inference request has no 'inputs'");
  if (hasTrailingContent(document)) {
    return invalidArgument("unexpected data after the JSON object of the inference request");
  }
  return header;
}

}  // namespace infergate::codecs
