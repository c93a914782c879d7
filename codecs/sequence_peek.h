#pragma once

// A request's sequence (sequence_id, sequence_start, sequence_end; PROTOCOL.md 5.3, 9.2)
// for sequence affinity, read without decoding the request: from the JSON header of an
// HTTP /infer body, or from an already decoded request's Parameters. The gRPC form is
// read by the model peek (protobuf_peek.h) in the same pass as the model name.
//
// What counts as a sequence id. The rule: affinity whenever some upstream may take the
// value as a correlation id; no affinity only where every upstream refuses it (pinning a
// request that fails anyway costs nothing; spreading a live sequence breaks it).
//
//   JSON  (peekSequenceFromJson)   integer 1 .. 2^64-1 -> kInt; non-empty string ->
//         kString; 0, "", a negative integer, a float (1.0, 1e3), an integer past
//         uint64, a bool, null, an array or an object -> kNone (Triton's HTTP frontend
//         and JsonRequestDecoder refuse all of these but 0 and "").
//   Parameters (sequenceOf)        int64 != 0 -> kInt with its two's-complement bits;
//         uint64 != 0 -> kInt; non-empty string -> kString; anything else -> kNone.
//         A negative int64 only comes from gRPC, where Triton's frontend hands
//         int64_param to SetCorrelationId(uint64_t) as is (-1 is correlation id 2^64-1,
//         accepted) and ProtobufRequestEncoder writes a uint64 id past INT64_MAX as that
//         negative int64_param. A gRPC uint64_param is refused by Triton's gRPC frontend
//         but accepted once the gateway transcodes it (to int64_param bits or an HTTP
//         integer), so it is an id too.
//   sequence_start / sequence_end  true only for a boolean true; any other value is
//         false (the upstream refuses it; the peek does not judge).
//
// Repeated keys: the last one wins (protobuf's map; JsonRequestDecoder's Parameters::set),
// and a top-level "parameters" that appears twice adds to the first, as in the decoder.
// So for any valid request its decoder accepts, the peek equals sequenceOf(decoded
// parameters). (Triton's rapidjson takes the first of duplicate JSON keys instead; no
// client sends them, and RFC 8259 leaves their meaning open.)
//
// Thread-safety: pure functions; the JSON peek uses the per-thread simdjson parser.

#include <cstddef>
#include <string_view>

#include "codecs/limits.h"
#include "codecs/parameters.h"
#include "codecs/sequence_ref.h"
#include "codecs/status.h"

namespace infergate::codecs {

// Reads the top-level "parameters" object of an HTTP /infer JSON header (the JSON part
// only: split the binary section off first) for the three keys; every other value is
// skipped unread, so "inputs" and its data are never materialized.
//
// Cost: simdjson's structural scan of the whole text (stage 1, a few GB/s), then a walk of
// the root object's keys and of "parameters" only; no allocation beyond the thread's
// warm parser, the copy of a string id, and, when `readable` leaves fewer than
// SIMDJSON_PADDING (64) bytes past the text, a copy of the text into per-thread scratch.
//
// Errors: INVALID_ARGUMENT naming the problem when the text is not a JSON object, a
// "parameters" value is not an object, the walked part is malformed (a key, or the value
// of one of the three keys) or data follows the root object; RESOURCE_EXHAUSTED past
// limits.max_json_bytes. Malformed JSON inside skipped values is only found when it
// unbalances brackets or strings (simdjson On-Demand checks no more on a skip), so an
// accepted header may still be refused by the full decoder. On any error the caller
// routes without affinity and lets the decoder or the upstream answer.
StatusOr<SequenceRef> peekSequenceFromJson(std::string_view json_header, size_t readable,
                                           const DecodeLimits& limits = {});
inline StatusOr<SequenceRef> peekSequenceFromJson(std::string_view json_header) {
  return peekSequenceFromJson(json_header, json_header.size());
}

// The sequence of a decoded request (InferRequest::parameters), by the rules above.
SequenceRef sequenceOf(const Parameters& parameters);

// Whether `key` is sequence_id, sequence_start or sequence_end.
bool isSequenceKey(std::string_view key);

// Sets the part of `ref` that `key` names from `value` by sequenceOf's rules; `value`
// null stands for a value of no kind (a gRPC InferParameter with no member set), which
// clears it. Other keys are ignored. Used by the peeks, which see one entry at a time.
void applySequenceParameter(std::string_view key, const ParamValue* value, SequenceRef& ref);

}  // namespace infergate::codecs
