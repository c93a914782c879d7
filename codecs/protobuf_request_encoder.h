#pragma once

// Encodes an InferRequest as a serialized ModelInferRequest for a gRPC upstream, without
// copying tensor bytes: the message is a BufferChain of "glue" (every field but the
// tensor bytes, in one std::string) and the inputs' own Buffers.
//
//   glue                                                      tensor   glue     tensor
//   +----+----+----+-------+-------+--------+----------------+--------+--------+--------+
//   | 1  | 2  | 3  | 4 ... | 5 ... | 6 ...  | 7: tag, len k0 | bytes  | 7: tag, | bytes  |
//   |name|ver | id | params| inputs| outputs|                | of k0  | len k1  | of k1  |
//   +----+----+----+-------+-------+--------+----------------+--------+--------+--------+
//
// One raw_input_contents entry per input that is not in shared memory, in input order
// (so raw entry i is not input i when some inputs are shm, as the Triton clients do); the
// tensor bytes are never sent as typed contents. Proto3: empty strings, zero scalars and
// empty shapes are omitted; map entries are written in full.
//
// Parameter kinds toward Triton (PROTOCOL.md 9.2, 9.3, 8.3, pitfall 11): request
// `priority` as uint64_param (a non-negative int64 converted), `sequence_id` as
// int64_param (a uint64 bit-cast) or string_param, `timeout` as int64_param; tensor
// shared_memory_region as string_param, shared_memory_byte_size and shared_memory_offset
// (only when != 0) as int64_param; output classification (when != 0) as int64_param.
// Other parameters keep their kind. HTTP-only keys are not sent (binary_data_output,
// binary_data, binary_data_size), nor parameters duplicating a field
// (shared_memory_*, classification).
//
// Errors: INVALID_ARGUMENT for an invalid datatype, input data that does not match its
// shape and datatype, a negative priority, or a timeout / shm offset / byte size /
// classification past INT64_MAX; RESOURCE_EXHAUSTED when the message would exceed the
// gRPC limit of 2 GiB - 1.
// Ownership: the chain shares the input Buffers (keeping them alive) and owns the glue.
// Thread-safety: encode() is const; one encoder may serve every thread.

#include "codecs/buffer.h"
#include "codecs/infer.h"
#include "codecs/status.h"

namespace infergate::codecs {

class ProtobufRequestEncoder {
 public:
  StatusOr<BufferChain> encode(const InferRequest& request) const;
};

}  // namespace infergate::codecs
