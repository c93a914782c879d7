#pragma once

// Little helpers the demo models use to read and write fixed-size tensor elements in
// their binary wire form (little-endian, unaligned: every access goes through memcpy).

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/infer.h"

namespace infergate::gateway::builtin {

// Element `i` of a fixed-size tensor. The caller checked that `data` holds it.
template <typename T>
T loadElement(const codecs::Buffer& data, size_t i) {
  static_assert(std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, data.data() + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
std::vector<T> loadElements(const codecs::Buffer& data) {
  std::vector<T> out(data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
codecs::Buffer bufferOf(const std::vector<T>& values) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return codecs::Buffer::fromString(std::move(bytes));
}

inline codecs::InferOutput makeOutput(std::string name, codecs::DataType datatype,
                                      codecs::Shape shape, codecs::Buffer data) {
  codecs::InferOutput out;
  out.name = std::move(name);
  out.datatype = datatype;
  out.shape = std::move(shape);
  out.data = std::move(data);
  return out;
}

}  // namespace infergate::gateway::builtin
