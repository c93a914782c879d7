#include "codecs/binary_tensor.h"

#include <limits>
#include <vector>

#include "codecs/bytes_tensor.h"
#include "codecs/json_request_decoder.h"
#include "codecs/json_response_decoder.h"

namespace infergate::codecs {
namespace {

// JSON header and blob section of a body; shared by requests and responses.
struct SplitBody {
  std::string_view json;
  size_t json_readable;
  Buffer blobs;
};

StatusOr<SplitBody> splitBody(const Buffer& body, std::optional<uint64_t> header_length,
                              size_t readable, const DecodeLimits& limits) {
  if (body.size() > limits.max_binary_body_bytes) {
    return resourceExhausted("body of ", body.size(), " bytes exceeds the limit of ",
                             limits.max_binary_body_bytes, " bytes");
  }
  readable = std::max(readable, body.size());
  if (!header_length) return SplitBody{body.view(), readable, Buffer()};
  if (*header_length > body.size()) {
    return invalidArgument("Inference-Header-Content-Length of ", *header_length,
                           " is larger than the body of ", body.size(), " bytes");
  }
  size_t json_size = static_cast<size_t>(*header_length);
  return SplitBody{body.view().substr(0, json_size), readable,
                   body.slice(json_size, body.size() - json_size)};
}

// Hands out consecutive blobs of the binary section, in order.
class BlobCursor {
 public:
  explicit BlobCursor(const Buffer& blobs) : blobs_(blobs) {}

  StatusOr<Buffer> next(uint64_t size, std::string_view kind, std::string_view tensor) {
    if (size > blobs_.size() - pos_) {
      return invalidArgument("unexpected size for ", kind, " '", tensor, "', expecting ", size,
                             " bytes but only ", blobs_.size() - pos_, " remain in the body");
    }
    Buffer blob = blobs_.slice(pos_, static_cast<size_t>(size));
    pos_ += static_cast<size_t>(size);
    return blob;
  }
  size_t remaining() const { return blobs_.size() - pos_; }

