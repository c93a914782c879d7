#include "gateway/discovery.h"

#include "gateway/telemetry/log.h"

#include <algorithm>


namespace infergate::gateway {

std::vector<std::string> dnsNames(const config::GatewayConfig& config) {
  std::vector<std::string> names;
  for (const config::UpstreamConfig& u : config.upstreams) {
    for (const config::ListenAddress& e : u.endpoints) {
      if (e.kind == config::ListenAddress::Kind::kDns) names.push_back(e.host);
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Discovery::~Discovery() { stop(); }

void Discovery::stop() {
  if (watcher_) watcher_->stop();
  watcher_.reset();
}

void Discovery::refreshNow() {
  if (watcher_) watcher_->refreshNow();
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

void Discovery::watch(const config::GatewayConfig& config) {
  std::vector<std::string> names = dnsNames(config);
  if (watcher_ && names == names_ && config.discovery.dns_refresh_ms == settings_.dns_refresh_ms &&
      config.discovery.hosts_file == settings_.hosts_file) {
    return;
  }
  stop();
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
