// Property: inflating arbitrary bytes (gzip and zlib auto-detected) never crashes and
// never exceeds the cap; compressing the result and inflating it gives it back.

#include <cstddef>
#include <cstdint>

#include "codecs/compression.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kCap = 1 << 20;
  BufferChain body(Buffer::copyOf(std::string_view(reinterpret_cast<const char*>(data), size)));
  auto inflated = decompress(ContentEncoding::kGzip, body, kCap);
  if (!inflated.ok()) {
    checkIsCleanError(inflated.status());
    return 0;
  }
  FUZZ_CHECK(inflated->size() <= kCap);
  for (ContentEncoding e : {ContentEncoding::kGzip, ContentEncoding::kDeflate}) {
    auto packed = compress(e, BufferChain(*inflated));
    FUZZ_CHECK(packed.ok());
    auto back = decompress(e, BufferChain(*packed), kCap);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == *inflated);
  }
  return 0;
}
