#pragma once

// The shared-memory handoff state of one colocated endpoint (config `handoff`; DESIGN.md
// "handoff"): the gateway's pool registered with that upstream, the client regions passed
// through to it by reference, and what the upstream said about client shared memory.
//
// Nothing here waits on the network. Requests ask (poolReady(), passthroughName()) and get
// an answer at once: a reference when the upstream has the region, otherwise nothing and
// the request goes inline; what is missing is queued as Work for the registrar
// (gateway/handoff_registrar.h), which runs on the health checker's loop, registers it,
// and reports back. So the first request for a region goes inline and later ones by
// reference; a full pool, an upstream that refuses, or one that restarted all degrade to
// inline forwarding, never to an error.
//
// Names at the upstream belong to the gateway and are unique per process, endpoint and
// registration: "infergate_pool_<tag>_<n>" (the pool of the n-th handoff endpoint) and
// "infergate_r<tag>_<n>_<serial>" (a client region, by its registry serial, so a name
// reused by the client never aliases an old registration), where <tag> is
// shm::HandoffPool::processTag(), pid and a random word: a gateway restarted as pid 1 in
// its container never meets its predecessor's names. So an upstream that answers "already
// registered" to one of them still has that very registration (the endpoint only looked
// down): the registrar takes it as registered.
//
// Threads: every member may be called from any thread (one mutex; the pool and the
// output-size table have their own).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "shm/handoff_pool.h"
#include "shm/region.h"

namespace infergate::gateway::upstream {

class EndpointHandoff {
 public:
  // Creates the pool (handoff.pool_bytes > 0); a pool that cannot be created is logged
  // once and the endpoint works with pass-through only.
  EndpointHandoff(const config::UpstreamConfig& upstream, std::string endpoint_key);
  ~EndpointHandoff();

  const config::HandoffConfig& config() const { return config_; }
  const std::string& upstreamName() const { return upstream_name_; }
  const std::string& endpointKey() const { return endpoint_key_; }
  // This handoff's number in the process (in the names it gives at the upstream).
  uint64_t number() const { return number_; }

  // ---- asked by requests ----

  // The pool when the upstream has it registered, else null.
  std::shared_ptr<shm::HandoffPool> readyPool() const;
  const std::string& poolName() const { return pool_name_; }
  // The name under which the upstream knows `region`, or nullopt: then its registration
  // is queued (once) and the caller sends the bytes inline. A system region is registered
  // there with its key and offset, a CUDA region with the client's IPC handle and device:
  // the upstream opens the very same memory, and the tensor travels by reference.
  std::optional<std::string> passthroughName(const std::shared_ptr<const shm::Region>& region);
  // Whether the upstream refused client shared memory (Triton without
  // --allow-client-shm=true): everything goes inline to this endpoint from then on.
  bool refused() const { return refused_.load(std::memory_order_relaxed); }

  // The byte size an output of `model` had the last time it came back, to size its pool
  // slot; nullopt before it was seen.
  std::optional<uint64_t> outputSize(const std::string& model, const std::string& output) const;
  void learnOutputSize(const std::string& model, const std::string& output, uint64_t bytes);
  // Every output of `model`: the names of the last answer to a request that asked for no
  // output in particular (empty before one came back).
  std::vector<std::string> outputsOf(const std::string& model) const;
  void learnOutputsOf(const std::string& model, std::vector<std::string> names);

  // A request that used a reference was refused by the upstream because it did not know
  // the region (it restarted, or unregistered it): forget every registration, so the
  // registrar registers again, and go inline meanwhile.
  void lostRegistrations();

  // ---- the registrar ----

