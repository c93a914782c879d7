// The helpers both inference reactors use (grpc_infer_common.h): routing a message on its
// peeked model, the upstream deadline, an error as the client sees it, and a request's
// exchange with an HTTP upstream (binary-tensor /infer there and back).

#include "gateway/frontends/grpc_infer_common.h"

#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "codecs/binary_tensor.h"
#include "codecs/grpc_byte_buffer.h"
#include "codecs/json_request_encoder.h"
#include "codecs/protobuf_peek.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/http_upstream_infer.h"

namespace infergate::gateway::frontends::grpc_detail {

using ::grpc::ByteBuffer;

codecs::Status encodeFailure(codecs::Status status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) return status;
  return codecs::internalError("cannot encode the response: ", codecs::messageOf(status));
}

namespace {

// The route of a message held in `segments`; `whole()` gives it joined, for the one case
// the segmented peek leaves to the contiguous one.
template <typename Whole>
codecs::StatusOr<Decision> routeSegments(const Shared& shared, std::span<const std::span<const uint8_t>> segments,
                                         Whole&& whole, const CallContext& context, const Caller& caller,
                                         bool* names_regions) {
  codecs::StatusOr<codecs::OwnedModelRef> ref = codecs::peekModelInferRequest(segments);
  if (!ref.ok()) {
    // Proto2 groups are only read by the contiguous peek; this path is never hot.
    INFERGATE_ASSIGN_OR_RETURN(codecs::Buffer joined, whole());
    INFERGATE_ASSIGN_OR_RETURN(codecs::ModelRef contiguous, codecs::peekModelInferRequest(joined.span()));
    ref = codecs::OwnedModelRef{std::string(contiguous.model_name),
                                std::string(contiguous.model_version), contiguous.sequence,
                                contiguous.shared_memory};
  }
  *names_regions = ref->shared_memory;
  GrpcMetadataHeaders headers(context.clientMetadata());
  INFERGATE_ASSIGN_OR_RETURN(Decision d,
                             shared.router->decide(ref->model_name, ref->model_version, &headers, caller));
  INFERGATE_RETURN_IF_ERROR(shared.options.security->rateLimit(caller, ref->model_name));
  if (ref->sequence.present()) d.pick.sequence = std::move(ref->sequence);
  return d;
}

}  // namespace

codecs::StatusOr<Decision> routeMessage(const Shared& shared, const ByteBuffer& message,
                                        const CallContext& context,
                                        const Caller& caller, bool* names_regions) {
  std::vector<::grpc::Slice> slices;
  if (!message.Dump(&slices).ok()) return codecs::internalError("cannot read the gRPC message");
  absl::InlinedVector<std::span<const uint8_t>, 4> segments;
  for (const ::grpc::Slice& slice : slices) segments.emplace_back(slice.begin(), slice.size());
  return routeSegments(shared, std::span(segments.data(), segments.size()),
                       [&] { return codecs::fromByteBuffer(message); }, context, caller, names_regions);
}

codecs::StatusOr<Decision> routeMessage(const Shared& shared, const codecs::MovableByteBuffer& message,
                                        const CallContext& context,
                                        const Caller& caller, bool* names_regions) {
  const codecs::BufferChain* chain = message.chain();
  if (chain == nullptr) return routeMessage(shared, message.grpc(), context, caller, names_regions);
  absl::InlinedVector<std::span<const uint8_t>, 4> segments;
  for (const codecs::Buffer& segment : chain->segments()) segments.emplace_back(segment.span());
  return routeSegments(shared, std::span(segments.data(), segments.size()),
                       [&] { return codecs::fromByteBuffer(message); }, context, caller, names_regions);
}

std::optional<std::chrono::system_clock::time_point> upstreamDeadline(
    const CallContext& context, std::chrono::milliseconds timeout) {
  std::chrono::system_clock::time_point deadline = context.deadline();
  if (timeout.count() > 0) deadline = std::min(deadline, std::chrono::system_clock::now() + timeout);
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  return deadline;
}

::grpc::Status publicGrpcStatus(const codecs::Status& status, const Decision& d) {
  return grpcStatusFor(publicStatus(status, d.upstream_model, d.client_model));
}

codecs::StatusOr<upstream::HttpUpstreamRequest> httpInferRequest(
    const Shared& shared, codecs::InferRequest& request, const Decision& d,
    const upstream::Upstream& target, const CallContext& context) {
  return httpUpstreamInfer(
      request, d, target,
      metadataToHttpHeaders(shared.router->forwardedMetadata(context.clientMetadata(), false)),
      upstreamDeadline(context, d.timeout));
}

codecs::StatusOr<codecs::InferResponse> httpInferAnswer(
    const Shared& shared, const upstream::HttpUpstreamResponse& r, std::string_view upstream_name) {
  return httpUpstreamInferAnswer(shared.options.limits, r, upstream_name);
}

}  // namespace infergate::gateway::frontends::grpc_detail