 private:
  const Buffer& blobs_;
  size_t pos_ = 0;
};

// A response's JSON header decoded and each output given its blob. `ahead`: the blobs may
// not be written yet (decodeResponseAhead), so nothing past the header is read, not even
// as the parser's padding, and only outputs checkable by size are taken.
StatusOr<InferResponse> decodeResponseBody(const Buffer& body, std::optional<uint64_t> header_length,
                                           size_t readable, const DecodeLimits& limits, bool ahead) {
  INFERGATE_ASSIGN_OR_RETURN(SplitBody split, splitBody(body, header_length, readable, limits));
  JsonResponseDecoder json_decoder(limits);
  INFERGATE_ASSIGN_OR_RETURN(JsonInferResponseHeader header,
                             json_decoder.decode(split.json, ahead ? split.json.size() : split.json_readable));
  BlobCursor cursor(split.blobs);
  std::vector<bool> attached(ahead ? header.response.outputs.size() : 0);
  for (const BinaryOutputSlot& slot : header.binary_outputs) {
    InferOutput& output = header.response.outputs[slot.output_index];
    if (ahead && output.datatype == DataType::kBytes) {
      return absl::FailedPreconditionError(
          strCat("output '", output.name, "' is BYTES: its elements are read to be checked"));
    }
    INFERGATE_ASSIGN_OR_RETURN(output.data, cursor.next(slot.byte_size, "output", output.name));
    INFERGATE_RETURN_IF_ERROR(
        validateTensorData(output.name, output.datatype, output.shape, output.data));
    if (ahead) attached[slot.output_index] = true;
  }
  for (size_t i = 0; i < attached.size(); ++i) {
    if (!attached[i]) {
      return absl::FailedPreconditionError(strCat("output '", header.response.outputs[i].name, "' is not binary"));
    }
  }
  if (cursor.remaining() != 0) {
    return invalidArgument("unexpected additional output data: ", cursor.remaining(),
                           " bytes follow the last binary output");
  }
  return std::move(header.response);
}

}  // namespace

StatusOr<InferRequest> BinaryTensorDecoder::decodeRequest(const Buffer& body,
                                                          std::optional<uint64_t> header_length,
                                                          size_t readable) const {
  INFERGATE_ASSIGN_OR_RETURN(SplitBody split, splitBody(body, header_length, readable, limits_));
  JsonRequestDecoder json_decoder(limits_);
  INFERGATE_ASSIGN_OR_RETURN(JsonInferRequestHeader header,
                             json_decoder.decode(split.json, split.json_readable));
  BlobCursor cursor(split.blobs);
  for (const BinaryInputSlot& slot : header.binary_inputs) {
    InferInput& input = header.request.inputs[slot.input_index];
    INFERGATE_ASSIGN_OR_RETURN(input.data, cursor.next(slot.byte_size, "input", input.name));
    INFERGATE_RETURN_IF_ERROR(
        validateTensorData(input.name, input.datatype, input.shape, input.data));
  }
  if (cursor.remaining() != 0) {
    return invalidArgument("unexpected additional input data: ", cursor.remaining(),
                           " bytes follow the last binary input");
  }
  return std::move(header.request);
}

StatusOr<InferResponse> BinaryTensorDecoder::decodeResponse(
    const Buffer& body, std::optional<uint64_t> header_length, size_t readable) const {
  return decodeResponseBody(body, header_length, readable, limits_, /*ahead=*/false);
}

StatusOr<InferResponse> BinaryTensorDecoder::decodeResponseAhead(const Buffer& body,
                                                                  uint64_t header_length) const {
  return decodeResponseBody(body, header_length, body.size(), limits_, /*ahead=*/true);
}

StatusOr<InferRequest> BinaryTensorDecoder::decodeRawRequest(const Buffer& body,
                                                             const RawInputSpec& spec) const {
  if (body.size() > limits_.max_binary_body_bytes) {
    return resourceExhausted("raw binary body of ", body.size(), " bytes exceeds the limit of ",
                             limits_.max_binary_body_bytes, " bytes");
  }
  InferRequest request;
  request.binary_data_output = true;
  InferInput input;
  input.name = spec.name;
  input.datatype = spec.datatype;
  if (spec.batching) input.shape.push_back(1);
  if (spec.datatype == DataType::kBytes) {
    if (!(spec.dims.rank() == 1 && (spec.dims[0] == 1 || spec.dims[0] == -1))) {
      return invalidArgument("raw binary request: BYTES input '", spec.name,
                             "' must have shape [1], its model declares ",
                             spec.dims.toString());
    }
    if (body.size() > std::numeric_limits<uint32_t>::max()) {
      return invalidArgument("raw binary request: BYTES element longer than 2^32 - 1 bytes");
    }
    input.shape.push_back(1);
    std::string element;
    element.reserve(body.size() + 4);
    appendBytesElement(element, body.view());
    input.data = Buffer::fromString(std::move(element));
  } else {
    const size_t element_size = elementSize(spec.datatype);
    if (element_size == 0) {
      return invalidArgument("raw binary request: input '", spec.name, "' has no valid datatype");
    }
    int variable = -1;
    uint64_t fixed = 1;
    for (size_t i = 0; i < spec.dims.rank(); ++i) {
      int64_t d = spec.dims[i];
      if (d < 0) {
        if (variable >= 0) {
          return invalidArgument("raw binary request: input '", spec.name,
                                 "' has more than one variable dimension in ",
                                 spec.dims.toString());
        }
        variable = static_cast<int>(i);
      } else if (d != 0 && fixed > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
        return invalidArgument("raw binary request: input '", spec.name, "' shape overflows");
      } else {
        fixed *= static_cast<uint64_t>(d);
      }
    }
    uint64_t elements = body.size() / element_size;
    if (body.size() % element_size != 0) {
      return invalidArgument("raw binary request: ", body.size(),
                             " bytes is not a whole number of ", dataTypeName(spec.datatype),
                             " elements for input '", spec.name, "'");
    }
    for (size_t i = 0; i < spec.dims.rank(); ++i) {
      if (static_cast<int>(i) == variable) {
        if (fixed == 0 || elements % fixed != 0) {
          return invalidArgument("raw binary request: ", body.size(),
                                 " bytes do not fit the shape ", spec.dims.toString(),
                                 " of input '", spec.name, "'");
        }
        input.shape.push_back(static_cast<int64_t>(elements / fixed));
      } else {
        input.shape.push_back(spec.dims[i]);
      }
    }
    input.data = body;
    INFERGATE_RETURN_IF_ERROR(
        validateTensorData(input.name, input.datatype, input.shape, input.data));
  }
  request.inputs.push_back(std::move(input));
  return request;
}

}  // namespace infergate::codecs
