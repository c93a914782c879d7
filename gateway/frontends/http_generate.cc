// The generate extension (PROTOCOL.md 5.6): POST .../generate and .../generate_stream.
// Top-level keys naming a model input become that tensor (shape from the model's dims),
// the others request parameters; each model response becomes one flat JSON object
// (outputs and response parameters as keys). generate_stream sends each as an SSE event
// (`data: <json>\n\n`) on a chunked 200 response; an error after the first event arrives
// inside the stream as `data: {"error":"..."}`.

#include <cstring>

#include "codecs/bytes_tensor.h"
#include "codecs/json_response_encoder.h"
#include "codecs/json_value.h"
#include "codecs/json_writer.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/execution_runner.h"
#include "gateway/frontends/http_frontend.h"

namespace infergate::gateway::frontends {

using codecs::JsonValue;
using http::HttpExchange;
using http::HttpResponse;

namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

codecs::Status appendElement(std::string& out, codecs::DataType type, const JsonValue& v,
                             std::string_view name) {
  using codecs::DataType;
  auto bad = [&](std::string_view want) {
    return codecs::invalidArgument("generate: input '", name, "' expects ", want, ", got ",
                                   v.toJson());
  };
  switch (type) {
    case DataType::kBool:
      if (!v.isBool()) return bad("booleans");
      out.push_back(v.asBool() ? 1 : 0);
      return absl::OkStatus();
    case DataType::kBytes:
      if (!v.isString()) return bad("strings");
      codecs::appendBytesElement(out, v.asString());
      return absl::OkStatus();
    case DataType::kFp32:
      if (!v.isNumber()) return bad("numbers");
      put(out, static_cast<float>(v.asDouble()));
      return absl::OkStatus();
    case DataType::kFp64:
      if (!v.isNumber()) return bad("numbers");
      put(out, v.asDouble());
      return absl::OkStatus();
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64: {
      auto u = v.asUint();
      if (!u || !v.isInteger()) return bad("non-negative integers");
      uint64_t x = *u;
      out.append(reinterpret_cast<const char*>(&x), codecs::elementSize(type));
      return absl::OkStatus();
    }
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64: {
      std::optional<int64_t> i = v.asInt();
      if (!i && v.asUint() && v.isInteger()) i = static_cast<int64_t>(*v.asUint());
      if (!i) return bad("integers");
      int64_t x = *i;
      out.append(reinterpret_cast<const char*>(&x), codecs::elementSize(type));
      return absl::OkStatus();
    }
    default:
      return codecs::invalidArgument("generate: input '", name, "' of type ",
                                     codecs::dataTypeName(type),
                                     " cannot be sent as JSON; use /infer with binary data");
  }
}

// The tensor for model input `spec` from a scalar or 1-D array; the shape follows the
// model's dims: fixed dims must divide the element count, the innermost -1 takes the rest,
// other -1s become 1; a batching model gets a batch of 1.
codecs::StatusOr<codecs::InferInput> inputFrom(const builtin::TensorSpec& spec, bool batching,
                                               const JsonValue& value) {
  std::vector<const JsonValue*> elements;
  if (value.isArray()) {
    for (const JsonValue& e : value.asArray()) {
      if (e.isArray() || e.isObject()) {
        return codecs::invalidArgument("generate: input '", spec.name,
                                       "' must be a scalar or a flat array");
      }
      elements.push_back(&e);
    }
  } else if (value.isObject()) {
    return codecs::invalidArgument("generate: input '", spec.name, "' must not be an object");
  } else {
    elements.push_back(&value);
  }
  codecs::InferInput input;
  input.name = spec.name;
  input.datatype = spec.datatype;
  uint64_t fixed = 1;
  int innermost = -1;
  for (size_t i = 0; i < spec.dims.rank(); ++i) {
    if (spec.dims[i] < 0) {
      innermost = static_cast<int>(i);
    } else {
      fixed *= static_cast<uint64_t>(spec.dims[i]);
    }
  }
  uint64_t count = elements.size();
  if (fixed == 0 || count % fixed != 0 || (innermost < 0 && count != fixed)) {
    return codecs::invalidArgument("generate: input '", spec.name, "' has ", count,
                                   " elements, which do not fit its shape ", spec.dims.toString());
  }
  if (batching) input.shape.push_back(1);
  for (size_t i = 0; i < spec.dims.rank(); ++i) {
    int64_t d = spec.dims[i];
    if (d >= 0) {
      input.shape.push_back(d);
    } else {
      input.shape.push_back(static_cast<int>(i) == innermost ? static_cast<int64_t>(count / fixed) : 1);
    }
  }
  std::string data;
  for (const JsonValue* e : elements) {
    INFERGATE_RETURN_IF_ERROR(appendElement(data, spec.datatype, *e, spec.name));
  }
  input.data = codecs::Buffer::fromString(std::move(data));
  return input;
}

codecs::Status addParameter(codecs::InferRequest& request, const std::string& key,
                            const JsonValue& value) {
  if (value.isString()) {
    request.parameters.set(key, value.asString());
  } else if (value.isBool()) {
    request.parameters.set(key, value.asBool());
  } else if (value.asInt()) {
    request.parameters.set(key, *value.asInt());
  } else if (value.isInteger()) {
    request.parameters.set(key, *value.asUint());
  } else if (value.isNumber()) {
    request.parameters.set(key, value.asDouble());
  } else {
    return codecs::invalidArgument("generate: parameter '", key,
                                   "' must be a string, number or boolean");
  }
  return absl::OkStatus();
}

codecs::Status addMembers(codecs::InferRequest& request, const builtin::ModelSpec& spec,
                          const JsonValue::Object& members, bool top_level) {
  for (const auto& [key, value] : members) {
    if (top_level && key == "parameters") {
      if (!value.isObject()) {
        return codecs::invalidArgument("generate: 'parameters' must be a JSON object");
      }
      INFERGATE_RETURN_IF_ERROR(addMembers(request, spec, value.asObject(), false));
      continue;
    }
    if (key == "id" && value.isString()) request.id = value.asString();
    if (const builtin::TensorSpec* input = spec.findInput(key)) {
      INFERGATE_ASSIGN_OR_RETURN(codecs::InferInput tensor,
                                 inputFrom(*input, spec.max_batch_size > 0, value));
      request.inputs.push_back(std::move(tensor));
    } else {
      INFERGATE_RETURN_IF_ERROR(addParameter(request, key, value));
    }
  }
  return absl::OkStatus();
}

// One model response as a generate object: id, model_name, model_version, parameters and
// outputs as top-level keys; single-element outputs unwrapped to a scalar.
codecs::StatusOr<std::string> generateJson(const codecs::InferResponse& response) {
  std::string out = "{";
  if (!response.id.empty()) {
    out += "\"id\":";
    codecs::appendJsonString(out, response.id);
    out += ',';
  }
  out += "\"model_name\":";
  codecs::appendJsonString(out, response.model_name);
  out += ",\"model_version\":";
  codecs::appendJsonString(out, response.model_version);
  for (const auto& [key, value] : response.parameters) {
    if (key == codecs::param::kFinalResponse) continue;
    out += ',';
    codecs::appendJsonString(out, key);
    out += ':';
    codecs::appendJsonParamValue(out, value);
  }
  for (const codecs::InferOutput& output : response.outputs) {
    out += ',';
    codecs::appendJsonString(out, output.name);
    out += ':';
    std::string array;
    INFERGATE_RETURN_IF_ERROR(
        codecs::appendJsonTensorData(array, output.datatype, output.data, output.name));
    auto count = output.shape.elementCount(output.name);
    if (count.ok() && *count == 1 && array.size() >= 2) {
      out.append(array, 1, array.size() - 2);
    } else {
      out += array;
    }
  }
  out += '}';
  return out;
}

}  // namespace

