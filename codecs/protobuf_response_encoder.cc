#include "codecs/protobuf_response_encoder.h"

#include <string>
#include <vector>

#include "codecs/protobuf_wire.h"

namespace infergate::codecs {
namespace {

constexpr uint64_t kMaxMessageBytes = 0x7fffffff;

Status checkSize(uint64_t size, std::string_view message) {
  if (size > kMaxMessageBytes) {
    return resourceExhausted(message, " of ", size, " bytes exceeds the gRPC limit of ",
                             kMaxMessageBytes);
  }
  return absl::OkStatus();
}

// InferOutputTensor: 1 name, 2 datatype, 3 shape (packed), 4 parameters.
Status writeOutput(WireWriter& writer, const InferOutput& output) {
  if (output.datatype == DataType::kInvalid) {
    return invalidArgument("output '", output.name, "' has an invalid datatype");
  }
  if (!output.shared_memory && !output.data.empty()) {
    INFERGATE_RETURN_IF_ERROR(
        validateTensorData(output.name, output.datatype, output.shape, output.data));
  }
  size_t mark = writer.beginMessage(5);
  if (!output.name.empty()) writer.bytesField(1, output.name);
  writer.bytesField(2, dataTypeName(output.datatype));
  writeShape(writer, 3, output.shape);
  for (const auto& [key, value] : output.parameters) {
    if (key == param::kBinaryData || key == param::kBinaryDataSize) continue;
    writeParameterEntry(writer, 4, key, value);
  }
  writer.endMessage(mark);
  return absl::OkStatus();
}

}  // namespace

StatusOr<BufferChain> ProtobufResponseEncoder::encode(const InferResponse& response) const {
  std::string glue;
  WireWriter writer(glue);
  if (!response.model_name.empty()) writer.bytesField(1, response.model_name);
  if (!response.model_version.empty()) writer.bytesField(2, response.model_version);
  if (!response.id.empty()) writer.bytesField(3, response.id);
  for (const auto& [key, value] : response.parameters) writeParameterEntry(writer, 4, key, value);
  for (const InferOutput& output : response.outputs) {
    INFERGATE_RETURN_IF_ERROR(writeOutput(writer, output));
  }

  // raw_output_contents: one entry per output, at its index; bytes stay where they are.
  std::vector<ChainCut> cuts;
  uint64_t tensor_bytes = 0;
  for (const InferOutput& output : response.outputs) {
    const bool carries = !output.shared_memory && !output.data.empty();
    writer.lengthPrefix(6, carries ? output.data.size() : 0);
    if (!carries) continue;
    cuts.push_back({glue.size(), &output.data});
    tensor_bytes += output.data.size();
  }
  INFERGATE_RETURN_IF_ERROR(checkSize(glue.size() + tensor_bytes, "ModelInferResponse"));

  return spliceChain(std::move(glue), cuts);
}

StatusOr<BufferChain> ProtobufResponseEncoder::encodeStream(const InferResponse* response,
                                                            std::string_view error_message) const {
  std::string glue;
  WireWriter writer(glue);
  if (!error_message.empty()) writer.bytesField(1, error_message);
  BufferChain inner;
  if (response != nullptr) {
    INFERGATE_ASSIGN_OR_RETURN(inner, encode(*response));
    writer.lengthPrefix(2, inner.size());
  }
  INFERGATE_RETURN_IF_ERROR(checkSize(glue.size() + inner.size(), "ModelStreamInferResponse"));
  BufferChain chain(Buffer::fromString(std::move(glue)));
  chain.append(inner);
  return chain;
}

}  // namespace infergate::codecs
