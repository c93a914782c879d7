#pragma once

// The sequence a request belongs to (PROTOCOL.md 5.3, 9.2): what sequence affinity routes
// on. Plain data, made by the peeks without decoding the request (protobuf_peek.h for
// gRPC, sequence_peek.h for the JSON header of HTTP) or from a decoded request's
// Parameters (sequenceOf in sequence_peek.h).
//
//   sequence_id     int (uint64 bits) or string     0 and "" mean "not in a sequence"
//   sequence_start  true only when sent as a bool true
//   sequence_end    true only when sent as a bool true
//
// The value is normalized so that equal sequences compare equal: kInt has int_id != 0 and
// an empty string_id; kString a non-empty string_id and int_id 0; kNone neither. start
// and end are reported as sent, whether or not an id is present.

#include <cstdint>
#include <string>

namespace infergate::codecs {

struct SequenceRef {
  enum class Kind { kNone, kInt, kString };
  Kind kind = Kind::kNone;  // kNone also when the id is 0 or ""
  uint64_t int_id = 0;
  std::string string_id;
  bool start = false;
  bool end = false;

  bool present() const { return kind != Kind::kNone; }
  // "i:<decimal>" or "s:<id>": a key that never confuses int 5 with string "5"; "" for
  // kNone. The same sequence gives the same key whichever protocol carried it (an HTTP
  // 18446744073709551615 and a gRPC int64_param -1 are one correlation id to Triton).
  std::string key() const;

  bool operator==(const SequenceRef&) const = default;
};

inline std::string SequenceRef::key() const {
  switch (kind) {
    case Kind::kInt:
      return "i:" + std::to_string(int_id);
    case Kind::kString:
      return "s:" + string_id;
    case Kind::kNone:
      break;
  }
  return std::string();
}

}  // namespace infergate::codecs
