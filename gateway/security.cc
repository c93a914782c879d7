#include "gateway/security.h"

#include <ctime>

namespace infergate::gateway {

std::shared_ptr<const Security::Settings> Security::settingsOf(const config::GatewayConfig& config) {
  auto s = std::make_shared<Settings>();
  if (!config.rate_limits.empty()) s->limiter = std::make_shared<RateLimiter>(config.rate_limits);
  s->http_public = config.http && config.http->isPublic();
  s->grpc_public = config.grpc && config.grpc->isPublic();
  s->metrics_public = config.metrics && config.metrics->isPublic();
  return s;
}

codecs::StatusOr<std::shared_ptr<Security>> Security::create(const config::GatewayConfig& config) {
  std::shared_ptr<Security> self(new Security());
  INFERGATE_ASSIGN_OR_RETURN(self->auth_, tls::AuthenticatorSource::create(config.auth));
  self->settings_.store(settingsOf(config));
  return self;
}

std::shared_ptr<Security> Security::open() {
  // An empty auth section reads no file and cannot fail.
  return *create(config::GatewayConfig{});
}

codecs::StatusOr<std::optional<tls::Principal>> Security::admit(HeaderLookup header, const tls::PeerIdentity* peer,
                                                                config::ApiGroup group, bool write,
                                                                tls::Listener listener, bool loopback) const {
  // Both as this thread holds them: no reference count touched per request.
  const tls::Authenticator* auth = &auth_->view();
  const Settings* settings = settings_.get();
  std::optional<tls::Principal> principal;
  if (auth->configured()) {
    tls::PresentedCredentials presented;
    presented.authorization = header("authorization");
    if (const std::string& key = auth->config().api_key_header; !key.empty()) presented.api_key = header(key);
    presented.peer = peer;
    INFERGATE_ASSIGN_OR_RETURN(principal, auth->authenticate(presented, static_cast<int64_t>(std::time(nullptr))));
  }
  bool is_public = false;
  switch (listener) {
    case tls::Listener::kHttp: is_public = settings->http_public; break;
    case tls::Listener::kGrpc: is_public = settings->grpc_public; break;
    case tls::Listener::kMetrics: is_public = settings->metrics_public; break;
  }
  if (loopback) is_public = false;
  INFERGATE_RETURN_IF_ERROR(tls::authorizeGroup(auth->config(),
                                                tls::AccessRequest{group, write, listener, is_public},
                                                principal ? &*principal : nullptr));
  return principal;
}

codecs::Status Security::rateLimit(const Caller& caller, std::string_view model) const {
  const Settings* settings = settings_.get();
  if (!settings->limiter) return absl::OkStatus();
  return settings->limiter->take(caller.name(), model, RateLimiter::Clock::now());
}

codecs::StatusOr<std::shared_ptr<const Security::Prepared>> Security::prepare(
    const config::GatewayConfig& config) const {
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const tls::Authenticator> authenticator,
                             tls::Authenticator::create(config.auth));
  return std::make_shared<const Prepared>(Prepared{std::move(authenticator), settingsOf(config)});
}

void Security::install(const Prepared& prepared) {
  auth_->install(prepared.authenticator);
  settings_.store(prepared.settings);
}

codecs::Status Security::watchFiles(bool* changed) {
  *changed = false;
  const auto now = std::chrono::steady_clock::now();
  const auto every = std::chrono::milliseconds(authenticator()->config().watch_interval_ms);
  if (now - last_watch_ < every) return absl::OkStatus();
  last_watch_ = now;
  return auth_->reloadIfChanged(changed);
}

}  // namespace infergate::gateway
