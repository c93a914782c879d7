#include "codecs/shape.h"

#include <limits>

namespace infergate::codecs {

StatusOr<int64_t> Shape::elementCount(std::string_view tensor) const {
  int64_t count = 1;
  for (int64_t dim : dims_) {
    if (dim < 0) {
      return invalidArgument("tensor '", tensor, "' has a negative dimension in shape ",
                             toString());
    }
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) {
      return invalidArgument("tensor '", tensor, "' shape ", toString(),
                             " has more elements than fit in int64");
    }
    count *= dim;
  }
  return count;
}

StatusOr<uint64_t> Shape::byteSize(size_t element_size, std::string_view tensor) const {
  INFERGATE_ASSIGN_OR_RETURN(int64_t count, elementCount(tensor));
  uint64_t elements = static_cast<uint64_t>(count);
  if (element_size != 0 && elements > std::numeric_limits<uint64_t>::max() / element_size) {
    return invalidArgument("tensor '", tensor, "' shape ", toString(),
                           " is larger than 2^64 bytes");
  }
  return elements * element_size;
}

Status checkShapeLimits(const Shape& shape, std::string_view tensor,
                        const DecodeLimits& limits) {
  if (shape.rank() > limits.max_rank) {
    return resourceExhausted("tensor '", tensor, "' has ", shape.rank(),
                             " dimensions, more than the limit of ", limits.max_rank);
  }
  INFERGATE_ASSIGN_OR_RETURN(int64_t count, shape.elementCount(tensor));
  if (static_cast<uint64_t>(count) > limits.max_elements) {
    return resourceExhausted("tensor '", tensor, "' of shape ", shape.toString(), " has ", count,
                             " elements, more than the limit of ", limits.max_elements);
  }
  return absl::OkStatus();
}

std::string Shape::toString() const {
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(dims_[i]);
  }
  out += ']';
  return out;
}

}  // namespace infergate::codecs
