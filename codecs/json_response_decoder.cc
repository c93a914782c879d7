#include "codecs/json_response_decoder.h"

#include "codecs/json_internal.h"

namespace infergate::codecs {
namespace {

using namespace json_internal;  // NOLINT: the codec's own plumbing

Status decodeParameterObject(od::value value, std::string_view owner, Parameters& out) {
  od::object object;
  if (value.get_object().get(object)) {
    return invalidArgument(owner, ": 'parameters' must be a JSON object");
  }
  for (auto field_result : object) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "parameters");
    std::string_view key_view;
    if (auto error = field.unescaped_key().get(key_view)) return jsonError(error, "parameters");
    std::string key(key_view);
    if (out.contains(key)) return repeatedKey(strCat(owner, " parameters"), key);
    INFERGATE_ASSIGN_OR_RETURN(ParamValue v, decodeParamValue(field.value(), key));
    if (out.size() == kMaxParametersPerMap) {
      return resourceExhausted("more than ", kMaxParametersPerMap, " parameters in ", owner);
    }
    out.set(std::move(key), std::move(v));
  }
  return absl::OkStatus();
}

class OutputDecoder {
 public:
  explicit OutputDecoder(const DecodeLimits& limits) : limits_(limits) {}

  Status decode(od::value value, size_t index, JsonInferResponseHeader& header) {
    od::object object;
    if (value.get_object().get(object)) {
      return invalidArgument("output ", index, " must be a JSON object");
    }
    InferOutput output;
    std::string label = "#" + std::to_string(index);
    bool has_name = false, has_datatype = false, has_shape = false;
    bool has_data = false, has_parameters = false, deferred = false;
    for (auto field_result : object) {
      od::field field;
      if (auto error = std::move(field_result).get(field)) return jsonError(error, "output");
      std::string_view key;
      if (auto error = field.unescaped_key().get(key)) return jsonError(error, "output");
      const bool repeated = (key == "name" && has_name) || (key == "datatype" && has_datatype) ||
                            (key == "shape" && has_shape) || (key == "data" && has_data) ||
                            (key == "parameters" && has_parameters);
      if (repeated) return repeatedKey(strCat("output '", label, "'"), key);
      if (key == "name") {
        INFERGATE_ASSIGN_OR_RETURN(std::string_view name, decodeString(field.value(), "name"));
        output.name = std::string(name);
        label = output.name;
        has_name = true;
      } else if (key == "datatype") {
        INFERGATE_ASSIGN_OR_RETURN(std::string_view dt, decodeString(field.value(), "datatype"));
        output.datatype = dataTypeFromName(dt);
        if (output.datatype == DataType::kInvalid) {
          return invalidArgument("output '", label, "': invalid datatype '", dt, "'");
        }
        has_datatype = true;
      } else if (key == "shape") {
        INFERGATE_ASSIGN_OR_RETURN(output.shape, decodeShape(field.value(), label, limits_));
        has_shape = true;
      } else if (key == "parameters") {
        has_parameters = true;
        INFERGATE_RETURN_IF_ERROR(
            decodeParameterObject(field.value(), "output '" + label + "'", output.parameters));
      } else if (key == "data") {
        has_data = true;
        if (has_datatype && has_shape) {
          INFERGATE_ASSIGN_OR_RETURN(output.data, decodeTensorData(field.value(), output.datatype,
                                                                   output.shape, label, limits_));
        } else {
          deferred = true;
        }
      }
    }
    if (!has_name) return invalidArgument("output ", index, " has no 'name'");
    if (!has_datatype) return invalidArgument("output '", output.name, "' has no 'datatype'");
    if (!has_shape) return invalidArgument("output '", output.name, "' has no 'shape'");
    if (deferred) {
      if (auto error = object.reset().error()) return jsonError(error, "output");
      od::value data;
      if (auto error = object.find_field_unordered("data").get(data)) {
        return jsonError(error, "output");
      }
      INFERGATE_ASSIGN_OR_RETURN(output.data, decodeTensorData(data, output.datatype,
                                                               output.shape, label, limits_));
    }
    std::optional<uint64_t> binary_size;
    if (const ParamValue* v = output.parameters.find(param::kBinaryDataSize)) {
      if (const auto* i = std::get_if<int64_t>(v); i && *i >= 0) {
        binary_size = static_cast<uint64_t>(*i);
      } else if (const auto* u = std::get_if<uint64_t>(v)) {
        binary_size = *u;
      } else {
        return invalidArgument("output '", output.name,
                               "': binary_data_size must be a non-negative integer");
      }
      output.parameters.erase(param::kBinaryDataSize);
    }
    if (binary_size && has_data) {
      return invalidArgument("output '", output.name,
                             "' has both 'data' and 'binary_data_size'");
    }
    if (header.response.findOutput(output.name)) {
      return invalidArgument("output '", output.name, "' appears more than once");
    }
    if (binary_size) {
      header.binary_outputs.push_back({header.response.outputs.size(), *binary_size});
    }
    header.response.outputs.push_back(std::move(output));
    return absl::OkStatus();
  }

