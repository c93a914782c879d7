#pragma once

// A request body that is still arriving while its request is already being handled.
//
// The connection reads a large body with a Content-Length straight into storage that has
// room for all of it. A handler that can send the body on as it comes (a gRPC upstream call
// whose DATA frames reference the body where it lies) need not wait for its last byte: the
// headers gate asks for the request early (HttpRequest::early_dispatch_bytes), the handler
// gets it with HttpRequest::arrival set, and every reference into the body is to memory
// that exists but may not be written yet. What may be read is what arrivedOf() says.
//
//   connection ---advance(n)---> BodyArrival ---watchers---> senders resume
//              ---fail()------->             ---watchers---> senders cancel
//
// Threads: the connection's loop only; watchers run there, inside advance() / fail().

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "codecs/status.h"

namespace infergate::gateway::http {

class BodyArrival {
 public:
  // The body occupies [begin, begin + size); none of it is in yet.
  BodyArrival(const uint8_t* begin, uint64_t size) : begin_(begin), size_(size) {}
  BodyArrival(const BodyArrival&) = delete;
  BodyArrival& operator=(const BodyArrival&) = delete;

  const uint8_t* data() const { return begin_; }
  uint64_t size() const { return size_; }
  uint64_t received() const { return received_; }
  bool complete() const { return received_ == size_; }
  // The rest never comes: the client went away, or its body broke or timed out.
  bool failed() const { return failed_; }
  // Neither more bytes nor a failure can follow.
  bool settled() const { return complete() || failed_; }

  // How many bytes from `p` on, of `n`, may be read: all of them for memory outside the
  // body, and in the body those up to where it has arrived.
  size_t arrivedOf(const void* p, size_t n) const {
    const auto at = reinterpret_cast<uintptr_t>(p);
    const auto begin = reinterpret_cast<uintptr_t>(begin_);
    if (at < begin || at - begin >= size_) return n;
    const uint64_t offset = at - begin;
    if (received_ <= offset) return 0;
    const uint64_t in = received_ - offset;
    return in < n ? static_cast<size_t>(in) : n;
  }

  // `watcher` runs after every change (more bytes, all of them, the failure) until
  // unwatch(token). A watcher may watch and unwatch (itself included) while it runs.
  uint64_t watch(std::function<void()> watcher);
  void unwatch(uint64_t token);
  // Runs `then(complete)` once, when the body is whole (true) or failed (false): at once
  // when it is already settled.
  void whenSettled(std::function<void(bool complete)> then);

  // What a call that needed the rest of the body ends with once it failed (CANCELLED).
  static codecs::Status notArrived() {
    return absl::CancelledError("the client's request body did not arrive whole");
  }

  // The connection's side. `received` only grows, up to size().
  void advance(uint64_t received);
  void fail();

 private:
  void notify();

  const uint8_t* const begin_;
  const uint64_t size_;
  uint64_t received_ = 0;
  bool failed_ = false;
  uint64_t next_token_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> watchers_;
};

}  // namespace infergate::gateway::http
