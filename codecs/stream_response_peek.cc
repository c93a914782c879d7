#include "codecs/stream_response_peek.h"

#include <string_view>

#include "codecs/parameters.h"
#include "codecs/protobuf_wire.h"

namespace infergate::codecs {

std::optional<std::string> peekStreamResponseModel(std::span<const uint8_t> message) {
  std::optional<std::string> name;
  Status walked = forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.number != 2 || tag.type != WireType::kLen) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(auto inner, reader.readLengthDelimited());
    return forEachField(inner, [&](FieldTag t, WireReader& r) -> Status {
      if (t.number != 1 || t.type != WireType::kLen) return r.skip(t);
      INFERGATE_ASSIGN_OR_RETURN(auto value, r.readLengthDelimited());
      name = std::string(asChars(value));
      return absl::OkStatus();
    });
  });
  return walked.ok() ? name : std::nullopt;
}

StreamAnswer peekStreamAnswer(std::span<const uint8_t> message) {
  bool final = true, error = false;
  Status walked = forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.number == 1 && tag.type == WireType::kLen) {
      INFERGATE_ASSIGN_OR_RETURN(auto text, reader.readLengthDelimited());
      error = !text.empty();
      return absl::OkStatus();
    }
    if (tag.number != 2 || tag.type != WireType::kLen) return reader.skip(tag);
    INFERGATE_ASSIGN_OR_RETURN(auto inner, reader.readLengthDelimited());
    return forEachField(inner, [&](FieldTag t, WireReader& r) -> Status {
      if (t.number != 4 || t.type != WireType::kLen) return r.skip(t);
      INFERGATE_ASSIGN_OR_RETURN(auto entry, r.readLengthDelimited());
      std::string_view key;
      std::optional<bool> flag;
      INFERGATE_RETURN_IF_ERROR(forEachField(entry, [&](FieldTag e, WireReader& er) -> Status {
        if (e.number == 1 && e.type == WireType::kLen) {
          INFERGATE_ASSIGN_OR_RETURN(auto k, er.readLengthDelimited());
          key = asChars(k);
          return absl::OkStatus();
        }
        if (e.number != 2 || e.type != WireType::kLen) return er.skip(e);
        INFERGATE_ASSIGN_OR_RETURN(auto value, er.readLengthDelimited());
        return forEachField(value, [&](FieldTag v, WireReader& vr) -> Status {
          if (v.number != 1 || v.type != WireType::kVarint) return vr.skip(v);
          INFERGATE_ASSIGN_OR_RETURN(uint64_t b, vr.readVarint());
          flag = b != 0;
          return absl::OkStatus();
        });
      }));
      if (key == param::kFinalResponse && flag) final = *flag;
      return absl::OkStatus();
    });
  });
  if (!walked.ok()) return StreamAnswer{true, true};
  return StreamAnswer{final || error, error};
}

}  // namespace infergate::codecs
