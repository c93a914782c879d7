// Property: counting and parsing a serialized BYTES tensor agree, stay inside the input,
// and parse -> serialize reproduces the input exactly.

#include <cstddef>
#include <cstdint>

#include "codecs/bytes_tensor.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto count = countBytesElements(bytes, "t");
  auto elements = parseBytesElements(bytes, "t");
  FUZZ_CHECK(count.ok() == elements.ok());
  if (!count.ok()) {
    checkIsCleanError(count.status());
    return 0;
  }
  FUZZ_CHECK(*count == elements->size());
  std::string again = serializeBytesElements(*elements);
  FUZZ_CHECK(again.size() == size);
  FUZZ_CHECK(size == 0 || std::memcmp(again.data(), data, size) == 0);
  return 0;
}