  struct Work {
    enum class Kind { kRegisterPool, kRegisterRegion, kUnregisterRegion };
    Kind kind;
    std::string name;  // at the upstream
    // kRegisterPool / kRegisterRegion: what to register
    shm::RegionKind region_kind = shm::RegionKind::kSystem;
    std::string key;
    uint64_t offset = 0;
    uint64_t byte_size = 0;
    int device = 0;
    std::string cuda_handle;  // kCudaIpcHandleBytes raw bytes
    uint64_t serial = 0;      // kRegisterRegion / kUnregisterRegion: the client region's
    // kUnregisterRegion: region_kind says which API unregisters it (system or CUDA).
  };
  // What should be sent now: the pool's registration when it is not registered (and not
  // refused), queued region registrations and unregistrations. Each Work taken is in
  // flight until its done*() call.
  std::vector<Work> takeWork();
  // Outcomes. `refused`: the upstream said client shared memory is disabled; `error`:
  // its words (logged once per kind of failure).
  void poolRegistered(bool ok, bool refused, const std::string& error);
  // `kind`: the kind of the region registered (its Work's region_kind). A CUDA region
  // refused as unimplemented fails alone (the upstream has no GPU); a refused system
  // region marks the whole endpoint refused().
  void regionRegistered(uint64_t serial, bool ok, bool refused, const std::string& error,
                        shm::RegionKind kind = shm::RegionKind::kSystem);
  void regionUnregistered(uint64_t serial);
  // The endpoint went unhealthy or away: its registrations are presumed lost.
  void endpointDown();
  // A client unregistered `region` at the gateway: unregister its copy at the upstream.
  void clientUnregistered(const shm::Region& region);

  struct Counters {
    uint64_t refusals = 0;            // registrations the upstream refused
    uint64_t pool_registrations = 0;  // successful
    uint64_t region_registrations = 0;
    bool pool_ready = false;
    bool refused = false;
    // Tensor bytes of requests sent to this endpoint, by how they travelled.
    uint64_t pool_bytes_in = 0;       // inputs handed over through the pool
    uint64_t pool_bytes_in_place = 0; // of those, read from the client straight into it (no copy)
    uint64_t pool_bytes_out = 0;      // outputs read back from the pool
    uint64_t passthrough_bytes = 0;   // client-region tensors passed by reference
    uint64_t inline_bytes = 0;        // tensors sent or answered inline
    uint64_t pool_full = 0;           // tensors that found no room in the pool (inline)
    uint64_t inline_retries = 0;      // requests sent again inline (lost registration, slot too small)
    // The pool now (0 before it exists): its size, and what requests in flight hold of it.
    uint64_t pool_bytes = 0;
    uint64_t pool_bytes_in_use = 0;
    uint64_t pool_slots_in_use = 0;
  };
  Counters counters() const;

  // Byte accounting by the requests (any thread, lock-free).
  void countPoolIn(uint64_t n) { pool_bytes_in_.fetch_add(n, std::memory_order_relaxed); }
  void countPoolInPlace(uint64_t n) { pool_bytes_in_place_.fetch_add(n, std::memory_order_relaxed); }
  void countPoolOut(uint64_t n) { pool_bytes_out_.fetch_add(n, std::memory_order_relaxed); }
  void countPassthrough(uint64_t n) { passthrough_bytes_.fetch_add(n, std::memory_order_relaxed); }
  void countInline(uint64_t n) { inline_bytes_.fetch_add(n, std::memory_order_relaxed); }
  void countPoolFull() { pool_full_.fetch_add(1, std::memory_order_relaxed); }
  void countInlineRetry() { inline_retries_.fetch_add(1, std::memory_order_relaxed); }

 private:
  enum class State { kUnregistered, kRegistering, kReady, kFailed };
  struct Passthrough {
    State state = State::kUnregistered;
    std::string name;
    shm::RegionKind kind = shm::RegionKind::kSystem;
    std::weak_ptr<const shm::Region> region;
  };
  // The unregistration of `name` (a client region's copy, of `kind`) at the upstream.
  static Work unregisterWork(std::string name, uint64_t serial, shm::RegionKind kind);
  void refuse(const std::string& error);

  config::HandoffConfig config_;
  std::string upstream_name_;
  std::string endpoint_key_;
  uint64_t number_;  // of this EndpointHandoff in the process: in the names at the upstream
  std::shared_ptr<shm::HandoffPool> pool_;
  std::string pool_name_;
  std::atomic<bool> refused_{false};
  std::atomic<uint64_t> pool_bytes_in_{0}, pool_bytes_in_place_{0}, pool_bytes_out_{0},
      passthrough_bytes_{0}, inline_bytes_{0}, pool_full_{0}, inline_retries_{0};

  mutable std::mutex mu_;
  State pool_state_ = State::kUnregistered;
  std::map<uint64_t, Passthrough> regions_;  // by the client region's serial
  std::vector<Work> unregister_queue_;
  Counters counters_;
  bool warned_ = false;

  mutable std::mutex sizes_mu_;
  std::map<std::string, std::map<std::string, uint64_t>, std::less<>> output_sizes_;
  std::map<std::string, std::vector<std::string>, std::less<>> all_outputs_;
};

}  // namespace infergate::gateway::upstream
