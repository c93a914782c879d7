#pragma once

// Reads the model name and version, the sequence parameters, and whether any tensor
// names a shared-memory region, of a serialized ModelInferRequest without decoding the
// rest: the gRPC passthrough path routes on them (model routing, sequence affinity) and
// forwards the message untouched, unless it uses shared memory (then it is decoded, so
// the client's regions are resolved at the gateway and never reach an upstream by name).
//
//   ModelInferRequest: 1 model_name (LEN) | 2 model_version (LEN) | 3 id (skipped)
//                      4 parameters: map<string, InferParameter> (LEN entries, read)
//                      5 inputs  (LEN InferInputTensor, walked to its parameters' keys)
//                      6 outputs (LEN InferRequestedOutputTensor, the same)
//                      7 raw_input_contents (skipped by length)
//
//   InferInputTensor:           1 name | 2 datatype | 3 shape | 4 parameters | 5 contents
//   InferRequestedOutputTensor: 1 name | 2 parameters
//
//   parameters entry:  1 key (LEN string) | 2 value (LEN InferParameter)
//   InferParameter:    oneof { 1 bool_param | 2 int64_param | 3 string_param |
//                              4 double_param (I64) | 5 uint64_param }
//
//   {parameters: {"sequence_id": {int64_param: 7}}}:
//     22 11                       field 4 LEN, an entry of 17 bytes
//        0a 0b "sequence_id"      key
//        12 02 10 07              value: InferParameter, field 2 VARINT 7
//
// Every field is visited (protobuf lets a field appear anywhere, and the last occurrence
// of model_name / model_version wins), but other fields are skipped by their length, so
// the cost is one pass over the tags, not over the tensor bytes. Each parameters entry is
// read down to its key; only the values of sequence_id, sequence_start and sequence_end
// are decoded, by protobuf's rules: within an entry the last key wins and the value
// fields merge (the last oneof member set wins); across entries the last one of a key
// replaces the value whole, and an entry without a value member clears it. What the
// values mean (negative and uint64 ids, non-bool flags) is sequence_peek.h's rule.
//
// `shared_memory` is true when an input's or requested output's parameters hold an
// entry whose key (the last key field, as protobuf reads it) is exactly
// "shared_memory_region", whatever its value. It is sound: whenever the full decoder
// (protobuf_request_decoder.h) gives a tensor `shared_memory`, the flag is true. (The
// converse may fail: a region without byte_size is refused by the decoder.) Only those
// entries' keys are read: names, shapes and typed contents of the tensors are skipped by
// wire type and length, raw_input_contents by length.
//
// Tensor data is never read, so a message whose tensor bytes are malformed peeks fine; a
// malformed input or output (its fields' framing, or a parameters entry's), a malformed
// request parameters entry, or a malformed value of one of the three sequence keys is an
// error, as it is for protobuf (values of other keys are skipped unchecked).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codecs/sequence_ref.h"
#include "codecs/status.h"

namespace infergate::codecs {

struct ModelRef {
  std::string_view model_name;     // views into the message: valid while it lives
  std::string_view model_version;  // "" when absent
  SequenceRef sequence;            // owns its string id
  bool shared_memory = false;      // some input or output names a shared-memory region
};

// Errors: INVALID_ARGUMENT when the message is not well-formed protobuf wire format
// (truncated, malformed varint, length past the end, invalid tag), here, inside an input
// or output, or inside a parameters entry. Thread-safe (pure). Allocates only a string sequence id.
StatusOr<ModelRef> peekModelInferRequest(std::span<const uint8_t> message);

// The same for a message held in several segments (the slices of a grpc::ByteBuffer),
// without joining them: a passthrough never copies the message to route it. The names
// are copied out (they may straddle segments), and so is a parameters entry (of the
// request, an input or an output) that straddles segments (gathered into scratch, then
// read as above; an entry within one segment is read in place). Inputs and outputs are
// walked across segments, never gathered whole (typed contents may be large). Group
// fields (proto2 only) at the top level or inside an input or output are refused here
// with INVALID_ARGUMENT; callers fall back to the contiguous form for those, and must
// carry its shared_memory over.
struct OwnedModelRef {
  std::string model_name;
  std::string model_version;
  SequenceRef sequence;
  bool shared_memory = false;  // as ModelRef::shared_memory
};
StatusOr<OwnedModelRef> peekModelInferRequest(std::span<const std::span<const uint8_t>> segments);

// Where the head of a serialized ModelInferRequest ends while its bytes still arrive: the
// head is every field before the first raw_input_contents (7), which is what the peek
// above reads from a message that protobuf's serializers wrote (fields in number order).
// `prefix` is the message's first bytes in, `message_size` its whole length.
//
//   kFound     `length` bytes of prefix are the head (the next field is a
//              raw_input_contents); peek them for the route
//   kNeedMore  the prefix ends inside a field before any raw_input_contents (or inside
//              the first one's tag); `length` is where that field starts, every field
//              before it whole: a later call may pass it as `from`
//   kNone      the message is all in and has no raw_input_contents, or it is not wire
//              format within the prefix: nothing to hand over early
//
// A field may follow the tensors and change what the head said (protobuf's last
// occurrence wins): whoever hands the message on early must peek it again once whole.
// Malformed input whose error only a longer prefix reveals reads as kNeedMore: the
// caller bounds how much it waits for. `from`: a field boundary an earlier call returned
// (kNeedMore's `length`), where the walk resumes, so that a head arriving in many small
// pieces is walked once in all, not once per piece. Thread-safe (pure); never reads past
// `prefix`.
struct ModelInferHead {
  enum class State { kNeedMore, kFound, kNone };
  State state = State::kNeedMore;
  size_t length = 0;  // kFound: the head's bytes; kNeedMore: the whole fields' bytes
};
ModelInferHead findModelInferHead(std::span<const uint8_t> prefix, size_t message_size, size_t from = 0);

}  // namespace infergate::codecs
