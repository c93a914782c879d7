#include "gateway/upstream/host_addresses.h"

#include <algorithm>
#include <utility>

#include "codecs/text.h"

namespace infergate::gateway::upstream {
namespace {

std::string lowercase(std::string_view name) {
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(), codecs::asciiLower);
  return out;
}

}  // namespace

void HostAddresses::resolved(std::string_view name, std::vector<std::string> addresses) {
  auto entry = std::make_shared<Entry>();
  entry->addresses = std::move(addresses);
  std::string key = lowercase(name);
  std::lock_guard<std::mutex> lock(mu_);
  entries_[std::move(key)] = std::move(entry);
}

void HostAddresses::failed(std::string_view name, const codecs::Status& error) {
  std::string key = lowercase(name);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && !it->second->addresses.empty()) return;  // the last good ones stay
  auto entry = std::make_shared<Entry>();
  entry->error = error;
  entries_[std::move(key)] = std::move(entry);
}

std::shared_ptr<const HostAddresses::Entry> HostAddresses::find(std::string_view name) const {
  std::string key = lowercase(name);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void HostAddresses::setRefresher(std::function<void()> refresh) {
  std::lock_guard<std::mutex> lock(refresh_mu_);
  refresher_ = std::move(refresh);
  last_refresh_ = {};
}

void HostAddresses::missed() const {
  std::lock_guard<std::mutex> lock(refresh_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!refresher_ || now - last_refresh_ < kMinRefreshGap) return;
  last_refresh_ = now;
  refresher_();
}

void HostAddresses::retain(const std::vector<std::string>& names) {
  std::vector<std::string> keep;
  keep.reserve(names.size());
  for (const std::string& n : names) keep.push_back(lowercase(n));
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(entries_, [&](const auto& e) {
    return std::find(keep.begin(), keep.end(), e.first) == keep.end();
  });
}

}  // namespace infergate::gateway::upstream
