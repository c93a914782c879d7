#pragma once

// Decodes the JSON of an HTTP /infer response (what an HTTP upstream answers) into an
// InferResponse. Outputs sent as JSON `data` are decoded into their binary form; outputs
// with binary_data_size are listed in `binary_outputs` for their blobs to be attached;
// outputs with neither (written to shared memory) keep empty data.
//
// Errors: INVALID_ARGUMENT naming the output and field; the caller stamps them with
// ErrorOrigin::kUpstream (a 502 for the client). Thread-safe like JsonRequestDecoder.

#include <string_view>
#include <vector>

#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"

namespace infergate::codecs {

struct BinaryOutputSlot {
  size_t output_index;
  uint64_t byte_size;
  bool operator==(const BinaryOutputSlot&) const = default;
};

struct JsonInferResponseHeader {
  InferResponse response;
  std::vector<BinaryOutputSlot> binary_outputs;
};

class JsonResponseDecoder {
 public:
  explicit JsonResponseDecoder(const DecodeLimits& limits = {}) : limits_(limits) {}

  StatusOr<JsonInferResponseHeader> decode(std::string_view json, size_t readable) const;
  StatusOr<JsonInferResponseHeader> decode(std::string_view json) const {
    return decode(json, json.size());
  }

 private:
  DecodeLimits limits_;
};

// The message of a `{"error": "..."}` body, or INVALID_ARGUMENT when the body is not one.
StatusOr<std::string> decodeJsonError(std::string_view body);

}  // namespace infergate::codecs
