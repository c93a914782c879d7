#include "codecs/protobuf_response_decoder.h"

#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "codecs/protobuf_wire.h"

namespace infergate::codecs {
namespace {

using Bytes = std::span<const uint8_t>;

struct TopLevel {
  std::string_view model_name, model_version, id;
  std::vector<Bytes> outputs, raw;
};

struct PendingOutput {
  InferOutput output;
  std::vector<Bytes> contents;  // every occurrence of InferOutputTensor.contents
};

Status gatherTopLevel(Bytes message, const DecodeLimits& limits, Parameters& parameters,
                      TopLevel& top) {
  return forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(Bytes value, reader.readLengthDelimited());
    switch (tag.number) {
      case 1:
        top.model_name = asChars(value);
        return absl::OkStatus();
      case 2:
        top.model_version = asChars(value);
        return absl::OkStatus();
      case 3:
        top.id = asChars(value);
        return absl::OkStatus();
      case 4:
        return decodeParameterEntry(value, "the response", "", parameters);
      case 5:
        return pushCapped(top.outputs, value, "response", "outputs", limits);
      case 6:
        return pushCapped(top.raw, value, "response", "raw_output_contents entries", limits);
      default:
        return absl::OkStatus();  // an unknown LEN field, already skipped
    }
  });
}

// InferOutputTensor: 1 name, 2 datatype, 3 shape, 4 parameters, 5 contents.
StatusOr<PendingOutput> decodeOutput(Bytes bytes, const DecodeLimits& limits) {
  PendingOutput pending;
  InferOutput& output = pending.output;
  std::string_view datatype;
  INFERGATE_RETURN_IF_ERROR(forEachField(bytes, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.number == 3) return readShapeDims(reader, tag, output.name, output.shape);
    if (tag.type != WireType::kLen || tag.number > 5) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(Bytes value, reader.readLengthDelimited());
    if (tag.number == 1) output.name = asChars(value);
    if (tag.number == 2) datatype = asChars(value);
    if (tag.number == 4) {
      return decodeParameterEntry(value, "output", output.name, output.parameters);
    }
    if (tag.number == 5) pending.contents.push_back(value);
    return absl::OkStatus();
  }));
  output.datatype = dataTypeFromName(datatype);
  if (output.datatype == DataType::kInvalid) {
    return invalidArgument("output '", output.name, "' has an invalid datatype '", datatype, "'");
  }
  INFERGATE_RETURN_IF_ERROR(checkShapeLimits(output.shape, output.name, limits));
  return pending;
}

Status attachData(PendingOutput& pending, const Bytes* raw, const Buffer& message,
                  const DecodeLimits& limits) {
  InferOutput& output = pending.output;
  if (raw != nullptr) {
    output.data = message.slice(static_cast<size_t>(raw->data() - message.data()), raw->size());
  } else if (!pending.contents.empty()) {
    INFERGATE_ASSIGN_OR_RETURN(output.data,
                               typedContentsToRaw(output.name, output.datatype, output.shape,
                                                  pending.contents, limits.max_tensor_bytes));
  }
  if (output.data.empty()) return absl::OkStatus();  // shm, zero-size, or no data sent
  return validateTensorData(output.name, output.datatype, output.shape, output.data);
}

}  // namespace

StatusOr<InferResponse> ProtobufResponseDecoder::decode(const Buffer& message) const {
  if (message.size() > limits_.max_binary_body_bytes) {
    return resourceExhausted("ModelInferResponse of ", message.size(),
                             " bytes exceeds the limit of ", limits_.max_binary_body_bytes);
  }
  InferResponse response;
  TopLevel top;
  INFERGATE_RETURN_IF_ERROR(gatherTopLevel(message.span(), limits_, response.parameters, top));
  if (top.raw.size() > top.outputs.size()) {
    return invalidArgument("response has ", top.raw.size(), " raw_output_contents entries for ",
                           top.outputs.size(), " outputs");
  }
  response.model_name = top.model_name;
  response.model_version = top.model_version;
  response.id = top.id;
  response.outputs.reserve(top.outputs.size());
  for (size_t i = 0; i < top.outputs.size(); ++i) {
    INFERGATE_ASSIGN_OR_RETURN(PendingOutput pending, decodeOutput(top.outputs[i], limits_));
    const Bytes* raw = i < top.raw.size() ? &top.raw[i] : nullptr;
    INFERGATE_RETURN_IF_ERROR(attachData(pending, raw, message, limits_));
    response.outputs.push_back(std::move(pending.output));
  }
  return response;
}

StatusOr<StreamInferResponse> ProtobufResponseDecoder::decodeStreamResponse(
    const Buffer& message) const {
  if (message.size() > limits_.max_binary_body_bytes) {
    return resourceExhausted("ModelStreamInferResponse of ", message.size(),
                             " bytes exceeds the limit of ", limits_.max_binary_body_bytes);
  }
  StreamInferResponse out;
  std::vector<Bytes> responses;  // every occurrence of infer_response: protobuf merges them
  INFERGATE_RETURN_IF_ERROR(
      forEachField(message.span(), [&](FieldTag tag, WireReader& reader) -> Status {
        if (tag.type != WireType::kLen || (tag.number != 1 && tag.number != 2)) {
          return reader.skip(tag);
        }
        INFERGATE_ASSIGN_OR_RETURN(Bytes value, reader.readLengthDelimited());
        if (tag.number == 1) out.error_message = asChars(value);
        if (tag.number == 2) responses.push_back(value);
        return absl::OkStatus();
      }));
  if (responses.empty()) return out;
  Buffer inner;
  if (responses.size() == 1) {
    inner = message.slice(static_cast<size_t>(responses[0].data() - message.data()),
                          responses[0].size());
  } else {
    // Merging equals parsing the concatenation; rare enough to copy.
    size_t total = 0;
    for (Bytes r : responses) total += r.size();
    MutableBuffer merged = MutableBuffer::allocate(total);
    uint8_t* p = merged.data();
    for (Bytes r : responses) {
      if (!r.empty()) std::memcpy(p, r.data(), r.size());
      p += r.size();
    }
    inner = std::move(merged).freeze();
  }
  INFERGATE_ASSIGN_OR_RETURN(out.response, decode(inner));
  return out;
}

}  // namespace infergate::codecs
