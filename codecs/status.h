#pragma once

// Errors are values: absl::Status / absl::StatusOr<T> everywhere (abseil comes with grpc).
// Canonical codes map one to one onto gRPC codes; gateway/error_mapping maps them to HTTP.
//
// An error also records where it came from (Pingora's ErrorSource): a decoder cannot know
// whether the bytes it rejected came from a client (400) or an upstream (502), so the
// caller stamps the origin at the boundary with withOrigin().

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <charconv>
#include <concepts>
#include <string>

namespace infergate::codecs {

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

enum class ErrorOrigin {
  kClient,    // the request was wrong: 4xx, never retried
  kUpstream,  // an upstream answered wrongly or not at all: 5xx, maybe retried
  kInternal,  // a bug in the gateway: 500
};

// Returns `status` marked with `origin` (a payload on the status). OK stays OK.
Status withOrigin(Status status, ErrorOrigin origin);

// The origin stamped by withOrigin(), or kClient for an unstamped error (decoders run on
// client input far more often than on upstream input, and unstamped means "not re-thrown").
ErrorOrigin originOf(const Status& status);

std::string_view originName(ErrorOrigin origin);

// Debian's abseil is built with its own absl::string_view (not std::string_view), so
// absl::StrCat does not take std::string_view: messages are built with this instead.
namespace detail {
inline void appendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void appendPiece(std::string& out, const char* s) { out.append(s); }
inline void appendPiece(std::string& out, char c) { out.push_back(c); }
template <std::integral T>
  requires(!std::same_as<T, char> && !std::same_as<T, bool>)
void appendPiece(std::string& out, T v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}
inline void appendPiece(std::string& out, bool v) { out.append(v ? "true" : "false"); }
inline void appendPiece(std::string& out, double v) {
  char buf[32];
  out.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}
}  // namespace detail

template <typename... Args>
std::string strCat(const Args&... args) {
  std::string out;
  (detail::appendPiece(out, args), ...);
  return out;
}

// The message of `status` as a std::string_view (absl::string_view is a distinct type
// in Debian's build).
inline std::string_view messageOf(const Status& status) {
  return std::string_view(status.message().data(), status.message().size());
}

// Shorthands used by every codec, so messages read the same everywhere.
template <typename... Args>
Status invalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(strCat(args...));
}
template <typename... Args>
Status resourceExhausted(const Args&... args) {
  return absl::ResourceExhaustedError(strCat(args...));
}
template <typename... Args>
Status unimplemented(const Args&... args) {
  return absl::UnimplementedError(strCat(args...));
}
template <typename... Args>
Status internalError(const Args&... args) {
  return absl::InternalError(strCat(args...));
}

}  // namespace infergate::codecs

#define INFERGATE_STATUS_CONCAT_INNER(a, b) a##b
#define INFERGATE_STATUS_CONCAT(a, b) INFERGATE_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define INFERGATE_RETURN_IF_ERROR(expr)                  \
  do {                                                   \
    ::absl::Status infergate_status_ = (expr);           \
    if (!infergate_status_.ok()) return infergate_status_; \
  } while (0)

// `lhs = value of expr` or return its error. `lhs` may declare a variable.
#define INFERGATE_ASSIGN_OR_RETURN(lhs, expr) \
  INFERGATE_ASSIGN_OR_RETURN_IMPL(INFERGATE_STATUS_CONCAT(infergate_or_, __LINE__), lhs, expr)
#define INFERGATE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return std::move(tmp).status();        \
  lhs = std::move(tmp).value()
