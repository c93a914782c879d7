#pragma once

// Shared by this folder's tests: counting the allocations a piece of code makes on the
// calling thread, to prove that a hot path (RouteTable::match(), LoadBalancer::pick())
// makes none.
//
// It replaces the global operator new and delete: the only way to see allocations made
// inside the standard library (a std::string built for a hash lookup, say). A program
// may define those once, so include this header from exactly one source file of a test
// binary.

#include <cstddef>
#include <cstdlib>
#include <new>

namespace infergate::routing::testing {

inline thread_local bool counting_allocations = false;
inline thread_local size_t allocations_counted = 0;

// How many allocations `fn` made on this thread.
template <typename Fn>
size_t allocationsDuring(Fn&& fn) {
  allocations_counted = 0;
  counting_allocations = true;
  fn();
  counting_allocations = false;
  return allocations_counted;
}

}  // namespace infergate::routing::testing

// Kept out of line: inlined, GCC sees free() meet a pointer from operator new and warns
// (-Wmismatched-new-delete), though both sides here are malloc's.
[[gnu::noinline]] void* operator new(size_t size) {
  if (infergate::routing::testing::counting_allocations) {
    ++infergate::routing::testing::allocations_counted;
  }
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
