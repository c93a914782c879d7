#include "codecs/protobuf_peek.h"

#include "codecs/protobuf_wire.h"

namespace infergate::codecs {

StatusOr<ModelRef> peekModelInferRequest(std::span<const uint8_t> message) {
  ModelRef ref;
  INFERGATE_RETURN_IF_ERROR(forEachField(message, [&](FieldTag tag, WireReader& reader) -> Status {
    if (tag.type != WireType::kLen || (tag.number != 1 && tag.number != 2)) {
      return reader.skip(tag);
    }
    INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> value, reader.readLengthDelimited());
    (tag.number == 1 ? ref.model_name : ref.model_version) = asChars(value);
    return absl::OkStatus();
  }));
  return ref;
}

}  // namespace infergate::codecs
