#include "codecs/published.h"

#include <mutex>

namespace infergate::codecs::published_detail {
namespace {

struct Slots {
  std::mutex mu;
  std::vector<size_t> free;  // given back, reused first
  size_t next = 0;
};

Slots& slots() {
  static auto* s = new Slots();  // never destroyed: instances may die in static destructors
  return *s;
}

std::atomic<uint64_t> next_id{1};

}  // namespace

std::vector<Held>& threadTable() {
  thread_local std::vector<Held> table;
  return table;
}

size_t takeSlot() {
  Slots& s = slots();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.free.empty()) {
    const size_t slot = s.free.back();
    s.free.pop_back();
    return slot;
  }
  return s.next++;
}

void giveBackSlot(size_t slot) {
  Slots& s = slots();
  std::lock_guard<std::mutex> lock(s.mu);
  s.free.push_back(slot);
}

uint64_t newId() { return next_id.fetch_add(1, std::memory_order_relaxed); }

}  // namespace infergate::codecs::published_detail