void HttpFrontend::generate(const Exchange& exchange, const Route&, const Decision& d,
                            bool stream) {
  const http::HttpRequest& http = exchange->request();
  builtin::ModelRepository& repo = *d.upstream->repository();
  auto model = repo.find(d.upstream_model, d.upstream_version);
  if (!model.ok()) return exchange->respond(errorResponse(model.status()));
  const builtin::ModelSpec& spec = (*model)->spec();
  if (const std::string_view* ce = http.headers.find("Content-Encoding")) {
    if (!codecs::equalsIgnoreCase(codecs::trimAscii(*ce), "identity")) {
      return exchange->respond(HttpResponse::jsonError(
          400, "the generate endpoints do not accept a compressed body (Content-Encoding)"));
    }
  }
  auto body = codecs::parseJson(http.body.view());
  if (!body.ok()) return exchange->respond(errorResponse(body.status()));
  if (!body->isObject()) {
    return exchange->respond(HttpResponse::jsonError(400, "generate: the body must be a JSON object"));
  }
  auto request = std::make_shared<codecs::InferRequest>();
  request->model_name = d.upstream_model;
  request->model_version = d.upstream_version;
  if (auto status = addMembers(*request, spec, body->asObject(), true); !status.ok()) {
    return exchange->respond(errorResponse(status));
  }
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  exchange->setCancelHandler([cancelled] { cancelled->store(true); });
  builtin::Execution execution = repo.infer(*request, /*streaming=*/spec.decoupled);
  auto produced = std::make_shared<std::vector<std::string>>();
  runExecution(exchange->loop(), std::move(execution), cancelled,
               [exchange, produced, stream, public_name = d.client_model](Emission emission) {
    if (emission.response.ok() && !emission.empty) {
      emission.response->model_name = public_name;
      auto json = generateJson(*emission.response);
      if (!json.ok()) {
        emission.response = json.status();
      } else if (stream) {
        if (!exchange->streaming()) {
          HttpResponse head;
          head.header("Content-Type", "text/event-stream; charset=utf-8");
          exchange->beginStream(std::move(head));
        }
        exchange->sendChunk(codecs::Buffer::fromString("data: " + *json + "\n\n"));
      } else {
        produced->push_back(std::move(*json));
      }
    }
    if (!emission.response.ok()) {
      if (stream && exchange->streaming()) {
        exchange->sendChunk(codecs::Buffer::fromString(
            "data: " + codecs::encodeJsonError(codecs::messageOf(emission.response.status())) +
            "\n\n"));
      } else {
        exchange->respond(errorResponse(emission.response.status()));
        return;
      }
    }
    if (!emission.final) return;
    if (stream) {
      if (!exchange->streaming()) {  // nothing was produced: an empty event stream
        HttpResponse head;
        head.header("Content-Type", "text/event-stream; charset=utf-8");
        exchange->beginStream(std::move(head));
      }
      exchange->endStream();
    } else if (produced->size() == 1) {
      exchange->respond(HttpResponse::json(200, std::move(produced->front())));
    } else {
      exchange->respond(HttpResponse::jsonError(
          400, codecs::strCat("generate expects exactly one response from the model, it produced ",
                              produced->size(), "; use generate_stream")));
    }
  });
}

}  // namespace infergate::gateway::frontends
