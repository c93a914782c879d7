#pragma once

// For the connection tests: a body an owner serves from memory, as Connection::Handler's
// bodyReady and writeData ask for it; `ready` of its bytes are there so far.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/http2/frame.h"

namespace infergate::gateway::http2 {

struct MemoryBody {
  std::string body;
  size_t sent = 0;
  size_t ready = SIZE_MAX;  // bytes of the body available so far

  // bodyReady(): at most `max` of the bytes there and not sent; `last` when they end it.
  size_t readyFor(size_t max, bool& last) const {
    const size_t have = std::min(ready, body.size());
    const size_t n = std::min(max, have - sent);
    last = sent + n == body.size();
    return n;
  }
  // writeData(): the frame header, then the next `length` bytes.
  void writeInto(std::string& out, const uint8_t* head, size_t length) {
    out.append(reinterpret_cast<const char*>(head), kFrameHeaderBytes);
    out.append(body, sent, length);
    sent += length;
  }
};

}  // namespace infergate::gateway::http2
