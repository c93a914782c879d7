#include "gateway/error_mapping.h"

#include "absl/strings/cord.h"
#include "absl/types/optional.h"

namespace infergate::gateway {
namespace {

constexpr char kRateLimitUrl[] = "infergate/rate-limit";

bool upstreamGarbage(const codecs::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument &&
         codecs::originOf(status) == codecs::ErrorOrigin::kUpstream;
}

}  // namespace

int httpStatusFor(const codecs::Status& status) {
  if (upstreamGarbage(status)) return 502;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return isRateLimit(status) ? 429 : 413;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

grpc::Status grpcStatusFor(const codecs::Status& status) {
  std::string message(codecs::messageOf(status));
  if (status.ok()) return grpc::Status::OK;
  if (upstreamGarbage(status)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, message);
  // absl and grpc share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())), message);
}

absl::StatusCode codeForHttpStatus(int status) {
  switch (status) {
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 409: return absl::StatusCode::kAlreadyExists;
    case 413:
    case 429: return absl::StatusCode::kResourceExhausted;
    case 501: return absl::StatusCode::kUnimplemented;
    case 503: return absl::StatusCode::kUnavailable;
    case 504: return absl::StatusCode::kDeadlineExceeded;
    default: return status >= 500 && status < 600 ? absl::StatusCode::kInternal
                                                  : absl::StatusCode::kUnknown;
  }
}

codecs::Status asRateLimit(codecs::Status status) {
  status.SetPayload(kRateLimitUrl, absl::Cord("1"));
  return status;
}

bool isRateLimit(const codecs::Status& status) {
  return status.GetPayload(kRateLimitUrl).has_value();
}

}  // namespace infergate::gateway
