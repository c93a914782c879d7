#pragma once

// Decodes the JSON of an HTTP /infer request (PROTOCOL.md section 5.1) into an
// InferRequest. Pure: text in, model out.
//
// Inputs sent as JSON `data` are decoded into their binary form here. Inputs that carry
// `binary_data_size` are listed in `binary_inputs`, in JSON order, for the binary-tensor
// decoder to attach their blobs; inputs naming a shared-memory region get a
// SharedMemoryRef. Model name and version come from the URL, not the body, and are left
// empty.
//
// Errors: INVALID_ARGUMENT naming the tensor and field (malformed JSON, wrong types, shape
// and data disagreeing, FP16/BF16 data, reserved `triton_` parameters, more than one data
// source...), RESOURCE_EXHAUSTED past a DecodeLimits limit. Triton answers 500 for some of
// these (its JSON layer); the gateway names the client's mistake as the client's: 400.
//
// Thread-safety: decode() may run on many threads at once (simdjson state is per thread).

#include <cstdint>
#include <string_view>
#include <vector>

#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"

namespace infergate::codecs {

struct BinaryInputSlot {
  size_t input_index;  // into InferRequest::inputs
  uint64_t byte_size;  // its binary_data_size
  bool operator==(const BinaryInputSlot&) const = default;
};

struct JsonInferRequestHeader {
  InferRequest request;
  std::vector<BinaryInputSlot> binary_inputs;
};

class JsonRequestDecoder {
 public:
  explicit JsonRequestDecoder(const DecodeLimits& limits = {}) : limits_(limits) {}

  // `readable` is how many bytes may be read from json.data(); when it leaves
  // SIMDJSON_PADDING (64) bytes past the text, the text is parsed in place, else copied.
  StatusOr<JsonInferRequestHeader> decode(std::string_view json, size_t readable) const;
  StatusOr<JsonInferRequestHeader> decode(std::string_view json) const {
    return decode(json, json.size());
  }

 private:
  DecodeLimits limits_;
};

}  // namespace infergate::codecs