 private:
  const DecodeLimits& limits_;
};

}  // namespace

StatusOr<JsonInferResponseHeader> JsonResponseDecoder::decode(std::string_view json,
                                                              size_t readable) const {
  Document document;
  INFERGATE_RETURN_IF_ERROR(document.parse(json, readable, limits_));
  INFERGATE_ASSIGN_OR_RETURN(od::object root, rootObject(document, "the inference response"));
  JsonInferResponseHeader header;
  bool has_id = false, has_name = false, has_version = false, has_parameters = false;
  bool has_outputs = false;
  OutputDecoder output_decoder(limits_);
  for (auto field_result : root) {
    od::field field;
    if (auto error = std::move(field_result).get(field)) return jsonError(error, "the response");
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return jsonError(error, "the response");
    bool* seen = key == "id"              ? &has_id
                 : key == "model_name"    ? &has_name
                 : key == "model_version" ? &has_version
                 : key == "parameters"    ? &has_parameters
                 : key == "outputs"       ? &has_outputs
                                          : nullptr;
    if (seen && *seen) return repeatedKey("the inference response", key);
    if (seen) *seen = true;
    if (key == "id") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view id, decodeString(field.value(), "id"));
      header.response.id = std::string(id);
    } else if (key == "model_name") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, decodeString(field.value(), "model_name"));
      header.response.model_name = std::string(v);
    } else if (key == "model_version") {
      INFERGATE_ASSIGN_OR_RETURN(std::string_view v, decodeString(field.value(), "model_version"));
      header.response.model_version = std::string(v);
    } else if (key == "parameters") {
      INFERGATE_RETURN_IF_ERROR(
          decodeParameterObject(field.value(), "the response", header.response.parameters));
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
        INFERGATE_RETURN_IF_ERROR(output_decoder.decode(output, index++, header));
      }
    }
  }
  if (!has_outputs) return invalidArgument("the inference response has no 'outputs'");
  if (hasTrailingContent(document)) {
    return invalidArgument("unexpected data after the JSON object of the inference response");
  }
  return header;
}

StatusOr<std::string> decodeJsonError(std::string_view body) {
  Document document;
  INFERGATE_RETURN_IF_ERROR(document.parse(body, body.size(), DecodeLimits{}));
  INFERGATE_ASSIGN_OR_RETURN(od::object root, rootObject(document, "the error body"));
  od::value error_value;
  if (root.find_field_unordered("error").get(error_value)) {
    return invalidArgument("the error body has no 'error' member");
  }
  INFERGATE_ASSIGN_OR_RETURN(std::string_view message, decodeString(error_value, "error"));
  return std::string(message);
}

}  // namespace infergate::codecs
