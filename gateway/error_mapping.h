#pragma once

// The one table that decides every status the gateway sends (DESIGN.md "Errors"):
// canonical code (+ where the error came from) -> HTTP status and gRPC status.
//
//   code                 HTTP  gRPC               note
//   INVALID_ARGUMENT     400   INVALID_ARGUMENT   502 / UNAVAILABLE when an upstream sent it garbage
//   NOT_FOUND            404   NOT_FOUND
//   ALREADY_EXISTS       400   ALREADY_EXISTS     (Triton's mapping)
//   CANCELLED, UNKNOWN   400   same               (Triton's mapping)
//   FAILED_PRECONDITION, OUT_OF_RANGE 400 same
//   UNAUTHENTICATED      401   UNAUTHENTICATED
//   PERMISSION_DENIED    403   PERMISSION_DENIED
//   RESOURCE_EXHAUSTED   413   RESOURCE_EXHAUSTED (429 for rate limits: see isRateLimit)
//   UNIMPLEMENTED        501   UNIMPLEMENTED
//   UNAVAILABLE          503   UNAVAILABLE
//   DEADLINE_EXCEEDED    504   DEADLINE_EXCEEDED
//   INTERNAL, DATA_LOSS, ABORTED 500 same

#include <grpcpp/support/status.h>

#include "codecs/status.h"

namespace infergate::gateway {

int httpStatusFor(const codecs::Status& status);
grpc::Status grpcStatusFor(const codecs::Status& status);

// The canonical code of an upstream's HTTP error status (the reverse of httpStatusFor, for
// a gRPC client whose request an HTTP upstream refused): 400 INVALID_ARGUMENT, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ALREADY_EXISTS, 413 / 429
// RESOURCE_EXHAUSTED, 501 UNIMPLEMENTED, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED, other 5xx
// INTERNAL, anything else UNKNOWN.
absl::StatusCode codeForHttpStatus(int status);

// Marks a RESOURCE_EXHAUSTED error as a rate limit (HTTP 429 with Retry-After).
codecs::Status asRateLimit(codecs::Status status);
bool isRateLimit(const codecs::Status& status);

}  // namespace infergate::gateway
