#pragma once

// What the fleet layer's tests share (fleet_test.cc and endpoint_test.cc, both in the
// target upstream_fleet_test): the clock and the bound of a wait, the loopback addresses
// the fleets are made of (nothing is ever sent to 127.0.0.1:1..3), and outlier settings.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/config.h"
#include "config/listen_address.h"

namespace infergate::gateway::upstream::testing {

using Clock = std::chrono::steady_clock;

// A bound for the slowest machine, never a synchronisation.
inline constexpr std::chrono::seconds kWait{30};

// The keys of tcp(1), tcp(2), tcp(3).
inline const std::string kA = "127.0.0.1:1", kB = "127.0.0.1:2", kC = "127.0.0.1:3";

inline config::ListenAddress tcp(const std::string& host, int port) {
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kTcp;
  a.host = host;
  a.port = static_cast<uint16_t>(port);
  a.text = host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                               : host + ":" + std::to_string(port);
  return a;
}

inline config::ListenAddress tcp(int port) { return tcp("127.0.0.1", port); }

inline config::OutlierConfig outlier(uint32_t failures, uint64_t base_ms, uint64_t max_ms) {
  config::OutlierConfig o;
  o.consecutive_failures = failures;
  o.base_ejection_ms = base_ms;
  o.max_ejection_ms = max_ms;
  return o;
}

// An HTTP upstream over 127.0.0.1:1..3 (nothing is ever sent to them).
inline config::UpstreamConfig threeEndpoints(config::LoadBalancingConfig::Policy policy = config::LoadBalancingConfig::Policy::kRoundRobin) {
  config::UpstreamConfig c;
  c.name = "up";
  c.protocol = config::UpstreamConfig::Protocol::kHttp;
  c.endpoints = {tcp(1), tcp(2), tcp(3)};
  c.load_balancing.policy = policy;
  return c;
}

// "" when `haystack` holds `needle`; else what to print (EXPECT_EQ(contains(...), "")).
inline std::string contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos
             ? ""
             : "\"" + std::string(haystack) + "\" lacks \"" + std::string(needle) + "\"";
}

}  // namespace infergate::gateway::upstream::testing
