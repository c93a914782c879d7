// Property: any bytes either decode into a response (as from an HTTP upstream) or fail
// cleanly; what decodes encodes back (JSON and binary outputs) and decodes to the same.
// The binary form read ahead of its blobs (decodeResponseAhead, the gRPC answer relay's
// decode) gives that same response, or refuses it for an output it cannot check by size
// (FAILED_PRECONDITION), never another error: the whole decode already checked the rest.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codecs/binary_tensor.h"
#include "codecs/json_response_decoder.h"
#include "codecs/json_response_encoder.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto header = JsonResponseDecoder(limits).decode(text);
  if (!header.ok()) {
    checkIsCleanError(header.status());
    return 0;
  }
  if (!header->binary_outputs.empty()) return 0;
  const InferResponse& response = header->response;
  for (bool binary : {true, false}) {
    InferRequest asked;
    asked.binary_data_output = binary;
    auto body = JsonResponseEncoder().encode(response, asked);
    if (!body.ok()) {  // FP16/BF16 as JSON is refused by design
      checkIsCleanError(body.status());
      continue;
    }
    const Buffer flat = body->body.flatten();
    auto back = BinaryTensorDecoder(limits).decodeResponse(flat, body->header_length);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == response);
    if (body->header_length) {
      auto ahead = BinaryTensorDecoder(limits).decodeResponseAhead(flat, *body->header_length);
      if (ahead.ok()) {
        FUZZ_CHECK(*ahead == response);
      } else {
        checkIsCleanError(ahead.status());
        FUZZ_CHECK(ahead.status().code() == absl::StatusCode::kFailedPrecondition);
      }
    }
  }
  return 0;
}
