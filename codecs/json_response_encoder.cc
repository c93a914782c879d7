#include "codecs/json_response_encoder.h"

#include "codecs/json_internal.h"
#include "codecs/json_writer.h"

namespace infergate::codecs {

bool wantsBinaryOutput(const InferRequest& request, std::string_view output) {
  const RequestedOutput* requested = request.findOutput(output);
  if (requested && requested->binary_data) return *requested->binary_data;
  return request.binary_data_output.value_or(false);
}

Status appendJsonTensorData(std::string& out, DataType datatype, const Buffer& data,
                            std::string_view tensor) {
  return json_internal::appendTensorData(out, datatype, data, tensor);
}

void appendJsonParamValue(std::string& out, const ParamValue& value) {
  json_internal::appendParamValue(out, value);
}

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0 when there is none.
size_t utf8SequenceLength(std::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string validUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t n = utf8SequenceLength(text);
    if (n == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD for each byte that starts no valid sequence
      text.remove_prefix(1);
    } else {
      out.append(text.substr(0, n));
      text.remove_prefix(n);
    }
  }
  return out;
}

std::string encodeJsonError(std::string_view message) {
  std::string out = "{\"error\":";
  // A message may quote what the client sent (a model name from the URL): the body must
  // stay JSON, which is UTF-8.
  appendJsonString(out, validUtf8(message));
  out.push_back('}');
  return out;
}

StatusOr<HttpInferBody> JsonResponseEncoder::encode(const InferResponse& response,
                                                    const InferRequest& request) const {
  std::string json;
  size_t estimate = 128;
  for (const InferOutput& output : response.outputs) {
    if (!output.shared_memory && !wantsBinaryOutput(request, output.name)) {
      estimate += output.data.size() * 3;
    }
  }
  json.reserve(estimate);
  std::vector<const Buffer*> blobs;
  bool any_binary = false;
  json.push_back('{');
  if (!response.id.empty()) {
    json.append("\"id\":");
    appendJsonString(json, response.id);
    json.push_back(',');
  }
  json.append("\"model_name\":");
  appendJsonString(json, response.model_name);
  json.append(",\"model_version\":");
  appendJsonString(json, response.model_version);
  if (!response.parameters.empty()) {
    json.append(",\"parameters\":");
    json_internal::appendParameters(json, response.parameters);
  }
  json.append(",\"outputs\":[");
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const InferOutput& output = response.outputs[i];
    if (i) json.push_back(',');
    json.append("{\"name\":");
    appendJsonString(json, output.name);
    json.append(",\"datatype\":");
    appendJsonString(json, dataTypeName(output.datatype));
    json.append(",\"shape\":[");
    for (size_t d = 0; d < output.shape.rank(); ++d) {
      if (d) json.push_back(',');
      appendJsonInt(json, output.shape[d]);
    }
    json.push_back(']');
    const bool binary = !output.shared_memory && wantsBinaryOutput(request, output.name);
    if (!output.shared_memory) {
      INFERGATE_RETURN_IF_ERROR(
          validateTensorData(output.name, output.datatype, output.shape, output.data));
    }
    if (binary || !output.parameters.empty()) {
      json.append(",\"parameters\":{");
      bool first = true;
      for (const auto& [key, value] : output.parameters) {
        if (key == param::kBinaryDataSize) continue;  // ours decides
        if (!first) json.push_back(',');
        first = false;
        appendJsonString(json, key);
        json.push_back(':');
        json_internal::appendParamValue(json, value);
      }
      if (binary) {
        if (!first) json.push_back(',');
        json.append("\"binary_data_size\":");
        appendJsonUint(json, output.data.size());
        any_binary = true;
        blobs.push_back(&output.data);
      }
      json.push_back('}');
    }
    if (!binary && !output.shared_memory) {
      json.append(",\"data\":");
      INFERGATE_RETURN_IF_ERROR(
          json_internal::appendTensorData(json, output.datatype, output.data, output.name));
    }
    json.push_back('}');
  }
  json.append("]}");

  HttpInferBody out;
  size_t json_size = json.size();
  out.body.append(Buffer::fromString(std::move(json)));
  if (any_binary) {
    out.header_length = json_size;
    for (const Buffer* blob : blobs) out.body.append(*blob);
  }
  return out;
}

}  // namespace infergate::codecs
