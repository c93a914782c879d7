#include "codecs/status.h"

#include "absl/types/optional.h"

#include "absl/strings/cord.h"

namespace infergate::codecs {
namespace {

constexpr std::string_view kOriginPayloadUrl = "infergate/error-origin";

}  // namespace

std::string_view originName(ErrorOrigin origin) {
  switch (origin) {
    case ErrorOrigin::kClient:
      return "client";
    case ErrorOrigin::kUpstream:
      return "upstream";
    case ErrorOrigin::kInternal:
      return "internal";
  }
  return "client";
}

Status withOrigin(Status status, ErrorOrigin origin) {
  if (status.ok()) return status;
  std::string_view name = originName(origin);
  status.SetPayload(absl::string_view(kOriginPayloadUrl.data(), kOriginPayloadUrl.size()),
                    absl::Cord(absl::string_view(name.data(), name.size())));
  return status;
}

ErrorOrigin originOf(const Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(
      absl::string_view(kOriginPayloadUrl.data(), kOriginPayloadUrl.size()));
  if (!payload) return ErrorOrigin::kClient;
  if (*payload == "upstream") return ErrorOrigin::kUpstream;
  if (*payload == "internal") return ErrorOrigin::kInternal;
  return ErrorOrigin::kClient;
}

}  // namespace infergate::codecs
