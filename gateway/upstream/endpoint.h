#pragma once

// One address of an upstream, with what the fleet layer knows of it: requests in flight,
// the queue signal, and its health as two independent verdicts.
//
//   active   the health checker's probes (gateway/health_checker.h):
//              kUnknown   never probed yet (routable; not counted ready)
//              kHealthy   healthy_threshold good probes in a row (or the first good one)
//              kUnhealthy unhealthy_threshold failed probes in a row (or the first failed
//                         one while kUnknown); never routed to
//   passive  outlier ejection from real requests (config `outlier`): consecutive_failures
//            failures in a row eject the endpoint until now + base_ejection_ms * 2^(n-1)
//            (n = ejections in a row, capped at max_ejection_ms). Once that time passes the
//            endpoint is half open: exactly one request (the trial) is let through; its
//            success readmits the endpoint, its failure ejects it again for twice as long.
//            An active verdict turning kHealthy readmits too.
//
// Outcomes of requests (Outcome): kSuccess (any answer that is not a 5xx / UNAVAILABLE:
// the server is there and working), kFailure (connect error, UNAVAILABLE, HTTP 5xx),
// kNeutral (cancelled by the client, timed out: says nothing about the endpoint).
//
// For gRPC upstreams the endpoint owns its own GrpcUpstreamClient (its channels), so that
// a removed endpoint's connections close once its last request is done. Such an endpoint
// must not be destroyed on a grpc thread: UpstreamFleet hands the last reference to the
// Housekeeper thread (fleet.h).
//
// Threads: every member from any thread (atomics; no lock).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "gateway/upstream/endpoint_handoff.h"
#include "gateway/upstream/grpc_client.h"

namespace infergate::gateway::upstream {

enum class Outcome : uint8_t { kSuccess, kFailure, kNeutral };

enum class ActiveHealth : uint8_t { kUnknown, kHealthy, kUnhealthy };
const char* activeHealthName(ActiveHealth health);

class Endpoint {
 public:
  using Clock = std::chrono::steady_clock;

  // `upstream` supplies the outlier and channel settings; `address` is a concrete address
  // (never kDns); tier 0 is preferred (the colocated endpoint), 1 spill-over.
  Endpoint(const config::UpstreamConfig& upstream, config::ListenAddress address, uint8_t tier);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const config::ListenAddress& address() const { return address_; }
  // "127.0.0.1:8001", "[::1]:8001", "unix:/path": names the endpoint in messages, the
  // admin API and affinity bindings (stable across reloads).
  const std::string& key() const { return address_.text; }
  uint8_t tier() const { return tier_; }
  // kGrpc upstreams: this endpoint's client; null otherwise.
  GrpcUpstreamClient* grpc() const { return grpc_.get(); }
  // The shared-memory handoff to this endpoint: set for the colocated endpoint (tier 0) of
  // an upstream with `colocated: true` and a `handoff` section; null otherwise.
  EndpointHandoff* handoff() const { return handoff_.get(); }

  // ---- load ----
  uint32_t outstanding() const { return outstanding_.load(std::memory_order_relaxed); }
  // Reserves a slot when fewer than `cap` requests are in flight (cap 0 = no cap).
  bool tryReserve(uint32_t cap);
  void unreserve() { outstanding_.fetch_sub(1, std::memory_order_relaxed); }
  // The load-aware signal: the gateway's own outstanding count, plus the pending count
  // last read from the endpoint's metrics when there is one. The scraped part is the
  // replica's queue (other gateways' requests too); the outstanding part moves with every
  // request, so the requests between two scrapes do not all herd onto one endpoint.
  uint64_t queueSignal() const;
  void setScrapedQueue(std::optional<uint64_t> pending);

  // ---- health ----
  ActiveHealth activeHealth() const { return active_.load(std::memory_order_relaxed); }
  bool ejected(Clock::time_point now) const;  // passive ejection still running
  // Whether requests may be sent now (not kUnhealthy, not ejected; a half-open endpoint
  // counts as routable, the trial is claimed by claimTrial()).
  bool routable(Clock::time_point now) const;
  // Half open (ejection over, not yet readmitted): true for the one caller that gets the
  // trial; false for the others, which must pick another endpoint. True when not half open.
  bool claimTrial(Clock::time_point now, bool* trial);

  // A finished request. `trial`: it was the half-open trial.
  void recordOutcome(Outcome outcome, bool trial, Clock::time_point now,
                     const config::OutlierConfig& outlier);
  // A probe's verdict; returns true when the active health changed.
  bool recordProbe(bool good, const config::HealthCheckConfig& check);

  // ---- counters (the admin API, metrics, tests) ----
  struct Counters {
    uint64_t requests = 0;   // finished requests
    uint64_t failures = 0;   // of which kFailure
    uint64_t ejections = 0;  // passive ejections (including re-ejections after a trial)
    uint64_t readmissions = 0;
    uint64_t probes_good = 0, probes_bad = 0;
    uint32_t good_streak = 0, bad_streak = 0;  // probes in a row
    uint32_t consecutive_failures = 0;         // requests in a row
  };
  Counters counters() const;
  // Until when the passive ejection runs (nullopt: not ejected).
  std::optional<Clock::time_point> ejectedUntil() const;

 private:
  void eject(Clock::time_point now, const config::OutlierConfig& outlier);
  void readmit();

  config::ListenAddress address_;
  uint8_t tier_;
  std::unique_ptr<EndpointHandoff> handoff_;
  std::unique_ptr<GrpcUpstreamClient> grpc_;

  std::atomic<uint32_t> outstanding_{0};
  std::atomic<int64_t> scraped_queue_{-1};  // -1: none

  std::atomic<ActiveHealth> active_{ActiveHealth::kUnknown};
  std::atomic<uint32_t> good_streak_{0}, bad_streak_{0};
  std::atomic<uint32_t> consecutive_failures_{0};
  std::atomic<int64_t> ejected_until_{0};  // steady_clock ns; 0 = not ejected
  std::atomic<uint32_t> ejections_in_row_{0};
  std::atomic<bool> trial_taken_{false};

  std::atomic<uint64_t> requests_{0}, failures_{0}, ejections_{0}, readmissions_{0};
  std::atomic<uint64_t> probes_good_{0}, probes_bad_{0};
};

}  // namespace infergate::gateway::upstream
