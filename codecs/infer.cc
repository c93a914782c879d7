#include "codecs/infer.h"

#include "codecs/bytes_tensor.h"

namespace infergate::codecs {

const InferInput* InferRequest::findInput(std::string_view name) const {
  for (const InferInput& t : inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const RequestedOutput* InferRequest::findOutput(std::string_view name) const {
  for (const RequestedOutput& o : outputs) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

const InferOutput* InferResponse::findOutput(std::string_view name) const {
  for (const InferOutput& o : outputs) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

Status validateTensorData(std::string_view tensor, DataType datatype, const Shape& shape,
                          const Buffer& data) {
  // A rank-0 shape holds one element, or none: Triton's JSON path counts 0 elements for it
  // (PROTOCOL.md pitfall 26), so `"shape":[],"data":[]` is a request Triton takes, and the
  // gateway must carry it on as it came (found by the json_request fuzzer).
  if (shape.rank() == 0 && data.size() == 0 && datatype != DataType::kInvalid) {
    return absl::OkStatus();
  }
  if (datatype == DataType::kBytes) {
    INFERGATE_ASSIGN_OR_RETURN(int64_t expected, shape.elementCount(tensor));
    INFERGATE_ASSIGN_OR_RETURN(uint64_t count, countBytesElements(data.span(), tensor));
    if (count != static_cast<uint64_t>(expected)) {
      return invalidArgument("BYTES tensor '", tensor, "' holds ", count,
                             " elements but its shape ", shape.toString(), " calls for ",
                             expected);
    }
    return absl::OkStatus();
  }
  if (datatype == DataType::kInvalid) {
    return invalidArgument("tensor '", tensor, "' has an invalid datatype");
  }
  INFERGATE_ASSIGN_OR_RETURN(uint64_t expected, shape.byteSize(elementSize(datatype), tensor));
  if (expected != data.size()) {
    return invalidArgument("tensor '", tensor, "' of datatype ", dataTypeName(datatype),
                           " and shape ", shape.toString(), " needs ", expected,
                           " bytes but ", data.size(), " were given");
  }
  return absl::OkStatus();
}

}  // namespace infergate::codecs
