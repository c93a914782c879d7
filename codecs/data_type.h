#pragma once

// The tensor element types of the KServe v2 / Triton protocol (PROTOCOL.md section 10).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace infergate::codecs {

enum class DataType : uint8_t {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,
  kBf16,
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::kBool,  DataType::kUint8, DataType::kUint16, DataType::kUint32, DataType::kUint64,
    DataType::kInt8,  DataType::kInt16, DataType::kInt32,  DataType::kInt64,  DataType::kFp16,
    DataType::kFp32,  DataType::kFp64,  DataType::kBytes,  DataType::kBf16,
};

// The protocol string ("FP32", "BYTES", ...); "INVALID" for kInvalid.
std::string_view dataTypeName(DataType type);

// Exact, case-sensitive match of the protocol string, as Triton does; kInvalid otherwise
// ("fp32", "FLOAT32" and "STRING" are all invalid).
DataType dataTypeFromName(std::string_view name);

// Bytes per element; 0 for BYTES (variable: 4-byte little-endian length + data) and kInvalid.
size_t elementSize(DataType type);

// The model_config.proto DataType enum number (TYPE_BOOL = 1 ... TYPE_BF16 = 14;
// TYPE_STRING = 13 is BYTES) and its name ("TYPE_FP32").
int configEnumNumber(DataType type);
DataType dataTypeFromConfigEnum(int number);
std::string_view configEnumName(DataType type);

inline bool isFixedSize(DataType type) { return elementSize(type) != 0; }

// Types that travel only as raw bytes: no JSON data array, no typed gRPC contents.
inline bool isRawOnly(DataType type) { return type == DataType::kFp16 || type == DataType::kBf16; }

}  // namespace infergate::codecs
