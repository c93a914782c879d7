#pragma once

// ModelInfer and ModelStreamInfer on the raw byte path (PROTOCOL.md 11.4, 11.5), routed
// per message on the model name and version peeked from fields 1 and 2; not a public
// header.
//
//   grpc_model_infer.cc    ModelInferReactor (unary) and InferenceService::ModelInfer
//   grpc_stream_infer.cc   StreamInferReactor (bidi) and InferenceService::ModelStreamInfer
//   grpc_infer_common.cc   what both use, declared below: routing a message, the
//                          upstream deadline, errors as the client sees them, and the
//                          exchange with an HTTP upstream
//
// Rule of both reactors: the reactor's state is touched, and StartRead / StartWrite /
// Finish are called, on the call's event loop (ModelInfer also finishes on grpc's thread
// where it has everything at once). grpc's reactions and upstream completions run on
// grpc's threads and post to that loop. The reactor is deleted on the loop, once grpc is
// done with it and no upstream call can still call back into it (a reference count:
// grpc's, plus one per upstream call or stream in flight); runners of builtin models
// never emit once the cancel flag is set.
//
// Every function below may run on any thread; none blocks.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "codecs/infer.h"
#include "codecs/status.h"
#include "gateway/frontends/grpc_frontend_internal.h"
#include "gateway/router.h"
#include "gateway/upstream/http_client.h"
#include "gateway/upstream/upstream_set.h"

namespace infergate::gateway::frontends::grpc_detail {

// A reactor's cancel flag, shared with the runners of builtin models it starts.
using Flag = std::shared_ptr<std::atomic<bool>>;

// An encoder failure on a response the gateway built itself is the gateway's fault
// (INTERNAL), except a response past the 2 GiB message limit (RESOURCE_EXHAUSTED).
codecs::Status encodeFailure(codecs::Status status);

// A call's route: the model and version peeked from the message's slices (fields 1 and
// 2; nothing joined, nothing else decoded) and the client's metadata. `*names_regions`:
// whether some input or output names a shared-memory region (the same peek), in which case
// the message must never be passed through: the gateway resolves the regions itself.
// `caller` is checked against the route's rule and takes a token of the rate limits.
codecs::StatusOr<Decision> routeMessage(const Shared& shared, const ::grpc::ByteBuffer& message,
                                        const CallContext& context,
                                        const Caller& caller, bool* names_regions);
// The same for a message held either way (a chain's Buffers are peeked as they are).
codecs::StatusOr<Decision> routeMessage(const Shared& shared, const codecs::MovableByteBuffer& message,
                                        const CallContext& context,
                                        const Caller& caller, bool* names_regions);

// The deadline toward the upstream: the client's, shortened by the route's timeout;
// nullopt when neither sets one.
std::optional<std::chrono::system_clock::time_point> upstreamDeadline(
    const CallContext& context, std::chrono::milliseconds timeout);

// An upstream's error under the client's model name (a rewrite must stay invisible).
::grpc::Status publicGrpcStatus(const codecs::Status& status, const Decision& d);

// A ModelInfer (or stream) request toward an HTTP upstream (gateway/http_upstream_infer.h)
// with the client's forwarded metadata and deadline (`target`: the upstream sent to, the
// route's or its mirror).
codecs::StatusOr<upstream::HttpUpstreamRequest> httpInferRequest(
    const Shared& shared, codecs::InferRequest& request, const Decision& d,
    const upstream::Upstream& target, const CallContext& context);

// An HTTP upstream's /infer answer as an InferResponse; its error answers as the status
// the upstream meant (their own message, the code from the HTTP status).
codecs::StatusOr<codecs::InferResponse> httpInferAnswer(
    const Shared& shared, const upstream::HttpUpstreamResponse& r, std::string_view upstream_name);

}  // namespace infergate::gateway::frontends::grpc_detail
