#pragma once

// Marks the gateway puts on an upstream error, as payloads on the status, so that every
// layer above can read them without parsing messages:
//
//   markNotSent / wasNotSent       the request never reached the upstream (connect refused
//                                  or failed, name not resolved): safe to send elsewhere
//   withRetryAfter / retryAfterOf  an overload refusal: the client may retry after N s
//                                  (HTTP Retry-After)
//
// Header-only: the HTTP and gRPC clients stamp them, the fleet and the frontends read them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "codecs/status.h"

namespace infergate::gateway::upstream {

inline constexpr std::string_view kNotSentPayload = "infergate/not-sent";
inline constexpr std::string_view kRetryAfterPayload = "infergate/retry-after";

inline codecs::Status markNotSent(codecs::Status status) {
  if (!status.ok()) {
    status.SetPayload(absl::string_view(kNotSentPayload.data(), kNotSentPayload.size()),
                      absl::Cord("1"));
  }
  return status;
}

inline bool wasNotSent(const codecs::Status& status) {
  return status
      .GetPayload(absl::string_view(kNotSentPayload.data(), kNotSentPayload.size()))
      .has_value();
}

inline codecs::Status withRetryAfter(codecs::Status status, uint32_t seconds) {
  if (!status.ok()) {
    std::string text = codecs::strCat(seconds);
    status.SetPayload(absl::string_view(kRetryAfterPayload.data(), kRetryAfterPayload.size()),
                      absl::Cord(absl::string_view(text.data(), text.size())));
  }
  return status;
}

inline std::optional<uint32_t> retryAfterOf(const codecs::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(
      absl::string_view(kRetryAfterPayload.data(), kRetryAfterPayload.size()));
  if (!payload) return std::nullopt;
  uint64_t seconds = 0;
  for (char c : std::string(*payload)) {
    if (c < '0' || c > '9' || seconds > UINT32_MAX / 10) return std::nullopt;
    seconds = seconds * 10 + static_cast<uint64_t>(c - '0');
  }
  return static_cast<uint32_t>(std::min<uint64_t>(seconds, UINT32_MAX));
}

}  // namespace infergate::gateway::upstream
