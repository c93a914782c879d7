#pragma once

// Request, tensor and response parameters, kept exactly: the value kind a client sent
// (bool, int64, uint64, double, string) survives every conversion, and insertion order is
// kept so that a decoded body encodes back in the order it came.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace infergate::codecs {

using ParamValue = std::variant<bool, int64_t, uint64_t, double, std::string>;

class Parameters {
 public:
  using Entry = std::pair<std::string, ParamValue>;

  const ParamValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Replaces the value of an existing key in place, or appends.
  void set(std::string key, ParamValue value);
  bool erase(std::string_view key);

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  // The same keys in the same order with the same values; a double NaN equals a NaN (a NaN
  // parameter is kept as sent, PROTOCOL 5.2, and is the same parameter after a round trip).
  bool operator==(const Parameters& other) const;

 private:
  std::vector<Entry> entries_;
};

// A parameter map (protobuf map<string, InferParameter>, JSON "parameters" object)
// holding more entries is RESOURCE_EXHAUSTED in every decoder: Parameters::set is
// linear, so an unbounded map would be quadratic to decode.
inline constexpr size_t kMaxParametersPerMap = 1024;

// The well-known keys (PROTOCOL.md sections 5.3, 8.3, 9).
namespace param {
inline constexpr std::string_view kSequenceId = "sequence_id";
inline constexpr std::string_view kSequenceStart = "sequence_start";
inline constexpr std::string_view kSequenceEnd = "sequence_end";
inline constexpr std::string_view kPriority = "priority";
inline constexpr std::string_view kTimeout = "timeout";
inline constexpr std::string_view kBinaryDataOutput = "binary_data_output";
inline constexpr std::string_view kBinaryDataSize = "binary_data_size";
inline constexpr std::string_view kBinaryData = "binary_data";
inline constexpr std::string_view kClassification = "classification";
inline constexpr std::string_view kShmRegion = "shared_memory_region";
inline constexpr std::string_view kShmOffset = "shared_memory_offset";
inline constexpr std::string_view kShmByteSize = "shared_memory_byte_size";
inline constexpr std::string_view kTritonPrefix = "triton_";
inline constexpr std::string_view kEnableEmptyFinalResponse = "triton_enable_empty_final_response";
inline constexpr std::string_view kFinalResponse = "triton_final_response";
}  // namespace param

}  // namespace infergate::codecs
