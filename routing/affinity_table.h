#pragma once

// Sequence affinity: sequence id -> the endpoint its sequence is bound to, so that every
// request of a stateful sequence (Triton's sequence batcher) reaches the endpoint that
// holds its state.
//
//   first request of a sequence: find() -> nullopt; pick an endpoint; bind(id, endpoint)
//   later requests:              find() -> the endpoint (and its last use is refreshed)
//   sequence_end:                erase(id)
//   a timer:                     sweep(now) drops bindings idle past the timeout
//   endpoint gone for good:      eraseEndpoint(key)
//
// Threads: one table per upstream, shared by every worker thread; every member is safe to
// call concurrently. The table is split into kShards shards by a hash of the sequence id,
// each a mutex and a hash map, so requests of different sequences seldom wait on each
// other. Each call holds one shard's lock at a time, for O(1) work (find, bind, erase)
// or for one walk over that shard (sweep, eraseEndpoint, size, countsByEndpoint).
//
// Costs: find() does not allocate to look the id up (transparent lookup) but returns a
// copy of the endpoint key; bind() allocates for a new id. The table is bounded only by
// time: ids come from clients, so the caller must sweep() on a timer (every few seconds)
// and should cap how many sequences it lets a client open.
//
// Time is the caller's (`now`), so tests pass synthetic time points. A binding is idle
// past the timeout when now - last use > timeout; with timeout 0, any later `now`.
// Callers on different threads may pass slightly different `now`s: a last use only moves
// forward.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace infergate::routing {

class AffinityTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kShards = 16;

  explicit AffinityTable(std::chrono::milliseconds idle_timeout);
  AffinityTable(const AffinityTable&) = delete;
  AffinityTable& operator=(const AffinityTable&) = delete;

  // A reload may change it; it applies to existing bindings from the next call.
  void setIdleTimeout(std::chrono::milliseconds idle_timeout);

  // The endpoint key bound to `sequence`, refreshing its last use; nullopt when unbound
  // or idle past the timeout (then erased).
  std::optional<std::string> find(std::string_view sequence, Clock::time_point now);
  // Binds (or rebinds) `sequence` to `endpoint`, last used `now`.
  void bind(std::string_view sequence, std::string_view endpoint, Clock::time_point now);
  // Forgets `sequence` (sequence_end); nothing when unbound.
  void erase(std::string_view sequence);
  // Drops every binding idle past the timeout; returns how many.
  size_t sweep(Clock::time_point now);
  // Drops every binding to `endpoint` (it is gone for good); returns how many.
  size_t eraseEndpoint(std::string_view endpoint);
  // Bindings held, expired ones not yet swept included.
  size_t size() const;
  // Bindings per endpoint key, sorted by key (for /admin/upstreams); endpoints with none
  // are absent.
  std::vector<std::pair<std::string, size_t>> countsByEndpoint() const;

 private:
  struct Binding {
    std::string endpoint;
    Clock::time_point last_use;
  };
  // Lets the maps be searched with a std::string_view: find() does not build a string.
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  using Map = std::unordered_map<std::string, Binding, IdHash, std::equal_to<>>;
  // Own cache line each, so that threads on different shards do not share one.
  struct alignas(64) Shard {
    mutable std::mutex mutex;
    Map bindings;
  };

  Shard& shardOf(std::string_view sequence);
  bool idle(const Binding& binding, Clock::time_point now) const;

  std::atomic<Clock::rep> idle_timeout_;  // in Clock::duration ticks
  std::array<Shard, kShards> shards_;
};

}  // namespace infergate::routing
