#include "gateway/upstream/endpoint.h"

#include <algorithm>

namespace infergate::gateway::upstream {
namespace {

int64_t ticks(Endpoint::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// base * 2^(n-1), capped at max; n >= 1.
std::chrono::milliseconds ejectionTime(const config::OutlierConfig& outlier, uint32_t n) {
  const uint64_t cap = std::max<uint64_t>(outlier.max_ejection_ms, 1);
  uint64_t ms = std::clamp<uint64_t>(outlier.base_ejection_ms, 1, cap);
  for (uint32_t i = 1; i < n && ms < cap; ++i) ms = std::min(ms * 2, cap);
  return std::chrono::milliseconds(ms);
}

}  // namespace

const char* activeHealthName(ActiveHealth health) {
  switch (health) {
    case ActiveHealth::kUnknown:
      return "unknown";
    case ActiveHealth::kHealthy:
      return "healthy";
    case ActiveHealth::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

Endpoint::Endpoint(const config::UpstreamConfig& upstream, config::ListenAddress address,
                   uint8_t tier)
    : address_(std::move(address)), tier_(tier) {
  if (upstream.protocol == config::UpstreamConfig::Protocol::kGrpc) {
    config::UpstreamConfig one = upstream;
    one.endpoints = {address_};
    grpc_ = std::make_unique<GrpcUpstreamClient>(one);
  }
  if (tier_ == 0 && upstream.colocated && upstream.handoff.enabled && upstream.isRemote()) {
    handoff_ = std::make_unique<EndpointHandoff>(upstream, address_.text);
  }
}

Endpoint::~Endpoint() = default;

bool Endpoint::tryReserve(uint32_t cap) {
  uint32_t now = outstanding_.fetch_add(1, std::memory_order_relaxed);
  if (cap == 0 || now < cap) return true;
  outstanding_.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

uint64_t Endpoint::queueSignal() const {
  int64_t scraped = scraped_queue_.load(std::memory_order_relaxed);
  return outstanding() + (scraped > 0 ? static_cast<uint64_t>(scraped) : 0);
}

void Endpoint::setScrapedQueue(std::optional<uint64_t> pending) {
  scraped_queue_.store(pending ? static_cast<int64_t>(std::min<uint64_t>(*pending, INT64_MAX)) : -1,
                       std::memory_order_relaxed);
}

bool Endpoint::ejected(Clock::time_point now) const {
  int64_t until = ejected_until_.load(std::memory_order_acquire);
  return until != 0 && ticks(now) < until;
}

bool Endpoint::routable(Clock::time_point now) const {
  if (activeHealth() == ActiveHealth::kUnhealthy) return false;
  int64_t until = ejected_until_.load(std::memory_order_acquire);
  if (until == 0) return true;
  // Half open: routable while nobody holds the trial.
  return ticks(now) >= until && !trial_taken_.load(std::memory_order_acquire);
}

bool Endpoint::claimTrial(Clock::time_point now, bool* trial) {
  *trial = false;
  int64_t until = ejected_until_.load(std::memory_order_acquire);
  if (until == 0) return true;
  if (ticks(now) < until) return false;
  bool expected = false;
  if (!trial_taken_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return false;
  *trial = true;
  return true;
}

void Endpoint::eject(Clock::time_point now, const config::OutlierConfig& outlier) {
  uint32_t n = ejections_in_row_.fetch_add(1, std::memory_order_relaxed) + 1;
  ejected_until_.store(ticks(now + ejectionTime(outlier, n)), std::memory_order_release);
  trial_taken_.store(false, std::memory_order_release);
  ejections_.fetch_add(1, std::memory_order_relaxed);
}

void Endpoint::readmit() {
  if (ejected_until_.exchange(0, std::memory_order_acq_rel) != 0) {
    readmissions_.fetch_add(1, std::memory_order_relaxed);
  }
  ejections_in_row_.store(0, std::memory_order_relaxed);
  consecutive_failures_.store(0, std::memory_order_relaxed);
  trial_taken_.store(false, std::memory_order_release);
}

void Endpoint::recordOutcome(Outcome outcome, bool trial, Clock::time_point now,
                             const config::OutlierConfig& outlier) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  switch (outcome) {
    case Outcome::kSuccess:
      consecutive_failures_.store(0, std::memory_order_relaxed);
      if (trial) readmit();
      return;
    case Outcome::kNeutral:
      if (trial) trial_taken_.store(false, std::memory_order_release);
      return;
    case Outcome::kFailure:
      break;
  }
  failures_.fetch_add(1, std::memory_order_relaxed);
  uint32_t in_row = consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (outlier.consecutive_failures == 0) {
    // Ejection is off (a reload turned it off while this endpoint was ejected): the trial
    // readmits, or trial_taken_ would stay set and the endpoint never be routed to again.
    if (trial) readmit();
    return;
  }
  if (trial) return eject(now, outlier);
  // Only the failure that crosses the threshold ejects: the others of the same burst (in
  // flight when it happened) find the endpoint ejected already.
  if (in_row == outlier.consecutive_failures && ejected_until_.load(std::memory_order_acquire) == 0) {
    eject(now, outlier);
  }
}

bool Endpoint::recordProbe(bool good, const config::HealthCheckConfig& check) {
  ActiveHealth before = activeHealth();
  ActiveHealth after = before;
  if (good) {
    probes_good_.fetch_add(1, std::memory_order_relaxed);
    bad_streak_.store(0, std::memory_order_relaxed);
    uint32_t streak = good_streak_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (before == ActiveHealth::kUnknown ||
        (before == ActiveHealth::kUnhealthy && streak >= check.healthy_threshold)) {
      after = ActiveHealth::kHealthy;
    }
  } else {
    probes_bad_.fetch_add(1, std::memory_order_relaxed);
    good_streak_.store(0, std::memory_order_relaxed);
    uint32_t streak = bad_streak_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (before == ActiveHealth::kUnknown ||
        (before == ActiveHealth::kHealthy && streak >= check.unhealthy_threshold)) {
      after = ActiveHealth::kUnhealthy;
    }
  }
  if (after == before) return false;
  active_.store(after, std::memory_order_relaxed);
  // Back from unhealthy: whatever passive ejection ran is over too (the server restarted).
  if (after == ActiveHealth::kHealthy && before == ActiveHealth::kUnhealthy) readmit();
  return true;
}

Endpoint::Counters Endpoint::counters() const {
  Counters c;
  c.requests = requests_.load(std::memory_order_relaxed);
  c.failures = failures_.load(std::memory_order_relaxed);
  c.ejections = ejections_.load(std::memory_order_relaxed);
  c.readmissions = readmissions_.load(std::memory_order_relaxed);
  c.probes_good = probes_good_.load(std::memory_order_relaxed);
  c.probes_bad = probes_bad_.load(std::memory_order_relaxed);
  c.good_streak = good_streak_.load(std::memory_order_relaxed);
  c.bad_streak = bad_streak_.load(std::memory_order_relaxed);
  c.consecutive_failures = consecutive_failures_.load(std::memory_order_relaxed);
  return c;
}

std::optional<Endpoint::Clock::time_point> Endpoint::ejectedUntil() const {
  int64_t until = ejected_until_.load(std::memory_order_acquire);
  if (until == 0) return std::nullopt;
  return Clock::time_point(std::chrono::nanoseconds(until));
}

}  // namespace infergate::gateway::upstream
