#pragma once

// The fleet layer of one upstream: its endpoints, and for each request the choice of one
// of them and a slot on it.
//
//   UpstreamFleet::create(config, affinity, previous)
//       endpoints from the config; "dns:" entries start empty and are filled by
//       setResolved(). Endpoints whose key is in `previous` (a reload) are reused with their
//       health, counters and connections.
//   acquire(context, done)
//       -> done(EndpointLease) at once when a slot is free, or later (from the thread that
//          freed one) after waiting in the queue, or done(error):
//            UNAVAILABLE + Retry-After  at the in-flight cap and the queue is full, or the
//                                       wait passed overload.queue_timeout_ms / the deadline
//            UNAVAILABLE                no routable endpoint (all unhealthy or ejected, or
//                                       none resolved); a sequence whose endpoint is gone
//   lease.finish(outcome)
//       frees the slot, feeds passive health, and hands the slot to the next waiter.
//
// The choice, in order: a sequence request (context.sequence, affinity.sequences on) goes
// to the endpoint its sequence is bound to (routing::AffinityTable; bound at its first
// request, unbound at sequence_end); if that endpoint is gone or not routable the request
// fails unless it starts the sequence again. Then a request carrying the configured
// hash_header goes to its rendezvous-hash endpoint, the highest-ranked one for its value
// that is routable and has room. Otherwise the policy (routing::LoadBalancer) picks among
// the routable endpoints under their cap, in the lowest tier that has one (colocated: the
// first endpoint is tier 0, the others tier 1).
//
// Waiting requests are offered a slot whenever a lease of this fleet finishes or endpoints
// are added. After a reload, leases of the old fleet wake the old fleet's queue only, so
// a request queued on the new fleet just then may wait up to its queue timeout.
//
// Threads: every member from any thread. acquire()'s `done` may run inline, on the thread
// of a request that finished, or on the Housekeeper's thread (a queue timeout): it must not
// block, and post to an event loop what must run there.
//
// Housekeeper: one process-wide thread for the fleet's timers (queue timeouts, affinity
// sweeps) and for destroying endpoints that own gRPC channels, which must never happen on
// a grpc thread (grpc_client.cc, "Ownership").

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/sequence_ref.h"
#include "codecs/status.h"
#include "config/config.h"
#include "gateway/telemetry/request_info.h"
#include "gateway/telemetry/sharded.h"
#include "gateway/upstream/endpoint.h"
#include "gateway/upstream/upstream_status.h"
#include "routing/affinity_table.h"
#include "routing/load_balancer.h"
#include "routing/retry_budget.h"

namespace infergate::gateway::upstream {

class Housekeeper {
 public:
  using Clock = std::chrono::steady_clock;
  static Housekeeper& instance();

  // Runs `task` on the housekeeper's thread at `when` (or soon after); returns an id for
  // cancel(). Tasks must not block for long.
  uint64_t at(Clock::time_point when, std::function<void()> task);
  // The task will not run (it may be running now). Unknown ids are ignored.
  void cancel(uint64_t id);
  // Runs `task` soon on the housekeeper's thread.
  void post(std::function<void()> task) { at(Clock::time_point::min(), std::move(task)); }
  // Waits until every task due by now has run (shutdown: the endpoints being destroyed).
  void drain();

  ~Housekeeper();

 private:
  Housekeeper();
  struct State;
  std::unique_ptr<State> state_;
};

// What the fleet needs of a request to place it. Owns its strings: a queued request keeps
// it after the frontend's buffers are gone.
struct PickContext {
  using Clock = std::chrono::steady_clock;
  std::string model;                          // as the upstream is asked (affinity key)
  std::optional<codecs::SequenceRef> sequence;  // present() ones only
  std::optional<std::string> hash_value;      // the value of load_balancing.hash_header
  Clock::time_point deadline = Clock::time_point::max();  // a queued request waits no longer
  // Where the call reports its endpoint, queue wait, upstream time and attempts (null:
  // nobody asks). Written by fleet_call.h's calls before their completion runs.
  std::shared_ptr<telemetry::CallStats> stats;
};

class UpstreamFleet;

// A reserved slot on an endpoint, for one attempt. Movable; finish() once (the
// destructor finishes a lease still held as kNeutral).
class EndpointLease {
 public:
  EndpointLease() = default;
  EndpointLease(EndpointLease&& other) noexcept { *this = std::move(other); }
  EndpointLease& operator=(EndpointLease&& other) noexcept;
  ~EndpointLease() { finish(Outcome::kNeutral); }

  bool valid() const { return endpoint_ != nullptr; }
  Endpoint& endpoint() const { return *endpoint_; }
  const std::shared_ptr<Endpoint>& sharedEndpoint() const { return endpoint_; }
  // No clock read for a lease already finished or moved from: their destructors run on
  // every request, several times.
  void finish(Outcome outcome) {
    if (endpoint_) finish(outcome, std::chrono::steady_clock::now());
  }
  // The same at `now`, a time the caller has just read.
  void finish(Outcome outcome, std::chrono::steady_clock::time_point now);

 private:
  friend class UpstreamFleet;
  std::shared_ptr<UpstreamFleet> fleet_;
  std::shared_ptr<Endpoint> endpoint_;
  bool trial_ = false;
};

class UpstreamFleet : public std::enable_shared_from_this<UpstreamFleet> {
 public:
  using Clock = std::chrono::steady_clock;
  using EndpointList = std::vector<std::shared_ptr<Endpoint>>;

