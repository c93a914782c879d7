#pragma once

// Encodes an InferResponse as a serialized ModelInferResponse the way Triton does
// (PROTOCOL.md 11.4), without copying tensor bytes: a BufferChain of "glue" (every field
// but the tensor bytes, in one std::string) and the outputs' own Buffers.
//
//   glue                                                       tensor    glue      tensor
//   +----+----+----+-------+------------+--------------------+--------+---------+--------+
//   | 1  | 2  | 3  | 4 ... | 5 ...      | 6: tag, len out0   | bytes  | 6: tag, | bytes  |
//   |name|ver | id | params| outputs    |                    | of out0| len out1| of out1|
//   +----+----+----+-------+------------+--------------------+--------+---------+--------+
//
// Every output gets a raw_output_contents entry at its own index: an empty one for an
// output in shared memory or of zero size. Typed `contents` are never written (Triton
// never sends them, and the Python client ignores numeric ones). An output is written as
// name, datatype, shape and its parameters if any (HTTP-only binary_data /
// binary_data_size keys excepted). Proto3: empty strings and empty shapes are omitted.
//
//   ModelStreamInferResponse:  1 error_message (when not empty)
//                              2 tag, length | the ModelInferResponse chain above
//
// Errors: INVALID_ARGUMENT for an invalid datatype or non-empty data that does not match
// its shape and datatype (empty data is sent as an empty entry, as for shm outputs);
// RESOURCE_EXHAUSTED past the gRPC limit of 2 GiB - 1.
// Ownership: the chain shares the output Buffers and owns the glue.
// Thread-safety: const; one encoder may serve every thread.

#include <string_view>

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/status.h"

namespace infergate::codecs {

class ProtobufResponseEncoder {
 public:
  StatusOr<BufferChain> encode(const InferResponse& response) const;

  // A ModelStreamInferResponse: `response` may be null (an error alone), `error_message`
  // may be empty (a response alone).
  StatusOr<BufferChain> encodeStream(const InferResponse* response,
                                     std::string_view error_message) const;
};

}  // namespace infergate::codecs
