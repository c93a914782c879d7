#pragma once

// A tensor shape: dimensions as int64 (the wire type of every protocol form). Requests
// carry only non-negative dims; model metadata uses -1 for a variable dimension.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "codecs/limits.h"
#include "codecs/status.h"

namespace infergate::codecs {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& mutableDims() { return dims_; }
  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  void push_back(int64_t dim) { dims_.push_back(dim); }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  bool operator==(const Shape&) const = default;

  // Product of the dims, checked: a negative dim or a product past INT64_MAX is
  // INVALID_ARGUMENT naming `tensor`. The empty shape (a scalar) has one element.
  StatusOr<int64_t> elementCount(std::string_view tensor = {}) const;

  // Byte size of a fixed-size tensor of this shape: elementCount * element_size, checked.
  StatusOr<uint64_t> byteSize(size_t element_size, std::string_view tensor = {}) const;

  // "[1,16]"
  std::string toString() const;

 private:
  std::vector<int64_t> dims_;
};

// A decoded tensor's shape against limits.max_rank and limits.max_elements:
// RESOURCE_EXHAUSTED naming `tensor` and the limit past either.
Status checkShapeLimits(const Shape& shape, std::string_view tensor, const DecodeLimits& limits);

}  // namespace infergate::codecs
