#include "gateway/http/body_arrival.h"

#include <algorithm>
#include <memory>

namespace infergate::gateway::http {

uint64_t BodyArrival::watch(std::function<void()> watcher) {
  const uint64_t token = next_token_++;
  watchers_.emplace_back(token, std::move(watcher));
  return token;
}

void BodyArrival::unwatch(uint64_t token) {
  auto it = std::find_if(watchers_.begin(), watchers_.end(),
                         [token](const auto& w) { return w.first == token; });
  if (it != watchers_.end()) watchers_.erase(it);
}

void BodyArrival::whenSettled(std::function<void(bool complete)> then) {
  if (settled()) return then(complete());
  auto token = std::make_shared<uint64_t>(0);
  *token = watch([this, token, then = std::move(then)]() mutable {
    if (!settled()) return;
    auto run = std::move(then);  // the watcher (and what it holds) goes with unwatch()
    unwatch(*token);
    run(complete());
  });
}

void BodyArrival::advance(uint64_t received) {
  received = std::min(received, size_);
  if (failed_ || received <= received_) return;
  received_ = received;
  notify();
}

void BodyArrival::fail() {
  if (failed_ || complete()) return;
  failed_ = true;
  notify();
}

// Each watcher present when the change happened runs once, unless an earlier one unwatched
// it; those watched meanwhile wait for the next change.
void BodyArrival::notify() {
  std::vector<uint64_t> tokens;
  tokens.reserve(watchers_.size());
  for (const auto& w : watchers_) tokens.push_back(w.first);
  for (uint64_t token : tokens) {
    auto it = std::find_if(watchers_.begin(), watchers_.end(),
                           [token](const auto& w) { return w.first == token; });
    if (it == watchers_.end()) continue;
    std::function<void()> watcher = it->second;  // a copy: it may unwatch itself
    watcher();
  }
}

}  // namespace infergate::gateway::http
