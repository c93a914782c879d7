#pragma once

// Internal to codecs/: the simdjson plumbing shared by the JSON decoders. Not a public
// header: the rest of the project never sees simdjson.

#include <simdjson.h>

#include <string>
#include <string_view>

#include "codecs/buffer.h"
#include "codecs/data_type.h"
#include "codecs/limits.h"
#include "codecs/parameters.h"
#include "codecs/shape.h"
#include "codecs/status.h"

namespace infergate::codecs::json_internal {

namespace od = simdjson::ondemand;

// A parsed document and the storage it points into. simdjson needs SIMDJSON_PADDING
// readable bytes after the text; when the caller's buffer lacks them the text is copied
// into a per-thread scratch buffer (reused, so warm).
class Document {
 public:
  // `readable` = bytes readable from text.data() (>= text.size()).
  Status parse(std::string_view text, size_t readable, const DecodeLimits& limits);
  od::document& doc() { return doc_; }

 private:
  od::document doc_;
};

// True when bytes other than whitespace follow the root value (call after iterating it).
bool hasTrailingContent(Document& doc);

// "failed to parse JSON: <simdjson message>"
Status jsonError(simdjson::error_code error, std::string_view what);
// Triton's JSON reader takes the first of two equal keys in an object; a gateway taking
// another would check one message and pass on a different one. The decoders refuse equal
// keys with this INVALID_ARGUMENT: "<where>: key '<key>' appears more than once".
Status repeatedKey(std::string_view where, std::string_view key);

// The root object of the document, or INVALID_ARGUMENT.
StatusOr<od::object> rootObject(Document& doc, std::string_view what);

// A parameter value: string, bool, integer (int64, or uint64 past INT64_MAX), or any
// other number as double. Arrays, objects and null are INVALID_ARGUMENT naming `key`.
StatusOr<ParamValue> decodeParamValue(od::value value, std::string_view key);

// Reads a non-negative JSON integer.
StatusOr<uint64_t> decodeUint(od::value value, std::string_view what);
StatusOr<bool> decodeBool(od::value value, std::string_view what);
StatusOr<std::string_view> decodeString(od::value value, std::string_view what);
// An array of non-negative integers (a shape).
StatusOr<Shape> decodeShape(od::value value, std::string_view tensor, const DecodeLimits& limits);

// Decodes a (flat or nested) `data` array into the binary form of `datatype`. The element
// count must equal the shape's (a rank-0 shape counts 0 elements here, as in Triton).
StatusOr<Buffer> decodeTensorData(od::value data, DataType datatype, const Shape& shape,
                                  std::string_view tensor, const DecodeLimits& limits);

// Appends `data` (binary form) as a flat JSON array. FP16/BF16 are UNIMPLEMENTED-free
// INVALID_ARGUMENT as Triton answers 400 for them.
Status appendTensorData(std::string& out, DataType datatype, const Buffer& data,
                        std::string_view tensor);

// Appends `params` as a JSON object value.
void appendParameters(std::string& out, const Parameters& params);
void appendParamValue(std::string& out, const ParamValue& value);

}  // namespace infergate::codecs::json_internal
