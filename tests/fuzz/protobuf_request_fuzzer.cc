// Property: any bytes either decode into a ModelInferRequest or fail cleanly; the model
// peek (name, version, sequence, whether a tensor names a shared-memory region) agrees with
// the full decode, and the segmented peek with the contiguous one however the bytes are
// cut; what decodes re-encodes and decodes to the same.

#include <cstddef>
#include <cstdint>

#include "codecs/protobuf_peek.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"
#include "codecs/sequence_peek.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Buffer message = Buffer::copyOf(std::string_view(reinterpret_cast<const char*>(data), size));
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  auto request = ProtobufRequestDecoder(limits).decode(message);
  auto peek = peekModelInferRequest(message.span());
  // The segmented peek, cut where the first byte says: it refuses only what the
  // contiguous one refuses, or top-level groups (its callers then use the contiguous one).
  size_t at = size == 0 ? 0 : data[0] % (size + 1);
  std::span<const uint8_t> segments[] = {{data, at}, {data + at, size - at}};
  auto owned = peekModelInferRequest(std::span<const std::span<const uint8_t>>(segments));
  if (owned.ok()) {
    FUZZ_CHECK(peek.ok());
    FUZZ_CHECK(owned->model_name == peek->model_name);
    FUZZ_CHECK(owned->model_version == peek->model_version);
    FUZZ_CHECK(owned->sequence == peek->sequence);
    FUZZ_CHECK(owned->shared_memory == peek->shared_memory);
  } else {
    checkIsCleanError(owned.status());
  }
  if (!request.ok()) {
    checkIsCleanError(request.status());
    return 0;
  }
  FUZZ_CHECK(peek.ok());
  FUZZ_CHECK(peek->model_name == request->model_name);
  FUZZ_CHECK(peek->model_version == request->model_version);
  FUZZ_CHECK(peek->sequence == sequenceOf(request->parameters));
  // The gateway passes a message through only when this is false: it must never miss a
  // region the decoder finds (and finds none the decoder does not).
  bool names_region = false;
  for (const InferInput& in : request->inputs) names_region = names_region || in.shared_memory;
  for (const RequestedOutput& out : request->outputs) names_region = names_region || out.shared_memory;
  FUZZ_CHECK(peek->shared_memory == names_region);
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
