#pragma once

// Reads the model name and version and the sequence parameters of a serialized
// ModelInferRequest without decoding the rest: the gRPC passthrough path routes on them
// (model routing, sequence affinity) and forwards the message untouched.
//
//   ModelInferRequest: 1 model_name (LEN) | 2 model_version (LEN) | 3 id (skipped)
//                      4 parameters: map<string, InferParameter> (LEN entries, read)
//                      5 inputs | 6 outputs | 7 raw_input_contents (skipped by length)
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
// Tensor fields are never read, so a message whose tensors are malformed peeks fine; a
// malformed parameters entry, or a malformed value of one of the three keys, is an error,
// as it is for protobuf (values of other keys are skipped unchecked).

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
};

// Errors: INVALID_ARGUMENT when the message is not well-formed protobuf wire format
// (truncated, malformed varint, length past the end, invalid tag), here or inside a
// parameters entry. Thread-safe (pure). Allocates only a string sequence id.
StatusOr<ModelRef> peekModelInferRequest(std::span<const uint8_t> message);

// The same for a message held in several segments (the slices of a grpc::ByteBuffer),
// without joining them: a passthrough never copies the message to route it. The names
// are copied out (they may straddle segments), and so is a parameters entry that
// straddles segments (gathered into scratch, then read as above; an entry within one
// segment is read in place). Group fields (proto2 only) at the top level are refused
// here with INVALID_ARGUMENT; callers fall back to the contiguous form for those.
struct OwnedModelRef {
  std::string model_name;
  std::string model_version;
  SequenceRef sequence;
};
StatusOr<OwnedModelRef> peekModelInferRequest(std::span<const std::span<const uint8_t>> segments);

}  // namespace infergate::codecs
