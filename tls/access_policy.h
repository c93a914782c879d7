#pragma once

// Who may call what: the access rules of `auth.api_groups` and `routes[].auth` applied to
// one request's API group, listener and principal.
//
//   rule given       allow: public (anyone) | authenticated (any principal) | deny |
//                    [principal, ...], and optionally only on some listeners
//   rule not given   anyone, except on a public listener (ListenerConfig::isPublic):
//                    there shared-memory, trace and logging, model-repository's load
//                    and unload, and the admin API are refused (PERMISSION_DENIED), since
//                    a client from the network has no business changing what the gateway
//                    serves or reading other clients' regions. An operator opens them by
//                    writing a rule. (The admin API's caller counts a loopback client as
//                    not public: AccessRequest::public_listener is the caller's to set.)
//
// Answers: OK; UNAUTHENTICATED when a principal is needed and the request has none (HTTP
// 401 with WWW-Authenticate); PERMISSION_DENIED when the principal is not allowed, or
// nobody is (HTTP 403). Messages name the group or route, never a credential.
//
// Threads: pure functions.

#include <string_view>

#include "codecs/status.h"
#include "config/config.h"
#include "tls/authenticator.h"

namespace infergate::tls {

// kMetrics serves only the admin API; a rule's `listeners` says nothing about it.
enum class Listener { kHttp, kGrpc, kMetrics };

struct AccessRequest {
  config::ApiGroup group = config::ApiGroup::kInference;
  bool write = false;  // changes state: load/unload, register/unregister, settings updates
  Listener listener = Listener::kHttp;
  bool public_listener = false;
};

// Whether a request may call its API group.
codecs::Status authorizeGroup(const config::AuthConfig& auth, const AccessRequest& request,
                              const Principal* principal);

// Whether `principal` passes `rule` on `listener`; `what` names the thing refused in the
// message ("API group 'inference'", "route 'secret'").
codecs::Status authorizeRule(const config::AccessRule& rule, std::string_view what,
                             Listener listener, const Principal* principal);

}  // namespace infergate::tls
