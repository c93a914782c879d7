#pragma once

// A value that one thread replaces now and then (a reload) and every worker reads per
// request. std::atomic<std::shared_ptr> serves both, but each of its loads takes the
// value's spin lock and reference count: atomic read-modify-writes on lines that every
// worker writes, so each load pulls them out of the other cores' caches. get() here
// reads one version number (a line no reader writes, shared by every core's cache until
// the next store) and returns the value as this thread last took it; only a store since
// makes it take the value again.
//
//   store(v)  any thread: every thread's next get() sees v
//   load()    a counted copy (to keep the value past the next get(), or off the hot
//             path)
//   get()     the current value as this thread holds it (null when none was stored).
//             The pointer stays valid until this thread's next get() of the same
//             instance; get()s of other instances do not disturb it.
//
// What a thread holds: one reference per instance it read, in a table of its own
// indexed by the instance's slot (slots of destroyed instances are given to new ones;
// a new instance's first get() replaces what the slot held). A replaced value is let
// go by a thread at its next get() of that instance, or at its exit: use Published for
// values whose release needs no promptness (settings, credentials), not for ones whose
// destructor closes anything.
//
// Threads: any, for every member. store(), load() and a get() after a store take the
// instance's mutex; the constructor and destructor a process-wide one (slot numbers).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace infergate::codecs {

namespace published_detail {

struct Held {
  uint64_t id = 0;  // the instance whose value this is (0: none)
  uint64_t version = 0;
  std::shared_ptr<const void> value;
};

// This thread's table, by slot.
std::vector<Held>& threadTable();
// A slot no live instance uses, and a number no instance ever had.
size_t takeSlot();
void giveBackSlot(size_t slot);
uint64_t newId();

}  // namespace published_detail

template <typename T>
class Published {
 public:
  explicit Published(std::shared_ptr<const T> value = nullptr)
      : value_(std::move(value)), slot_(published_detail::takeSlot()), id_(published_detail::newId()) {}
  ~Published() { published_detail::giveBackSlot(slot_); }
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  void store(std::shared_ptr<const T> next) {
    std::shared_ptr<const T> old;  // let go outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    old = std::exchange(value_, std::move(next));
    version_.fetch_add(1, std::memory_order_release);
  }

  std::shared_ptr<const T> load() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }

  const T* get() const {
    std::vector<published_detail::Held>& table = published_detail::threadTable();
    if (table.size() <= slot_) table.resize(slot_ + 1);
    published_detail::Held& held = table[slot_];
    if (held.id == id_ && held.version == version_.load(std::memory_order_acquire)) {
      return static_cast<const T*>(held.value.get());
    }
    // The value before goes last, unlocked, and after the table is last touched: its
    // destructor may call get() again and grow the table.
    std::shared_ptr<const void> before;
    const T* value;
    {
      std::lock_guard<std::mutex> lock(mu_);  // the value and its version, as one
      before = std::exchange(held.value, value_);
      held.version = version_.load(std::memory_order_relaxed);
      held.id = id_;
      value = static_cast<const T*>(held.value.get());
    }
    return value;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> value_;  // under mu_
  // On a line of its own: readers only read it, and nothing written per request may
  // share it. Changed under mu_.
  alignas(64) std::atomic<uint64_t> version_{0};
  const size_t slot_;
  const uint64_t id_;
};

}  // namespace infergate::codecs
