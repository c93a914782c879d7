#include "routing/affinity_table.h"

#include <algorithm>
#include <map>

#include "routing/load_balancer.h"

namespace infergate::routing {

AffinityTable::AffinityTable(std::chrono::milliseconds idle_timeout)
    : idle_timeout_(std::chrono::duration_cast<Clock::duration>(idle_timeout).count()) {}

void AffinityTable::setIdleTimeout(std::chrono::milliseconds idle_timeout) {
  idle_timeout_.store(std::chrono::duration_cast<Clock::duration>(idle_timeout).count(),
                      std::memory_order_relaxed);
}

AffinityTable::Shard& AffinityTable::shardOf(std::string_view sequence) {
  // The shard from the top bits of a hash other than the maps' own, so that the keys of
  // one shard still spread over its map's buckets.
  return shards_[stableHash64(sequence) >> 60];
}
static_assert(AffinityTable::kShards == 16, "shardOf() takes the top 4 bits");

bool AffinityTable::idle(const Binding& binding, Clock::time_point now) const {
  Clock::duration timeout(idle_timeout_.load(std::memory_order_relaxed));
  return now - binding.last_use > timeout;
}

std::optional<std::string> AffinityTable::find(std::string_view sequence,
                                               Clock::time_point now) {
  Shard& shard = shardOf(sequence);
  std::lock_guard lock(shard.mutex);
  auto it = shard.bindings.find(sequence);
  if (it == shard.bindings.end()) return std::nullopt;
  if (idle(it->second, now)) {
    shard.bindings.erase(it);
    return std::nullopt;
  }
  it->second.last_use = std::max(it->second.last_use, now);
  return it->second.endpoint;
}

void AffinityTable::bind(std::string_view sequence, std::string_view endpoint,
                         Clock::time_point now) {
  Shard& shard = shardOf(sequence);
  std::lock_guard lock(shard.mutex);
  auto it = shard.bindings.find(sequence);
  if (it == shard.bindings.end()) {
    shard.bindings.emplace(std::string(sequence), Binding{std::string(endpoint), now});
    return;
  }
  it->second.endpoint.assign(endpoint);
  it->second.last_use = std::max(it->second.last_use, now);
}

void AffinityTable::erase(std::string_view sequence) {
  Shard& shard = shardOf(sequence);
  std::lock_guard lock(shard.mutex);
  // Heterogeneous erase(key) is C++23: find, then erase the iterator.
  if (auto it = shard.bindings.find(sequence); it != shard.bindings.end()) {
    shard.bindings.erase(it);
  }
}

size_t AffinityTable::sweep(Clock::time_point now) {
  size_t dropped = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    dropped += std::erase_if(shard.bindings,
                             [&](const auto& entry) { return idle(entry.second, now); });
  }
  return dropped;
}

size_t AffinityTable::eraseEndpoint(std::string_view endpoint) {
  size_t dropped = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    dropped += std::erase_if(
        shard.bindings, [&](const auto& entry) { return entry.second.endpoint == endpoint; });
  }
  return dropped;
}

size_t AffinityTable::size() const {
  size_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    total += shard.bindings.size();
  }
  return total;
}

std::vector<std::pair<std::string, size_t>> AffinityTable::countsByEndpoint() const {
  std::map<std::string, size_t, std::less<>> counts;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    for (const auto& [sequence, binding] : shard.bindings) {
      auto it = counts.find(binding.endpoint);
      if (it == counts.end()) it = counts.emplace(binding.endpoint, 0).first;
      ++it->second;
    }
  }
  return {counts.begin(), counts.end()};
}

}  // namespace infergate::routing
