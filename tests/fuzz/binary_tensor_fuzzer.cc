// Input: 4 bytes little-endian header length (0xffffffff = no header), then the body.
// Property: the body decodes or fails cleanly; a decoded request re-encodes with binary
// tensors and decodes back to the same request; every blob lies inside the body.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "codecs/binary_tensor.h"
#include "codecs/json_request_encoder.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t raw = static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
                 static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
  std::optional<uint64_t> header_length;
  if (raw != 0xffffffffu) header_length = raw;
  Buffer body = Buffer::copyOf(std::string_view(reinterpret_cast<const char*>(data + 4), size - 4));
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  BinaryTensorDecoder decoder(limits);
  auto request = decoder.decodeRequest(body, header_length);
  if (!request.ok()) {
    checkIsCleanError(request.status());
    return 0;
  }
  for (const InferInput& input : request->inputs) {
    if (input.data.empty() || input.data.owner() != body.owner()) continue;
    FUZZ_CHECK(input.data.data() >= body.data());
    FUZZ_CHECK(input.data.data() + input.data.size() <= body.data() + body.size());
  }
  JsonRequestEncoder::Options options;
  options.drop_triton_parameters = false;
  auto encoded = JsonRequestEncoder(options).encode(*request);
  FUZZ_CHECK(encoded.ok());
  auto back = decoder.decodeRequest(encoded->body.flatten(), encoded->header_length);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *request);
  return 0;
}