  // `affinity` outlives reloads (the caller keeps one per upstream name); null: a new one.
  static std::shared_ptr<UpstreamFleet> create(const config::UpstreamConfig& config,
                                               std::shared_ptr<routing::AffinityTable> affinity,
                                               const EndpointList* previous = nullptr);
  ~UpstreamFleet();

  const config::UpstreamConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }
  // The endpoints now. Hold the result by name while using it: discovery may swap the
  // list from its thread, and `for (... : *endpoints())` lets the snapshot go before the
  // loop runs (the temporary dies with the range expression).
  std::shared_ptr<const EndpointList> endpoints() const { return endpoints_.load(); }
  // Whether sequence affinity can make a difference here: it is on and the upstream has,
  // or may come to have (dns:), more than one endpoint. Frontends skip reading a
  // request's sequence otherwise.
  bool affinityMatters() const {
    return config_.affinity.sequences &&
           (config_.endpoints.size() > 1 ||
            (!config_.endpoints.empty() &&
             config_.endpoints[0].kind == config::ListenAddress::Kind::kDns));
  }
  // The endpoint named `key` now, or null.
  std::shared_ptr<Endpoint> findEndpoint(std::string_view key) const;

  // The addresses the "dns:" entry `entry` resolves to now ("10.0.0.7", "fd00::7"). Those
  // that stay keep their state; new ones are added; removed ones leave the list, and
  // requests in flight on them finish there.
  void setResolved(const config::ListenAddress& entry, const std::vector<std::string>& addresses);

  using AcquireDone = std::function<void(codecs::StatusOr<EndpointLease>)>;
  // Returns the waiter's id when the request waits in the queue (0 when `done` already
  // ran), for abandon().
  uint64_t acquire(const PickContext& context, AcquireDone done) {
    return acquire(context, std::move(done), Clock::now());
  }
  // The same at `now`, a time the caller has just read.
  uint64_t acquire(const PickContext& context, AcquireDone done, Clock::time_point now);
  // Takes a waiting request out of the queue; its `done` never runs. False when it is no
  // longer waiting (done has run or is about to).
  bool abandon(uint64_t waiter);
  // Without waiting: a lease, or an error (at the cap counts as one). `exclude`: an
  // endpoint already tried (a retry). Retries and mirrors use this.
  codecs::StatusOr<EndpointLease> tryAcquire(const PickContext& context, const Endpoint* exclude);

  routing::RetryBudget& retryBudget() { return retry_budget_; }
  routing::AffinityTable& affinity() { return *affinity_; }
  const std::shared_ptr<routing::AffinityTable>& sharedAffinity() const { return affinity_; }

  struct Counters {
    uint32_t in_flight = 0;
    size_t queued = 0;
    uint64_t shed = 0;            // refused at the cap (queue full or wait timed out)
    uint64_t retries = 0;         // attempts after the first (made)
    uint64_t retries_refused = 0; // retries the budget did not allow
    uint64_t affinity_lost = 0;   // sequence requests whose endpoint was gone
  };
  Counters counters() const;
  void countRetry(bool allowed);
  // The time a request waited for its first slot (0 when one was free at once).
  void observeQueueWait(Clock::duration wait) { queue_wait_.observe(wait); }
  telemetry::HistogramSnapshot queueWait() const { return queue_wait_.snapshot(); }

  // Cancels every gRPC call in flight on every endpoint and waits for their callbacks.
  void shutdownGrpc();

 private:
  explicit UpstreamFleet(const config::UpstreamConfig& config);

  enum class Miss { kNone, kAtCap, kError };
  // One attempt to place the request: the lease, or why not (`error` set on kError).
  EndpointLease place(const PickContext& context, const Endpoint* exclude, Miss* miss,
                      codecs::Status* error, Clock::time_point now);
  static std::shared_ptr<Endpoint> makeEndpoint(const config::UpstreamConfig& config,
                                                const config::ListenAddress& address, uint8_t tier);
  codecs::Status overloaded(std::string_view why);
  void onSlotFreed();
  void rebuild();  // endpoints_ from sources_; under sources_mu_

  struct Waiter;
  void expire(const std::shared_ptr<Waiter>& waiter);

  friend class EndpointLease;

  const config::UpstreamConfig config_;
  routing::LoadBalancer balancer_;
  routing::RetryBudget retry_budget_;
  std::shared_ptr<routing::AffinityTable> affinity_;
  std::shared_ptr<std::function<void()>> sweeper_;  // the affinity sweep, while the fleet lives

  std::atomic<std::shared_ptr<const EndpointList>> endpoints_;
  std::mutex sources_mu_;
  // For each config entry, the endpoints it stands for now (static: itself).
  std::vector<std::vector<std::shared_ptr<Endpoint>>> sources_;

  std::atomic<uint32_t> in_flight_{0};
  std::atomic<uint64_t> shed_{0}, retries_{0}, retries_refused_{0}, affinity_lost_{0};
  telemetry::ShardedHistogram queue_wait_;

  std::mutex queue_mu_;
  std::list<std::shared_ptr<Waiter>> queue_;
  std::atomic<size_t> queued_{0};
  uint64_t next_waiter_ = 1;  // under queue_mu_
};

// The outcome an answer stands for (endpoint.h): gRPC OK and application errors are
// kSuccess; UNAVAILABLE kFailure; DEADLINE_EXCEEDED / CANCELLED kNeutral.
Outcome outcomeOfGrpc(int grpc_code);
// HTTP: a status >= 500 is kFailure, any other answer kSuccess.
Outcome outcomeOfHttpStatus(int http_status);
// A failed exchange (no answer): kFailure for UNAVAILABLE and upstream garbage, else
// kNeutral.
Outcome outcomeOfError(const codecs::Status& status);

}  // namespace infergate::gateway::upstream
