#include "codecs/bytes_tensor.h"

namespace infergate::codecs {

StatusOr<uint64_t> countBytesElements(std::span<const uint8_t> data, std::string_view tensor) {
  uint64_t count = 0;
  INFERGATE_RETURN_IF_ERROR(forEachBytesElement(data, tensor, [&](std::string_view) { ++count; }));
  return count;
}

std::string serializeBytesElements(const std::vector<std::string>& elements) {
  size_t total = 0;
  for (const std::string& e : elements) total += 4 + e.size();
  std::string out;
  out.reserve(total);
  for (const std::string& e : elements) appendBytesElement(out, e);
  return out;
}

StatusOr<std::vector<std::string>> parseBytesElements(std::span<const uint8_t> data,
                                                      std::string_view tensor) {
  std::vector<std::string> out;
  INFERGATE_RETURN_IF_ERROR(forEachBytesElement(
      data, tensor, [&](std::string_view e) { out.emplace_back(e); }));
  return out;
}

}  // namespace infergate::codecs
