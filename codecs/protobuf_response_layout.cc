#include "codecs/protobuf_response_layout.h"

#include "codecs/data_type.h"
#include "codecs/protobuf_response_decoder.h"
#include "codecs/protobuf_wire.h"

namespace infergate::codecs {
namespace {

constexpr uint8_t kRawOutputTag = 0x32;  // field 6, LEN
constexpr size_t kMaxVarintBytes = 10;

enum class VarintRead { kDone, kShort, kBad };

// A varint at `at` of `bytes[0, size)`: kShort when it runs past `size`.
VarintRead readVarint(const uint8_t* bytes, size_t size, size_t& at, uint64_t& value) {
  value = 0;
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (at + i >= size) return VarintRead::kShort;
    const uint8_t b = bytes[at + i];
    value |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80u) == 0) {
      at += i + 1;
      return VarintRead::kDone;
    }
  }
  return VarintRead::kBad;
}

}  // namespace

ResponseLayoutScan scanResponseLayout(const Buffer& prefix, size_t message_size, const DecodeLimits& limits) {
  using Result = ResponseLayoutScan::Result;
  ResponseLayoutScan scan;
  const uint8_t* bytes = prefix.data();
  const size_t have = std::min(prefix.size(), message_size);
  if (message_size > limits.max_binary_body_bytes) {
    scan.result = Result::kUnknown;  // the whole decode refuses it, and says why
    return scan;
  }

  // The head: LEN fields 1 to 5, until the first raw entry's tag.
  size_t at = 0;
  for (;;) {
    if (at >= have) {
      scan.result = at >= message_size ? Result::kUnknown : Result::kNeedMore;  // no tensor at all
      return scan;
    }
    const uint8_t tag = bytes[at];
    if (tag == kRawOutputTag) break;
    if (tag != 0x0a && tag != 0x12 && tag != 0x1a && tag != 0x22 && tag != 0x2a) {
      scan.result = Result::kUnknown;  // a field out of order, unknown, or not LEN
      return scan;
    }
    size_t next = at + 1;
    uint64_t length = 0;
    const VarintRead read = readVarint(bytes, have, next, length);
    if (read == VarintRead::kBad || (read == VarintRead::kDone && length > message_size - next)) {
      scan.result = Result::kUnknown;
      return scan;
    }
    if (read == VarintRead::kShort || length > have - next) return scan;  // kNeedMore
    at = next + length;
  }

  StatusOr<InferResponse> head = ProtobufResponseDecoder(limits).decode(prefix.slice(0, at));
  if (!head.ok() || head->outputs.empty()) {
    scan.result = Result::kUnknown;
    return scan;
  }
  size_t end = at;
  for (const InferOutput& output : head->outputs) {
    const size_t element = elementSize(output.datatype);
    StatusOr<uint64_t> length = output.shape.byteSize(element);
    // Typed contents, a BYTES tensor (no size before its bytes), a shape that overflows.
    if (!output.data.empty() || output.shared_memory || element == 0 || !length.ok() ||
        *length > message_size) {
      scan.result = Result::kUnknown;
      return scan;
    }
    ResponseLayout::Entry entry;
    entry.tag_at = end;
    entry.data_at = end + 1 + varintSize(*length);
    entry.length = static_cast<size_t>(*length);
    if (entry.data_at > message_size || entry.length > message_size - entry.data_at) {
      scan.result = Result::kUnknown;
      return scan;
    }
    end = entry.data_at + entry.length;
    scan.layout.entries.push_back(entry);
  }
  if (end != message_size) {
    scan.result = Result::kUnknown;
    return scan;
  }
  scan.layout.head = std::move(*head);
  scan.result = Result::kLaidOut;
  return scan;
}

bool entryFramed(const ResponseLayout::Entry& entry, const uint8_t* message) {
  if (message[entry.tag_at] != kRawOutputTag) return false;
  size_t at = entry.tag_at + 1;
  uint64_t length = 0;
  return readVarint(message, entry.data_at, at, length) == VarintRead::kDone && at == entry.data_at &&
         length == entry.length;
}

}  // namespace infergate::codecs
