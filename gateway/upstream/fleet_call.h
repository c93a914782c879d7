#pragma once

// One request toward an upstream through its fleet (fleet.h): a slot on an endpoint, the
// call on that endpoint's client, the outcome fed back to passive health, and retries.
//
// Retries (config `retry`): an attempt that never reached the upstream (connect refused or
// failed; gRPC "failed to connect to all addresses") is sent again to another endpoint
// (without waiting for a slot), up to max_retries times, while the deadline has not passed
// and the upstream's retry budget allows it. Never for a sequence request, never once an
// HTTP answer began, never after the client cancelled.
//
//   fleetUnary(fleet, method, request, options, context, done)
//       gRPC: done(status, answer) exactly once, on a grpc thread or the thread that freed
//       a slot or the housekeeper's; status is the gateway's (toUpstreamStatus naming the
//       upstream and endpoint, or the fleet's own refusal), OK with the answer otherwise.
//       cancel() from any thread; done still runs, with CANCELLED (at once when the call
//       was still waiting for a slot: it leaves the queue). options.answer_ok, when set,
//       is asked of an answer that ended OK on that same thread just before done (once;
//       its verdict is passive health's).
//   fleetHttp(fleet, client, loop, request, context, callbacks)
//       HTTP on `loop` (whose client `client` is): callbacks as HttpUpstreamClient::send,
//       all on the loop thread; after cancel() (loop thread) none runs. `answer_ok`, when
//       set, is asked of a 200 answer just before on_complete (once per attempt that ends
//       so; its verdict is passive health's).

#include <memory>
#include <string>

#include "codecs/grpc_byte_buffer.h"
#include "gateway/http/event_loop.h"
#include "gateway/upstream/fleet.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway::upstream {

using FleetUnaryDone = std::function<void(codecs::Status status, codecs::MovableByteBuffer answer)>;

std::shared_ptr<GrpcCallHandle> fleetUnary(const std::shared_ptr<UpstreamFleet>& fleet,
                                           std::string_view method, codecs::MovableByteBuffer request,
                                           GrpcCallOptions options, PickContext context,
                                           FleetUnaryDone done);

// Asked of an attempt's 200 answer before passive health hears of it, on the loop thread;
// on_complete follows at once. False (an answer the caller cannot read: garbage behind a
// 200) counts the attempt a failure of its endpoint, as a broken answer would; the answer
// is delivered either way, and the caller says what is wrong with it. Kept by the fleet
// call alone (the upstream client never sees it).
using HttpAnswerCheck = std::function<bool(const HttpUpstreamResponse& response)>;

std::shared_ptr<HttpCallHandle> fleetHttp(const std::shared_ptr<UpstreamFleet>& fleet,
                                          std::shared_ptr<HttpUpstreamClient> client,
                                          http::EventLoop& loop,
                                          HttpUpstreamRequest request, PickContext context,
                                          HttpUpstreamCallbacks callbacks, HttpAnswerCheck answer_ok = nullptr);

// The same, for a request whose bytes depend on the endpoint it goes to (the shared-memory
// handoff: references for a colocated endpoint, the tensors inline for the others):
// `build` makes the request of each attempt, once its endpoint is chosen, on the thread
// that starts the attempt. An error from it ends the call with that error.
using GrpcRequestFor = std::function<codecs::StatusOr<codecs::MovableByteBuffer>(Endpoint& endpoint)>;
std::shared_ptr<GrpcCallHandle> fleetUnaryFor(const std::shared_ptr<UpstreamFleet>& fleet,
                                              std::string_view method, GrpcRequestFor build,
                                              GrpcCallOptions options, PickContext context,
                                              FleetUnaryDone done);
using HttpRequestFor = std::function<codecs::StatusOr<HttpUpstreamRequest>(Endpoint& endpoint)>;
std::shared_ptr<HttpCallHandle> fleetHttpFor(const std::shared_ptr<UpstreamFleet>& fleet,
                                             std::shared_ptr<HttpUpstreamClient> client,
                                             http::EventLoop& loop, HttpRequestFor build,
                                             PickContext context, HttpUpstreamCallbacks callbacks,
                                             HttpAnswerCheck answer_ok = nullptr);

// Whether a failed gRPC call never reached the upstream (see above).
bool grpcNotSent(const grpc::Status& status);

}  // namespace infergate::gateway::upstream
