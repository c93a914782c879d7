#pragma once

// The addresses of upstream endpoints written as a host name ("triton:8001",
// "localhost:8001"), as discovery last resolved them, for the worker's own clients: the
// native HTTP/1.1 and gRPC engines connect to IP addresses without a resolver of their own,
// and read here which ones a name stands for when they open a connection.
//
//   resolved(name, addresses)   discovery's watcher found them (its first lookup, or a change)
//   failed(name, error)         a lookup failed: the addresses known stay, and the error is
//                               what a connection is told while none is known
//   find(name)                  what is known now; null when the name was never looked up
//   missed()                    a connection found no address to go to: discovery is asked
//                               to look every name up again now (setRefresher), at most
//                               once per kMinRefreshGap, rather than at its next refresh
//                               (a name that appears after the gateway started, such as a
//                               container started after it, is used at once)
//
// One name is one endpoint, however many addresses it has: a connection tries them in
// turn, starting from the one that connected last (Entry::preferred), as grpc's pick_first
// and libcurl do. Existing connections keep the address they went to; the next one
// follows a change.
//
// Names compare ignoring case. Threads: every member is safe from any thread; an Entry is
// never changed once published, except its `preferred` hint.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/status.h"

namespace infergate::gateway::upstream {

class HostAddresses {
 public:
  struct Entry {
    // IP literals without a port ("10.0.0.7", "fd00::9"), as resolveName gives them.
    std::vector<std::string> addresses;
    // While `addresses` is empty: why (the last lookup's error).
    codecs::Status error;
    // The index of the address a connection reached last: where the next one starts.
    mutable std::atomic<size_t> preferred{0};
  };

  static constexpr std::chrono::milliseconds kMinRefreshGap{1000};

  void resolved(std::string_view name, std::vector<std::string> addresses);
  void failed(std::string_view name, const codecs::Status& error);
  std::shared_ptr<const Entry> find(std::string_view name) const;
  // Forgets every name not in `names` (a reload's configuration dropped it).
  void retain(const std::vector<std::string>& names);

  // What missed() calls (discovery's watcher's refreshNow; it must return at once); null:
  // nothing. Once this returns, the one before is no longer running nor called.
  void setRefresher(std::function<void()> refresh);
  void missed() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Entry>, std::less<>> entries_;  // lowercase names

  // Held while the refresher runs, so that setRefresher() waits it out.
  mutable std::mutex refresh_mu_;
  std::function<void()> refresher_;  // guarded by refresh_mu_
  mutable std::chrono::steady_clock::time_point last_refresh_{};  // guarded by refresh_mu_
};

}  // namespace infergate::gateway::upstream
