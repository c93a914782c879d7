#pragma once

// The security stage of the pipeline, run by each frontend before it does anything for a
// request (DESIGN.md "The pipeline"; SECURITY.md):
//
//   admit(headers, access)     who is calling (tls::Authenticator) and whether they may
//                              call the API group (tls::authorizeGroup): the principal,
//                              nobody (anonymous), or UNAUTHENTICATED / PERMISSION_DENIED
//   route rules                Router::decide checks routes[].auth with the Caller
//   rateLimit(caller, model)   the rate_limits buckets, for inference requests
//
// reload() takes a new configuration's `auth` and `rate_limits` (an auth file that does
// not load refuses the reload, and the current settings stay); watchFiles() re-reads key
// and JWKS files that changed (control thread).
//
// Threads: admit() and rateLimit() from any thread; reload() and watchFiles() from the
// control thread.

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "codecs/published.h"
#include "codecs/status.h"
#include "config/config.h"
#include "gateway/rate_limiter.h"
#include "tls/access_policy.h"
#include "tls/authenticator.h"

namespace infergate::gateway {

// Who a request is from and where it came in: what route rules and rate limits look at.
struct Caller {
  const tls::Principal* principal = nullptr;  // null: anonymous
  tls::Listener listener = tls::Listener::kHttp;
  std::string_view name() const { return principal ? std::string_view(principal->name) : "anonymous"; }
};

class Security {
 public:
  static codecs::StatusOr<std::shared_ptr<Security>> create(const config::GatewayConfig& config);
  // No credentials, no rules, no limits, private listeners: what the frontends' own tests
  // and an embedding without a config get.
  static std::shared_ptr<Security> open();

  // The credentials are read from the request's headers (gRPC: metadata): `header(name)`
  // gives a value ("" = absent), asked only when credentials are configured (without,
  // nothing presented is looked at); `peer`: the verified client certificate, if any.
  using HeaderLookup = absl::FunctionRef<std::string_view(std::string_view name)>;
  // `loopback`: the client is on this host's loopback, and the listener does not count as
  // public for it (the admin API's default, through admitAdmin()).
  codecs::StatusOr<std::optional<tls::Principal>> admit(HeaderLookup header, const tls::PeerIdentity* peer,
                                                        config::ApiGroup group, bool write,
                                                        tls::Listener listener, bool loopback = false) const;
  // The same for the admin API (the metrics listener): a client on loopback (`loopback`:
  // its address is 127.0.0.0/8, ::1 or a unix socket) is not held to a public listener's
  // defaults, so that an operator on the host (or through a port-forward) reaches it.
  codecs::StatusOr<std::optional<tls::Principal>> admitAdmin(HeaderLookup header, const tls::PeerIdentity* peer,
                                                             bool write, bool loopback) const {
    return admit(header, peer, config::ApiGroup::kAdmin, write, tls::Listener::kMetrics, loopback);
  }
  codecs::Status rateLimit(const Caller& caller, std::string_view model) const;

  // A reload in two steps, so that nothing changes unless the whole reload succeeds:
  // prepare() reads the new files (INVALID_ARGUMENT naming the one that fails), install()
  // makes the result current.
  struct Prepared;
  codecs::StatusOr<std::shared_ptr<const Prepared>> prepare(const config::GatewayConfig& config) const;
  void install(const Prepared& prepared);
  // Re-reads changed key / JWKS files every auth.watch_interval_ms; `*changed` tells
  // whether a rebuild was tried (its error, if any, is returned; the old one stays).
  codecs::Status watchFiles(bool* changed);

 private:
  struct Settings {
    std::shared_ptr<RateLimiter> limiter;  // null: no rate_limits
    bool http_public = false, grpc_public = false, metrics_public = false;
  };

 public:
  struct Prepared {
    std::shared_ptr<const tls::Authenticator> authenticator;
    std::shared_ptr<const Settings> settings;
  };

 private:
  Security() = default;
  std::shared_ptr<const tls::Authenticator> authenticator() const { return auth_->current(); }
  static std::shared_ptr<const Settings> settingsOf(const config::GatewayConfig& config);

  std::shared_ptr<tls::AuthenticatorSource> auth_;
  codecs::Published<Settings> settings_;  // never null once created
  std::chrono::steady_clock::time_point last_watch_{};
};

}  // namespace infergate::gateway
