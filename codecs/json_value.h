#pragma once

// A small JSON document model for the gateway's control bodies (repository load/unload,
// index, shared-memory registration, settings): parsed with simdjson, exact integers,
// duplicate keys kept in order (find() returns the first). Not for tensor data: the
// inference codecs stream that straight into binary buffers.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "codecs/status.h"

namespace infergate::codecs {

class JsonValue {
 public:
  using Array = std::vector<JsonValue>;
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;  // null
  explicit JsonValue(bool v) : v_(v) {}
  explicit JsonValue(int64_t v) : v_(v) {}
  explicit JsonValue(uint64_t v) : v_(v) {}
  explicit JsonValue(double v) : v_(v) {}
  explicit JsonValue(std::string v) : v_(std::move(v)) {}
  explicit JsonValue(Array v) : v_(std::make_shared<Array>(std::move(v))) {}
  explicit JsonValue(Object v) : v_(std::make_shared<Object>(std::move(v))) {}

  bool isNull() const { return std::holds_alternative<std::monostate>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isArray() const { return std::holds_alternative<std::shared_ptr<Array>>(v_); }
  bool isObject() const { return std::holds_alternative<std::shared_ptr<Object>>(v_); }
  bool isNumber() const {
    return std::holds_alternative<int64_t>(v_) || std::holds_alternative<uint64_t>(v_) ||
           std::holds_alternative<double>(v_);
  }
  bool isInteger() const {
    return std::holds_alternative<int64_t>(v_) || std::holds_alternative<uint64_t>(v_);
  }

  bool asBool() const { return std::get<bool>(v_); }
  const std::string& asString() const { return std::get<std::string>(v_); }
  const Array& asArray() const { return *std::get<std::shared_ptr<Array>>(v_); }
  const Object& asObject() const { return *std::get<std::shared_ptr<Object>>(v_); }
  // A non-negative integer, or nullopt (negative, fractional, not a number).
  std::optional<uint64_t> asUint() const;
  std::optional<int64_t> asInt() const;
  double asDouble() const;

  // Object member by key (first match), or nullptr when absent or not an object.
  const JsonValue* find(std::string_view key) const;

  // Compact JSON text (rapidjson layout for numbers).
  std::string toJson() const;

 private:
  std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string,
               std::shared_ptr<Array>, std::shared_ptr<Object>>
      v_;
};

// Parses one JSON value; trailing content, depth past 64, or malformed text is
// INVALID_ARGUMENT ("failed to parse the request JSON: ...").
StatusOr<JsonValue> parseJson(std::string_view text);

}  // namespace infergate::codecs
