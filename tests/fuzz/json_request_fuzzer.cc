// Property: any bytes either decode into a request, or fail with a clean Status. What
// decodes re-encodes (binary and JSON forms) and decodes back to the same request.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codecs/binary_tensor.h"
#include "codecs/json_request_decoder.h"
#include "codecs/json_request_encoder.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto header = JsonRequestDecoder(limits).decode(text);
  if (!header.ok()) {
    checkIsCleanError(header.status());
    return 0;
  }
  if (!header->binary_inputs.empty()) return 0;  // blobs belong to the binary fuzzer
  const InferRequest& request = header->request;
  for (bool binary : {true, false}) {
    JsonRequestEncoder::Options options;
    options.binary_inputs = binary;
    options.drop_triton_parameters = false;
    auto body = JsonRequestEncoder(options).encode(request);
    FUZZ_CHECK(body.ok());
    auto back = BinaryTensorDecoder(limits).decodeRequest(body->body.flatten(), body->header_length);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == request);
  }
  return 0;
}
