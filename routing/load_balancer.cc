#include "routing/load_balancer.h"

#include <algorithm>

namespace infergate::routing {
namespace {

using Policy = config::LoadBalancingConfig::Policy;

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // 2^64 / phi, odd

// splitmix64's output function (Steele, Lea and Flood, 2014): a bijection on 64 bits in
// which each input bit flips each output bit with probability close to 1/2.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Up to 8 bytes as a little-endian word, whatever the machine's byte order.
uint64_t loadWord(const char* p, size_t n) {
  uint64_t word = 0;
  for (size_t i = 0; i < n; ++i) word |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return word;
}

// A uniform point of [0, n) from a uniform 32-bit draw, by multiply-and-shift.
size_t below(uint32_t draw, size_t n) { return static_cast<size_t>((uint64_t{draw} * n) >> 32); }

// The lowest tier that holds an available endpoint, and how many available endpoints it
// holds; count 0 when none is available.
struct BestTier {
  uint8_t tier = 0;
  size_t count = 0;
};

BestTier bestTier(std::span<const EndpointLoad> endpoints) {
  BestTier best;
  for (const EndpointLoad& e : endpoints) {
    if (!e.available) continue;
    if (best.count == 0 || e.tier < best.tier) {
      best = {e.tier, 1};
    } else if (e.tier == best.tier) {
      ++best.count;
    }
  }
  return best;
}

// The index of the `nth` (from 0) available endpoint of `tier`; nth < that tier's count.
size_t nthOfTier(std::span<const EndpointLoad> endpoints, uint8_t tier, size_t nth) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (endpoints[i].available && endpoints[i].tier == tier && nth-- == 0) return i;
  }
  return kNoEndpoint;  // unreachable while nth < count
}

size_t pickLeastRequest(std::span<const EndpointLoad> endpoints, uint64_t random) {
  BestTier best = bestTier(endpoints);
  if (best.count == 0) return kNoEndpoint;
  if (best.count == 1) return nthOfTier(endpoints, best.tier, 0);
  // Two distinct candidates: the first among all, the second among the others (shifted
  // past the first), each from its own half of the draw.
  size_t first = below(static_cast<uint32_t>(random), best.count);
  size_t second = below(static_cast<uint32_t>(random >> 32), best.count - 1);
  if (second >= first) ++second;
  size_t a = nthOfTier(endpoints, best.tier, first);
  size_t b = nthOfTier(endpoints, best.tier, second);
  return endpoints[b].outstanding < endpoints[a].outstanding ? b : a;
}

size_t pickLoadAware(std::span<const EndpointLoad> endpoints, uint64_t random) {
  // One pass for the smallest (tier, queue) and how many share it, one to find the one
  // the draw selects among them.
  bool any = false;
  uint8_t tier = 0;
  uint64_t queue = 0;
  size_t ties = 0;
  for (const EndpointLoad& e : endpoints) {
    if (!e.available) continue;
    if (!any || e.tier < tier || (e.tier == tier && e.queue < queue)) {
      any = true;
      tier = e.tier;
      queue = e.queue;
      ties = 1;
    } else if (e.tier == tier && e.queue == queue) {
      ++ties;
    }
  }
  if (!any) return kNoEndpoint;
  size_t nth = below(static_cast<uint32_t>(random >> 32), ties);
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const EndpointLoad& e = endpoints[i];
    if (e.available && e.tier == tier && e.queue == queue && nth-- == 0) return i;
  }
  return kNoEndpoint;  // unreachable
}

}  // namespace

size_t LoadBalancer::pick(std::span<const EndpointLoad> endpoints, uint64_t random) const {
  switch (policy_) {
    case Policy::kRoundRobin: {
      BestTier best = bestTier(endpoints);
      if (best.count == 0) return kNoEndpoint;
      uint64_t turn = next_.fetch_add(1, std::memory_order_relaxed);
      return nthOfTier(endpoints, best.tier, static_cast<size_t>(turn % best.count));
    }
    case Policy::kLeastRequest:
      return pickLeastRequest(endpoints, random);
    case Policy::kLoadAware:
      return pickLoadAware(endpoints, random);
  }
  return pickLeastRequest(endpoints, random);  // unreachable: every policy is handled
}

uint64_t stableHash64(std::string_view bytes, uint64_t seed) {
  uint64_t state = mix64(seed ^ (kGolden * (bytes.size() + 1)));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    size_t n = std::min<size_t>(left, 8);
    state = mix64((state ^ loadWord(p, n)) + kGolden);
    p += n;
    left -= n;
  }
  return state;
}

size_t pickByHash(std::span<const EndpointLoad> endpoints,
                  std::span<const std::string_view> endpoint_keys, std::string_view key) {
  size_t n = std::min(endpoints.size(), endpoint_keys.size());
  endpoints = endpoints.first(n);
  BestTier best = bestTier(endpoints);
  if (best.count == 0) return kNoEndpoint;
  uint64_t key_hash = stableHash64(key);
  size_t chosen = kNoEndpoint;
  uint64_t chosen_weight = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!endpoints[i].available || endpoints[i].tier != best.tier) continue;
    uint64_t weight = stableHash64(endpoint_keys[i], key_hash);
    if (chosen == kNoEndpoint || weight > chosen_weight ||
        (weight == chosen_weight && endpoint_keys[i] < endpoint_keys[chosen])) {
      chosen = i;
      chosen_weight = weight;
    }
  }
  return chosen;
}

}  // namespace infergate::routing
