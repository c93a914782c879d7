#pragma once

// Endpoint discovery for "dns:NAME:PORT" entries: one DnsWatcher over every name the
// configuration lists, the last addresses of each name, and their delivery to the fleets.
//
//   watch(config)       (re)starts the watcher when the names, refresh or hosts file
//                       changed, resolving each name once before it returns
//   prepare(snapshot)   gives a snapshot's fleets the addresses known now: a reload's
//                       new snapshot, before it is swapped in, so that it never serves
//                       with empty dns: entries
//   later changes       go to the router's current snapshot as they are found
//
// Failures are logged once per streak (stderr, one JSON line) and keep the last addresses.
//
// Threads: watch() and prepare() from the control thread; reports arrive on the watcher's
// thread.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "gateway/router.h"
#include "gateway/upstream/dns_discovery.h"

namespace infergate::gateway {

class Discovery {
 public:
  explicit Discovery(std::shared_ptr<Router> router) : router_(std::move(router)) {}
  ~Discovery();

  void watch(const config::GatewayConfig& config);
  void prepare(const RouterSnapshot& snapshot);
  void stop();

  // Asks for a re-resolution now (tests, and admin).
  void refreshNow();

 private:
  void apply(const RouterSnapshot& snapshot, const std::string& name,
             const std::vector<std::string>& addresses);

  std::shared_ptr<Router> router_;
  std::unique_ptr<upstream::DnsWatcher> watcher_;
  std::vector<std::string> names_;
  config::DiscoveryConfig settings_;

  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> known_;  // name -> addresses
};

// The names of every "dns:" endpoint in `config`, sorted, once each.
std::vector<std::string> dnsNames(const config::GatewayConfig& config);

}  // namespace infergate::gateway
