#pragma once

// A decoded inference request sent to a remote upstream, for every path that cannot pass
// the client's bytes through (the protocols differ, the request names client regions, or
// the upstream takes tensors through the shared-memory handoff):
//
//   the request for each attempt's endpoint (HandoffRequest::forEndpoint: references for a
//   colocated endpoint, inline bytes for the others), encoded in the upstream's protocol
//   (protobuf raw contents, or the binary-tensor extension) -> the fleet (placement,
//   retries) -> the answer decoded -> HandoffRequest::finish (outputs out of pool slots,
//   into client regions) -> done.
//
// When the upstream refuses a reference (it lost a registration, or an output outgrew its
// learned slot), the request goes once more with everything inline (retryInline).
//
// Threads: toward gRPC, `done` runs on a grpc thread and cancel() may be called from any
// thread; with `options.loop`, the call goes through that loop's own gRPC client
// (grpc_client_native.h) where the endpoint allows, and `done` then runs on the loop.
// Toward HTTP, everything (start, done, cancel) runs on `options.loop`.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "codecs/infer.h"
#include "codecs/limits.h"
#include "codecs/status.h"
#include "gateway/handoff_request.h"
#include "gateway/http/event_loop.h"
#include "gateway/router.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway {

// Toward HTTP: what the client's side may set to send an upstream's large answer on as it
// arrives (DecodedForwardOptions::http_relay; the gRPC frontend's is grpc_answer_relay.h).
// It is the call's HttpUpstreamCallbacks::relay, so an answer whose head went to it leaves
// on_complete an empty body. Whatever it did, the call still ends through `done`:
//   sentOn()   the answer went on to the client ahead of its end: `done` gets an empty
//              response when the call ends well, or its error (the client's side then cuts
//              what it began)
//   body()     it sent nothing: the body its pieces made (rebuilt without a copy), decoded
//              and delivered as any answer
// One attempt only: it is set only where no second attempt can follow an answer
// (no shared memory, so no retryInline). The pointer may own nothing (the gRPC frontend's
// relay lives in its call, which outlives the HTTP call): it is only called before `done`,
// or before cancel() returns.
class DecodedAnswerRelay : public upstream::AnswerRelay {
 public:
  virtual bool sentOn() const = 0;
  // Nothing when no head came here.
  virtual std::optional<codecs::Buffer> body() const = 0;
};

struct DecodedForwardOptions {
  HeaderPairs metadata;  // toward gRPC: metadata; toward HTTP: headers (lowercase names)
  std::optional<std::chrono::system_clock::time_point> deadline;
  codecs::DecodeLimits limits;   // for the answer
  http::EventLoop* loop = nullptr;  // HTTP upstreams: the loop the call runs on
  // The client's body while it still arrives (the request's tensors reference it): toward
  // gRPC sent as it comes (GrpcCallOptions::arrival); toward HTTP the call waits for it.
  // Needs `loop`, the body's loop.
  std::shared_ptr<http::BodyArrival> arrival;
  // Toward gRPC: told of a large answer as it arrives (GrpcCallOptions::answer_progress).
  std::shared_ptr<upstream::AnswerProgress> answer_progress;
  // Toward HTTP: may send a large answer on as it arrives (DecodedAnswerRelay above).
  std::shared_ptr<DecodedAnswerRelay> http_relay;
};

using DecodedDone = std::function<void(codecs::StatusOr<codecs::InferResponse> response)>;

class DecodedCall {
 public:
  virtual ~DecodedCall() = default;
  virtual void cancel() = 0;  // `done` still runs (gRPC, CANCELLED) or not at all (HTTP)
  // cancel(), because the answer, still arriving, was found unreadable (a relay's cut):
  // toward gRPC the attempt counts as a failure of its endpoint
  // (GrpcCallHandle::refuseAnswer); toward HTTP, where no relay cuts on garbage, it is a
  // plain cancel().
  virtual void refuseAnswer() = 0;
};

std::shared_ptr<DecodedCall> forwardDecoded(const Decision& d,
                                            std::shared_ptr<HandoffRequest> request,
                                            DecodedForwardOptions options, DecodedDone done);

}  // namespace infergate::gateway
