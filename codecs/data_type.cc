#include "codecs/data_type.h"

namespace infergate::codecs {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
  std::string_view config_name;
};

// Indexed by the enum value; the enum value is also model_config.proto's number.
constexpr TypeInfo kTypes[] = {
    {DataType::kInvalid, "INVALID", 0, "TYPE_INVALID"},
    {DataType::kBool, "BOOL", 1, "TYPE_BOOL"},
    {DataType::kUint8, "UINT8", 1, "TYPE_UINT8"},
    {DataType::kUint16, "UINT16", 2, "TYPE_UINT16"},
    {DataType::kUint32, "UINT32", 4, "TYPE_UINT32"},
    {DataType::kUint64, "UINT64", 8, "TYPE_UINT64"},
    {DataType::kInt8, "INT8", 1, "TYPE_INT8"},
    {DataType::kInt16, "INT16", 2, "TYPE_INT16"},
    {DataType::kInt32, "INT32", 4, "TYPE_INT32"},
    {DataType::kInt64, "INT64", 8, "TYPE_INT64"},
    {DataType::kFp16, "FP16", 2, "TYPE_FP16"},
    {DataType::kFp32, "FP32", 4, "TYPE_FP32"},
    {DataType::kFp64, "FP64", 8, "TYPE_FP64"},
    {DataType::kBytes, "BYTES", 0, "TYPE_STRING"},
    {DataType::kBf16, "BF16", 2, "TYPE_BF16"},
};
constexpr size_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);

const TypeInfo& info(DataType type) {
  size_t index = static_cast<size_t>(type);
  return index < kTypeCount ? kTypes[index] : kTypes[0];
}

}  // namespace

std::string_view dataTypeName(DataType type) { return info(type).name; }

DataType dataTypeFromName(std::string_view name) {
  for (size_t i = 1; i < kTypeCount; ++i) {
    if (kTypes[i].name == name) return kTypes[i].type;
  }
  return DataType::kInvalid;
}

size_t elementSize(DataType type) { return info(type).size; }

int configEnumNumber(DataType type) { return static_cast<int>(info(type).type); }

DataType dataTypeFromConfigEnum(int number) {
  if (number <= 0 || static_cast<size_t>(number) >= kTypeCount) return DataType::kInvalid;
  return kTypes[number].type;
}

std::string_view configEnumName(DataType type) { return info(type).config_name; }

}  // namespace infergate::codecs
