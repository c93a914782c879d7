#pragma once

// Plays a builtin model's Execution on an event loop: each response is emitted after its
// delay (a timer, never a sleep), in order, until the last or until cancelled. The same
// runner serves the HTTP and gRPC frontends.
//
// Threading: run() and every emit call happen on `loop`'s thread. The runner keeps itself
// alive until it has emitted its last response, been cancelled, or the loop stopped.

#include <atomic>
#include <functional>
#include <memory>

#include "codecs/infer.h"
#include "gateway/http/event_loop.h"
#include "gateway/upstream/builtin/model.h"

namespace infergate::gateway {

struct Emission {
  codecs::StatusOr<codecs::InferResponse> response;
  bool final = false;       // the request is complete after this one
  bool from_model = false;  // see builtin::TimedResponse
  bool empty = false;       // a bare completion with no message (complete_after)
};

using EmitFn = std::function<void(Emission)>;

// `cancelled` may be set from any thread; nothing is emitted once it is.
void runExecution(http::EventLoop& loop, builtin::Execution execution,
                  std::shared_ptr<std::atomic<bool>> cancelled, EmitFn emit);

}  // namespace infergate::gateway
