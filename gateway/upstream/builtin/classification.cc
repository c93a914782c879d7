#include "gateway/upstream/builtin/classification.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "codecs/bytes_tensor.h"
#include "gateway/upstream/builtin/tensor_access.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;

// Descending, NaN last, ties in index order (stable_sort).
template <typename T>
bool ranksAbove(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a > b;
}

// Appends the top-k strings of `count` elements starting at element `first`.
template <typename T>
void appendTopK(const codecs::Buffer& data, size_t first, size_t count, size_t k,
                std::string& out) {
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = loadElement<T>(data, first + i);
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ranksAbove(values[a], values[b]); });
  for (size_t j = 0; j < k; ++j) {
    // std::to_string as Triton does; int8/uint8 promote to int and print as numbers.
    codecs::appendBytesElement(out,
                               std::to_string(values[order[j]]) + ":" + std::to_string(order[j]));
  }
}

template <typename T>
void classifyAll(const codecs::Buffer& data, size_t items, size_t per_item, size_t k,
                 std::string& out) {
  for (size_t b = 0; b < items; ++b) appendTopK<T>(data, b * per_item, per_item, k, out);
}

}  // namespace

codecs::StatusOr<codecs::InferOutput> classify(const codecs::InferOutput& output, uint64_t count,
                                               bool batched) {
  const DataType type = output.datatype;
  if (type == DataType::kBool || type == DataType::kBytes || codecs::isRawOnly(type) ||
      !codecs::isFixedSize(type)) {
    return codecs::invalidArgument(
        "class result not available for output due to unsupported type '",
        codecs::dataTypeName(type), "'");
  }
  INFERGATE_ASSIGN_OR_RETURN(int64_t total, output.shape.elementCount(output.name));
  if (total > kMaxClassificationElements) {
    return codecs::invalidArgument("class result not available for output '", output.name,
                                   "': ", total, " elements exceed the limit of ",
                                   kMaxClassificationElements);
  }
  if (output.data.size() != static_cast<uint64_t>(total) * codecs::elementSize(type)) {
    return codecs::internalError("output '", output.name, "' holds ", output.data.size(),
                                 " bytes, not the ", total, " elements of its shape");
  }
  batched = batched && output.shape.rank() >= 1;
  const size_t items = batched ? static_cast<size_t>(output.shape[0]) : 1;
  size_t per_item = static_cast<size_t>(total);
  if (batched) {
    per_item = 1;
    for (size_t i = 1; i < output.shape.rank(); ++i) per_item *= output.shape[i];
  }
  const size_t k = static_cast<size_t>(std::min<uint64_t>(count, per_item));

  std::string out;
  switch (type) {
    case DataType::kUint8:
      classifyAll<uint8_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kUint16:
      classifyAll<uint16_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kUint32:
      classifyAll<uint32_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kUint64:
      classifyAll<uint64_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kInt8:
      classifyAll<int8_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kInt16:
      classifyAll<int16_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kInt32:
      classifyAll<int32_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kInt64:
      classifyAll<int64_t>(output.data, items, per_item, k, out);
      break;
    case DataType::kFp32:
      classifyAll<float>(output.data, items, per_item, k, out);
      break;
    case DataType::kFp64:
      classifyAll<double>(output.data, items, per_item, k, out);
      break;
    default:
      break;  // refused above
  }
  codecs::Shape shape;
  if (batched) shape.push_back(static_cast<int64_t>(items));
  shape.push_back(static_cast<int64_t>(k));
  codecs::InferOutput result = output;
  result.datatype = DataType::kBytes;
  result.shape = std::move(shape);
  result.data = codecs::Buffer::fromString(std::move(out));
  return result;
}

}  // namespace infergate::gateway::builtin
