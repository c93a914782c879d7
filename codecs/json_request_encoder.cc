#include "codecs/json_request_encoder.h"

#include "codecs/json_internal.h"
#include "codecs/json_writer.h"

namespace infergate::codecs {
namespace {

using json_internal::appendParamValue;
using json_internal::appendTensorData;

bool isTritonKey(std::string_view key) {
  return key.substr(0, param::kTritonPrefix.size()) == param::kTritonPrefix;
}

// Writes `"key":value` pairs of `params` after whatever the object already holds.
void appendParamEntries(std::string& out, const Parameters& params, bool& first,
                        bool drop_triton) {
  for (const auto& [key, value] : params) {
    if (drop_triton && isTritonKey(key)) continue;
    if (!first) out.push_back(',');
    first = false;
    appendJsonString(out, key);
    out.push_back(':');
    appendParamValue(out, value);
  }
}

void appendShmEntries(std::string& out, const SharedMemoryRef& shm, bool& first) {
  if (!first) out.push_back(',');
  first = false;
  out.append("\"shared_memory_region\":");
  appendJsonString(out, shm.region);
  out.append(",\"shared_memory_byte_size\":");
  appendJsonUint(out, shm.byte_size);
  if (shm.offset != 0) {
    out.append(",\"shared_memory_offset\":");
    appendJsonUint(out, shm.offset);
  }
}

}  // namespace

StatusOr<HttpInferBody> JsonRequestEncoder::encode(const InferRequest& request) const {
  std::string json;
  json.reserve(256);
  std::vector<const Buffer*> blobs;
  json.push_back('{');
  if (!request.id.empty()) {
    json.append("\"id\":");
    appendJsonString(json, request.id);
    json.push_back(',');
  }
  json.append("\"inputs\":[");
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const InferInput& input = request.inputs[i];
    if (i) json.push_back(',');
    json.append("{\"name\":");
    appendJsonString(json, input.name);
    json.append(",\"shape\":[");
    for (size_t d = 0; d < input.shape.rank(); ++d) {
      if (d) json.push_back(',');
      appendJsonInt(json, input.shape[d]);
    }
    json.append("],\"datatype\":");
    appendJsonString(json, dataTypeName(input.datatype));
    bool binary = !input.shared_memory && (options_.binary_inputs || isRawOnly(input.datatype));
    if (!input.shared_memory) {
      INFERGATE_RETURN_IF_ERROR(
          validateTensorData(input.name, input.datatype, input.shape, input.data));
    }
    bool has_params = !input.parameters.empty() || input.shared_memory || binary;
    if (has_params) {
      json.append(",\"parameters\":{");
      bool first = true;
      appendParamEntries(json, input.parameters, first, false);
      if (input.shared_memory) appendShmEntries(json, *input.shared_memory, first);
      if (binary) {
        if (!first) json.push_back(',');
        json.append("\"binary_data_size\":");
        appendJsonUint(json, input.data.size());
        blobs.push_back(&input.data);
      }
      json.push_back('}');
    }
    if (!input.shared_memory && !binary) {
      json.append(",\"data\":");
      INFERGATE_RETURN_IF_ERROR(appendTensorData(json, input.datatype, input.data, input.name));
    }
    json.push_back('}');
  }
  json.push_back(']');
  if (!request.outputs.empty()) {
    json.append(",\"outputs\":[");
    for (size_t i = 0; i < request.outputs.size(); ++i) {
      const RequestedOutput& output = request.outputs[i];
      if (i) json.push_back(',');
      json.append("{\"name\":");
      appendJsonString(json, output.name);
      bool has_params = !output.parameters.empty() || output.binary_data ||
                        output.classification || output.shared_memory;
      if (has_params) {
        json.append(",\"parameters\":{");
        bool first = true;
        appendParamEntries(json, output.parameters, first, false);
        if (output.binary_data) {
          if (!first) json.push_back(',');
          first = false;
          json.append(*output.binary_data ? "\"binary_data\":true" : "\"binary_data\":false");
        }
        if (output.classification) {
          if (!first) json.push_back(',');
          first = false;
          json.append("\"classification\":");
          appendJsonUint(json, output.classification);
        }
        if (output.shared_memory) appendShmEntries(json, *output.shared_memory, first);
        json.push_back('}');
      }
      json.push_back('}');
    }
    json.push_back(']');
  }
  bool has_params = request.binary_data_output.has_value();
  for (const auto& [key, value] : request.parameters) {
    if (!(options_.drop_triton_parameters && isTritonKey(key))) has_params = true;
  }
  if (has_params) {
    json.append(",\"parameters\":{");
    bool first = true;
    appendParamEntries(json, request.parameters, first, options_.drop_triton_parameters);
    if (request.binary_data_output) {
      if (!first) json.push_back(',');
      json.append(*request.binary_data_output ? "\"binary_data_output\":true"
                                              : "\"binary_data_output\":false");
    }
    json.push_back('}');
  }
  json.push_back('}');

  HttpInferBody out;
  size_t json_size = json.size();
  out.body.append(Buffer::fromString(std::move(json)));
  if (!blobs.empty()) {
    out.header_length = json_size;
    for (const Buffer* blob : blobs) out.body.append(*blob);
  }
  return out;
}

}  // namespace infergate::codecs
