#pragma once

// Which endpoint of an upstream gets the next request: the load-balancing policies and
// rendezvous hashing, as pure functions over a snapshot of the endpoints' state.
//
//   gateway: fills one EndpointLoad per endpoint (health, ejection, cap -> available;
//            colocated or spill-over -> tier; its own in-flight count; the queue signal)
//   LoadBalancer::pick(loads, draw)          -> index, or kNoEndpoint
//   pickByHash(loads, endpoint_keys, value)  -> index, or kNoEndpoint (hash_header)
//
// Tiers: only the lowest tier holding an available endpoint is considered, by every
// policy and by pickByHash. Tier 0 is the colocated endpoint; higher tiers are
// spill-over, used only while no endpoint of a lower tier may be picked.
//
// Threads: a LoadBalancer is shared by every worker thread. pick() is const, takes no
// lock and never allocates; round robin's counter is a relaxed atomic (the only shared
// write). The span is the caller's, read during the call only.
//
// Costs: O(n) in the number of endpoints, two or three passes, no division except round
// robin's one modulo. Draws are reduced to a range by multiply-and-shift on 32-bit halves
// (Lemire), so an upstream may have at most 2^32 endpoints (it has a handful).
//
// pickByHash hashes with stableHash64(), written here and pinned by golden values in the
// tests: every gateway replica and every build sends the same key to the same endpoint.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "config/config.h"

namespace infergate::routing {

// What the gateway knows of one endpoint at the moment of the pick.
struct EndpointLoad {
  bool available = true;     // healthy, not ejected, under its cap: may be picked
  uint8_t tier = 0;          // 0 = preferred (colocated); higher = spill-over
  uint32_t outstanding = 0;  // the gateway's requests in flight to it
  uint64_t queue = 0;        // load-aware signal (the endpoint's pending requests, or outstanding)
};

inline constexpr size_t kNoEndpoint = SIZE_MAX;

class LoadBalancer {
 public:
  using Policy = config::LoadBalancingConfig::Policy;

  explicit LoadBalancer(Policy policy) : policy_(policy) {}
  LoadBalancer(const LoadBalancer&) = delete;
  LoadBalancer& operator=(const LoadBalancer&) = delete;

  Policy policy() const { return policy_; }

  // The index of the endpoint for the next request, or kNoEndpoint when none is
  // available. `random` is a uniform 64-bit draw from the caller (tests pass fixed values).
  //
  // kRoundRobin: the next available endpoint of the best tier in turn. The counter picks
  //   the k-th *available* one, so while the set holds still each gets exactly its share
  //   and an unavailable endpoint's turns are spread over all the others (not handed to
  //   its neighbour). `random` is unused.
  // kLeastRequest: power of two choices. Two distinct candidates among the available of
  //   the best tier, one from each 32-bit half of `random`; the one with fewer
  //   outstanding wins, the first candidate on a tie (itself uniform, so ties spread).
  //   With one available endpoint, that one.
  // kLoadAware: the available endpoint of the best tier with the smallest queue; among
  //   equals, the one `random` selects (uniformly). The queue is sampled (metrics every
  //   metrics_interval_ms): the caller should add its own outstanding requests to it, or
  //   every request between two samples goes to the same endpoint.
  //
  // For a given span and draw, kLeastRequest and kLoadAware are pure functions.
  size_t pick(std::span<const EndpointLoad> endpoints, uint64_t random) const;

 private:
  Policy policy_;
  mutable std::atomic<uint64_t> next_{0};  // round robin: picks made so far
};

// Consistent hashing by rendezvous (highest random weight): among the available
// endpoints of the best tier, the one whose weight stableHash64(endpoint_keys[i],
// stableHash64(key)) is highest (equal weights, which 64-bit hashes make vanishingly rare:
// the smaller endpoint key). kNoEndpoint when none is available.
//
// Each key ranks the endpoints independently of the others, so an endpoint that goes
// away (removed, or unavailable) moves only the keys that were on it, each to its own
// second choice, and an endpoint that comes back or is added takes only the keys it
// ranks first for. The result depends on the keys, not on positions in the spans.
//
// endpoint_keys[i] names endpoints[i] (its address, say); when the spans differ in length
// only the first min(size) entries are considered. O(n * key length); no allocation.
size_t pickByHash(std::span<const EndpointLoad> endpoints,
                  std::span<const std::string_view> endpoint_keys, std::string_view key);

// A 64-bit hash of `bytes` that is the same on every build, compiler and machine (unlike
// std::hash): the bytes are read as little-endian 64-bit words (the last one zero-padded),
// each XORed into the state and stirred with splitmix64's finalizer; the length and
// `seed` set the starting state, and each step is a bijection of the state. Not
// cryptographic: whoever chooses a key can choose its endpoint, which a client choosing
// its own hash_header value can do anyway.
// The tests pin its values: changing it moves every hashed key on a rolling upgrade.
uint64_t stableHash64(std::string_view bytes, uint64_t seed = 0);

}  // namespace infergate::routing
