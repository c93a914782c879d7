// Property: any bytes either decode into a ModelInferResponse or fail cleanly; what
// decodes re-encodes (Triton style, raw contents) and decodes to the same response.

#include <cstddef>
#include <cstdint>

#include "codecs/protobuf_response_decoder.h"
#include "codecs/protobuf_response_encoder.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Buffer message = Buffer::copyOf(std::string_view(reinterpret_cast<const char*>(data), size));
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  auto response = ProtobufResponseDecoder(limits).decode(message);
  if (!response.ok()) {
    checkIsCleanError(response.status());
    return 0;
  }
  auto encoded = ProtobufResponseEncoder().encode(*response);
  if (!encoded.ok()) {
    checkIsCleanError(encoded.status());
    return 0;
  }
  auto back = ProtobufResponseDecoder(limits).decode(encoded->flatten());
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->outputs == response->outputs);
  FUZZ_CHECK(back->model_name == response->model_name);
  return 0;
}
