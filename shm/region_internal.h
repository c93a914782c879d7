#pragma once

// Helpers shared by region.cc and cuda_region.cc; not part of shm/'s interface.

#include <cstdint>

#include "codecs/status.h"
#include "shm/region.h"

namespace infergate::shm::internal {

// Whether [offset, offset + size) lies inside `limit` bytes, without overflowing.
inline bool rangeInside(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

// INVALID_ARGUMENT naming the region unless [offset, offset + size) lies inside it.
codecs::Status checkRange(const Region& region, uint64_t offset, uint64_t size);

}  // namespace infergate::shm::internal
