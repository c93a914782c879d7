// Property: any bytes either decode into a ModelInferResponse or fail cleanly; what
// decodes re-encodes (Triton style, raw contents) and decodes to the same response. The
// layout read ahead from a prefix (protobuf_response_layout.h) stays inside the message,
// and where every entry it announced is framed so, the whole decode puts each output's
// bytes exactly there (what the HTTP frontend relies on when it relays them early).

#include <cstddef>
#include <cstdint>

#include "codecs/protobuf_response_decoder.h"
#include "codecs/protobuf_response_encoder.h"
#include "codecs/protobuf_response_layout.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate::codecs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Buffer message = Buffer::copyOf(std::string_view(reinterpret_cast<const char*>(data), size));
  DecodeLimits limits;
  limits.max_tensor_bytes = 1 << 20;
  auto response = ProtobufResponseDecoder(limits).decode(message);
  for (size_t have : {size / 3, size / 2, size}) {
    ResponseLayoutScan scan = scanResponseLayout(message.slice(0, have), size, limits);
    if (scan.result != ResponseLayoutScan::Result::kLaidOut) continue;
    bool framed = true;
    for (const ResponseLayout::Entry& e : scan.layout.entries) {
      FUZZ_CHECK(e.tag_at < e.data_at && e.data_at <= size && e.length <= size - e.data_at);
      framed = framed && entryFramed(e, message.data());
    }
    if (!framed || !response.ok()) continue;
    FUZZ_CHECK(response->outputs.size() == scan.layout.entries.size());
    for (size_t i = 0; i < scan.layout.entries.size(); ++i) {
      const ResponseLayout::Entry& e = scan.layout.entries[i];
      FUZZ_CHECK(response->outputs[i].data.data() == message.data() + e.data_at || e.length == 0);
      FUZZ_CHECK(response->outputs[i].data.size() == e.length);
    }
  }
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
