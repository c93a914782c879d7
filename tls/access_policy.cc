#include "tls/access_policy.h"

#include <algorithm>

#include "codecs/text.h"

namespace infergate::tls {
namespace {

using codecs::strCat;
using config::ApiGroup;

// Refused on public listeners unless a rule opens them (the header's "rule not given").
bool privateByDefault(const AccessRequest& r) {
  switch (r.group) {
    case ApiGroup::kSharedMemory:
    case ApiGroup::kTrace:
    case ApiGroup::kLogging:
    case ApiGroup::kAdmin:
      return true;
    case ApiGroup::kModelRepository:
      return r.write;
    default:
      return false;
  }
}

const char* listenerName(Listener l) {
  switch (l) {
    case Listener::kHttp: return "http";
    case Listener::kGrpc: return "grpc";
    case Listener::kMetrics: return "metrics";
  }
  return "?";
}

}  // namespace

codecs::Status authorizeRule(const config::AccessRule& rule, std::string_view what,
                             Listener listener, const Principal* principal) {
  using Allow = config::AccessRule::Allow;
  const bool served = listener == Listener::kMetrics || (listener == Listener::kHttp ? rule.http : rule.grpc);
  if (!served) {
    return absl::PermissionDeniedError(
        strCat(what, " is not served on the ", listenerName(listener), " listener"));
  }
  switch (rule.allow) {
    case Allow::kAnyone:
      return absl::OkStatus();
    case Allow::kNobody:
      return absl::PermissionDeniedError(strCat(what, " is denied"));
    case Allow::kAuthenticated:
      if (principal == nullptr) return absl::UnauthenticatedError(strCat("credentials are required for ", what));
      return absl::OkStatus();
    case Allow::kPrincipals: {
      const std::string_view name = principal ? std::string_view(principal->name) : "anonymous";
      if (std::find(rule.principals.begin(), rule.principals.end(), name) != rule.principals.end()) {
        return absl::OkStatus();
      }
      if (principal == nullptr) return absl::UnauthenticatedError(strCat("credentials are required for ", what));
      return absl::PermissionDeniedError(strCat("principal '", principal->name, "' may not use ", what));
    }
  }
  return absl::PermissionDeniedError(strCat(what, " is denied"));
}

codecs::Status authorizeGroup(const config::AuthConfig& auth, const AccessRequest& request,
                              const Principal* principal) {
  auto what = [&request] { return strCat("API group '", config::apiGroupName(request.group), "'"); };
  if (const std::optional<config::AccessRule>& rule = auth.rule(request.group)) {
    return authorizeRule(*rule, what(), request.listener, principal);
  }
  if (request.public_listener && privateByDefault(request)) {
    return absl::PermissionDeniedError(
        strCat(what(), request.write && request.group == ApiGroup::kModelRepository ? " (load, unload)" : "",
               " is not served on a public listener unless auth.api_groups allows it"));
  }
  return absl::OkStatus();
}

}  // namespace infergate::tls
