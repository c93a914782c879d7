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
// And for endpoints written as a host name ("triton:8001"), when the router has a
// HostAddresses (Router::hosts()): a second DnsWatcher over those names, on the same
// refresh, through the system resolver (as grpc++ and libcurl, which carry the calls the
// worker's own clients do not, resolve them; discovery.hosts_file is for dns: names). Each
// name stays one endpoint; what it resolves to goes to the HostAddresses, where the
// worker's own clients read it when they open a connection.
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

  // (Re)starts the host-name watcher (see the top).
  void watchHosts(const config::GatewayConfig& config);

  std::shared_ptr<Router> router_;
  std::unique_ptr<upstream::DnsWatcher> watcher_;
  std::vector<std::string> names_;
  std::unique_ptr<upstream::DnsWatcher> host_watcher_;
  std::vector<std::string> host_names_;
  uint64_t host_refresh_ms_ = 0;
  config::DiscoveryConfig settings_;

  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> known_;  // name -> addresses
};

// The names of every "dns:" endpoint in `config`, sorted, once each.
std::vector<std::string> dnsNames(const config::GatewayConfig& config);
// The host names of every endpoint written "NAME:PORT" (not an IP literal) in `config`,
// lowercase, sorted, once each.
std::vector<std::string> hostNames(const config::GatewayConfig& config);

}  // namespace infergate::gateway
