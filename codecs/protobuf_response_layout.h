#pragma once

// Where the tensor bytes of a serialized ModelInferResponse will lie, read from its first
// bytes while the rest still arrives: for a caller that starts transcoding an answer before
// it is whole (an HTTP client's binary outputs sent on as the gRPC message lands).
//
// A serializer writes fields in number order (protobuf's C++ runtime, Triton, grpc's
// Python and Go runtimes), so a Triton answer is laid out as
//
//   1 model_name | 2 model_version | 3 id | 4 parameters | 5 outputs   (the head, small)
//   6 raw_output_contents, one entry per output, in output order:
//       0x32 | varint(length) | `length` bytes                           (the tensors)
//
// Once the head is in, each entry's length is known before its bytes arrive: a fixed-size
// output's is its shape times its element size. The layout is accepted only when those
// entries, framed, end exactly where the message ends; anything else (a BYTES output, typed
// `contents`, a field out of order or unknown, an entry missing) is kUnknown, and the
// caller waits for the whole message and decodes it as usual. entryFramed() checks each
// entry's tag and length once they arrive: a message that only looked laid out this way
// is caught before any of that entry's bytes are used.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/limits.h"

namespace infergate::codecs {

struct ResponseLayout {
  struct Entry {
    size_t tag_at = 0;   // offset of the entry's tag in the message
    size_t data_at = 0;  // offset of its first tensor byte
    size_t length = 0;
  };
  // The response decoded from the head: every field but the tensors (outputs without data).
  InferResponse head;
  std::vector<Entry> entries;  // outputs[i]'s bytes are entries[i]'s; the head ends at entries[0].tag_at
};

struct ResponseLayoutScan {
  enum class Result {
    kNeedMore,  // the head is not all in `prefix` yet
    kLaidOut,   // `layout` is set
    kUnknown,   // not laid out as above (or not a valid head): wait for the whole message
  };
  Result result = Result::kNeedMore;
  ResponseLayout layout;
};

// `prefix`: the message's first bytes, of `message_size` in all. Decoding the head obeys
// `limits`, and a message over limits.max_binary_body_bytes is kUnknown (the whole
// message's decode names the error).
ResponseLayoutScan scanResponseLayout(const Buffer& prefix, size_t message_size, const DecodeLimits& limits);

// Whether `message` (at least entry.data_at bytes of it) frames `entry` as the layout says.
bool entryFramed(const ResponseLayout::Entry& entry, const uint8_t* message);

}  // namespace infergate::codecs
