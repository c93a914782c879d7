#include "codecs/protobuf_request_encoder.h"

#include <limits>
#include <string>
#include <vector>

#include "codecs/protobuf_wire.h"

namespace infergate::codecs {
namespace {

constexpr uint64_t kMaxMessageBytes = 0x7fffffff;
constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Keys the model keeps in fields, or that mean nothing to gRPC: never sent from a map.
bool isLiftedTensorKey(std::string_view key) {
  return key == param::kShmRegion || key == param::kShmOffset || key == param::kShmByteSize ||
         key == param::kBinaryData || key == param::kBinaryDataSize ||
         key == param::kClassification;
}

StatusOr<int64_t> asInt64(uint64_t value, std::string_view what) {
  if (value > kInt64Max) {
    return invalidArgument(what, " of ", value, " does not fit an int64_param");
  }
  return static_cast<int64_t>(value);
}

// One request-level parameter, in the kind Triton's gRPC frontend accepts.
Status writeRequestParameter(WireWriter& writer, std::string_view key, const ParamValue& value) {
  constexpr uint32_t kField = 4;
  if (key == param::kBinaryDataOutput) return absl::OkStatus();
  if (key == param::kPriority) {
    if (const int64_t* i = std::get_if<int64_t>(&value)) {
      if (*i < 0) return invalidArgument("parameter 'priority' must be >= 0, got ", *i);
      writeParameterEntry(writer, kField, key, static_cast<uint64_t>(*i));
      return absl::OkStatus();
    }
  } else if (key == param::kSequenceId) {
    if (const uint64_t* u = std::get_if<uint64_t>(&value)) {
      writeParameterEntry(writer, kField, key, static_cast<int64_t>(*u));
      return absl::OkStatus();
    }
  } else if (key == param::kTimeout) {
    if (const uint64_t* u = std::get_if<uint64_t>(&value)) {
      INFERGATE_ASSIGN_OR_RETURN(int64_t timeout, asInt64(*u, "parameter 'timeout'"));
      writeParameterEntry(writer, kField, key, timeout);
      return absl::OkStatus();
    }
  }
  writeParameterEntry(writer, kField, key, value);
  return absl::OkStatus();
}

Status writeSharedMemory(WireWriter& writer, uint32_t field, const SharedMemoryRef& shm,
                         std::string_view tensor) {
  writeParameterEntry(writer, field, param::kShmRegion, shm.region);
  INFERGATE_ASSIGN_OR_RETURN(int64_t byte_size,
                             asInt64(shm.byte_size, strCat("tensor '", tensor, "' shm byte size")));
  writeParameterEntry(writer, field, param::kShmByteSize, byte_size);
  if (shm.offset != 0) {
    INFERGATE_ASSIGN_OR_RETURN(int64_t offset,
                               asInt64(shm.offset, strCat("tensor '", tensor, "' shm offset")));
    writeParameterEntry(writer, field, param::kShmOffset, offset);
  }
  return absl::OkStatus();
}

void writeTensorParameters(WireWriter& writer, uint32_t field, const Parameters& params) {
  for (const auto& [key, value] : params) {
    if (!isLiftedTensorKey(key)) writeParameterEntry(writer, field, key, value);
  }
}

// InferInputTensor: 1 name, 2 datatype, 3 shape (packed), 4 parameters.
Status writeInput(WireWriter& writer, const InferInput& input) {
  if (input.datatype == DataType::kInvalid) {
    return invalidArgument("input '", input.name, "' has an invalid datatype");
  }
  if (!input.shared_memory) {
    INFERGATE_RETURN_IF_ERROR(
        validateTensorData(input.name, input.datatype, input.shape, input.data));
  }
  size_t mark = writer.beginMessage(5);
  if (!input.name.empty()) writer.bytesField(1, input.name);
  writer.bytesField(2, dataTypeName(input.datatype));
  writeShape(writer, 3, input.shape);
  writeTensorParameters(writer, 4, input.parameters);
  if (input.shared_memory) {
    INFERGATE_RETURN_IF_ERROR(writeSharedMemory(writer, 4, *input.shared_memory, input.name));
  }
  writer.endMessage(mark);
  return absl::OkStatus();
}

// InferRequestedOutputTensor: 1 name, 2 parameters.
Status writeOutput(WireWriter& writer, const RequestedOutput& output) {
  size_t mark = writer.beginMessage(6);
  if (!output.name.empty()) writer.bytesField(1, output.name);
  writeTensorParameters(writer, 2, output.parameters);
  if (output.classification != 0) {
    INFERGATE_ASSIGN_OR_RETURN(
        int64_t count,
        asInt64(output.classification, strCat("output '", output.name, "' classification")));
    writeParameterEntry(writer, 2, param::kClassification, count);
  }
  if (output.shared_memory) {
    INFERGATE_RETURN_IF_ERROR(writeSharedMemory(writer, 2, *output.shared_memory, output.name));
  }
  writer.endMessage(mark);
  return absl::OkStatus();
}

Status writeHeader(WireWriter& writer, const InferRequest& request) {
  if (!request.model_name.empty()) writer.bytesField(1, request.model_name);
  if (!request.model_version.empty()) writer.bytesField(2, request.model_version);
  if (!request.id.empty()) writer.bytesField(3, request.id);
  for (const auto& [key, value] : request.parameters) {
    INFERGATE_RETURN_IF_ERROR(writeRequestParameter(writer, key, value));
  }
  for (const InferInput& input : request.inputs) {
    INFERGATE_RETURN_IF_ERROR(writeInput(writer, input));
  }
  for (const RequestedOutput& output : request.outputs) {
    INFERGATE_RETURN_IF_ERROR(writeOutput(writer, output));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<BufferChain> ProtobufRequestEncoder::encode(const InferRequest& request) const {
  std::string glue;
  WireWriter writer(glue);
  INFERGATE_RETURN_IF_ERROR(writeHeader(writer, request));

  // raw_input_contents: the tag and length go to the glue, the bytes stay where they are.
  std::vector<ChainCut> cuts;
  uint64_t tensor_bytes = 0;
  for (const InferInput& input : request.inputs) {
    if (input.shared_memory) continue;
    writer.lengthPrefix(7, input.data.size());
    cuts.push_back({glue.size(), &input.data});
    tensor_bytes += input.data.size();
  }
  if (glue.size() + tensor_bytes > kMaxMessageBytes) {
    return resourceExhausted("ModelInferRequest of ", glue.size() + tensor_bytes,
                             " bytes exceeds the gRPC limit of ", kMaxMessageBytes);
  }
  return spliceChain(std::move(glue), cuts);
}

}  // namespace infergate::codecs
