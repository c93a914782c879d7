// Property: any bytes either decode into a ModelInferRequest or fail cleanly; the model
// peek agrees with the full decode; what decodes re-encodes and decodes to the same.

#include <cstddef>
#include <cstdint>

#include "codecs/protobuf_peek.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Buffer message = Buffer::copyOf(std::string_view(reinterpret_cast<const char*>(data), size));
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  auto request = ProtobufRequestDecoder(limits).decode(message);
  auto peek = peekModelInferRequest(message.span());
  if (!request.ok()) {
    checkIsCleanError(request.status());
    return 0;
  }
  FUZZ_CHECK(peek.ok());
  FUZZ_CHECK(peek->model_name == request->model_name);
  FUZZ_CHECK(peek->model_version == request->model_version);
  auto encoded = ProtobufRequestEncoder().encode(*request);
  if (!encoded.ok()) {
    checkIsCleanError(encoded.status());
    return 0;
  }
  auto back = ProtobufRequestDecoder(limits).decode(encoded->flatten());
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->model_name == request->model_name);
  FUZZ_CHECK(back->inputs == request->inputs);
  FUZZ_CHECK(back->outputs.size() == request->outputs.size());
  return 0;
}
