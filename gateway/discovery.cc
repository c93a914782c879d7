#include "gateway/discovery.h"

#include <algorithm>

#include "codecs/text.h"
#include "gateway/telemetry/log.h"
#include "gateway/upstream/http_client_common.h"

namespace infergate::gateway {
namespace {

std::vector<std::string> sortedOnce(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

std::vector<std::string> dnsNames(const config::GatewayConfig& config) {
  std::vector<std::string> names;
  for (const config::UpstreamConfig& u : config.upstreams) {
    for (const config::ListenAddress& e : u.endpoints) {
      if (e.kind == config::ListenAddress::Kind::kDns) names.push_back(e.host);
    }
  }
  return sortedOnce(std::move(names));
}

std::vector<std::string> hostNames(const config::GatewayConfig& config) {
  std::vector<std::string> names;
  for (const config::UpstreamConfig& u : config.upstreams) {
    for (const config::ListenAddress& e : u.endpoints) {
      if (e.kind != config::ListenAddress::Kind::kTcp || upstream::http_client_detail::isLiteralEndpoint(e)) continue;
      std::string name = e.host;
      std::transform(name.begin(), name.end(), name.begin(), codecs::asciiLower);
      names.push_back(std::move(name));
    }
  }
  return sortedOnce(std::move(names));
}

Discovery::~Discovery() { stop(); }

void Discovery::stop() {
  if (watcher_) watcher_->stop();
  watcher_.reset();
  if (router_ && router_->hosts()) router_->hosts()->setRefresher(nullptr);
  if (host_watcher_) host_watcher_->stop();
  host_watcher_.reset();
}

void Discovery::refreshNow() {
  if (watcher_) watcher_->refreshNow();
  if (host_watcher_) host_watcher_->refreshNow();
}

void Discovery::apply(const RouterSnapshot& snapshot, const std::string& name,
                      const std::vector<std::string>& addresses) {
  for (const auto& u : *snapshot.upstreams) {
    if (!u->fleet()) continue;
    for (const config::ListenAddress& e : u->config().endpoints) {
      if (e.kind == config::ListenAddress::Kind::kDns && e.host == name) {
        u->fleet()->setResolved(e, addresses);
      }
    }
  }
}

void Discovery::prepare(const RouterSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, addresses] : known_) apply(snapshot, name, addresses);
}

void Discovery::watchHosts(const config::GatewayConfig& config) {
  const std::shared_ptr<upstream::HostAddresses> hosts = router_ ? router_->hosts() : nullptr;
  if (hosts == nullptr) return;
  // The names of the configuration now served stay watched too: watch() runs before a
  // reload's new table is built, which may still be refused. A name a reload dropped is
  // watched until the next one.
  std::vector<std::string> names = hostNames(config);
  if (std::shared_ptr<const RouterSnapshot> current = router_->snapshot(); current != nullptr) {
    std::vector<std::string> served = hostNames(*current->config);
    names.insert(names.end(), served.begin(), served.end());
    names = sortedOnce(std::move(names));
  }
  const uint64_t refresh_ms = std::max<uint64_t>(config.discovery.dns_refresh_ms, 1);
  if (host_watcher_ && names == host_names_ && refresh_ms == host_refresh_ms_) return;
  hosts->setRefresher(nullptr);
  if (host_watcher_) host_watcher_->stop();
  host_watcher_.reset();
  hosts->retain(names);
  host_names_ = names;
  host_refresh_ms_ = refresh_ms;
  if (names.empty()) return;
  // `hosts` is the router's, which outlives this (the router holds it as long as it lives,
  // and the watcher stops before the discovery is gone).
  auto on_change = [hosts](const std::string& name, const std::vector<std::string>& addresses) {
    hosts->resolved(name, addresses);
  };
  auto on_error = [hosts](const std::string& name, const codecs::Status& error) {
    hosts->failed(name, error);
    telemetry::logEvent(telemetry::Level::kWarning, "dns_error",
                        {{"name", name}, {"error", codecs::messageOf(error)}});
  };
  host_watcher_ = std::make_unique<upstream::DnsWatcher>(names, std::chrono::milliseconds(refresh_ms),
                                                         std::string(), on_change, on_error);
  host_watcher_->start();
  hosts->setRefresher([watcher = host_watcher_.get()] { watcher->refreshNow(); });
}

void Discovery::watch(const config::GatewayConfig& config) {
  watchHosts(config);
  std::vector<std::string> names = dnsNames(config);
  if (watcher_ && names == names_ && config.discovery.dns_refresh_ms == settings_.dns_refresh_ms &&
      config.discovery.hosts_file == settings_.hosts_file) {
    return;
  }
  if (watcher_) watcher_->stop();
  watcher_.reset();
  names_ = names;
  settings_ = config.discovery;
  if (names.empty()) return;
  auto on_change = [this](const std::string& name, const std::vector<std::string>& addresses) {
    std::shared_ptr<const RouterSnapshot> current = router_ ? router_->snapshot() : nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    known_[name] = addresses;
    if (current) apply(*current, name, addresses);
  };
  auto on_error = [](const std::string& name, const codecs::Status& error) {
    telemetry::logEvent(telemetry::Level::kWarning, "dns_error",
                        {{"name", name}, {"error", codecs::messageOf(error)}});
  };
  watcher_ = std::make_unique<upstream::DnsWatcher>(
      names, std::chrono::milliseconds(std::max<uint64_t>(config.discovery.dns_refresh_ms, 1)),
      config.discovery.hosts_file, on_change, on_error);
  watcher_->start();
}

}  // namespace infergate::gateway
