#pragma once

// Endpoint discovery for upstream endpoints written "dns:NAME:PORT" (config
// ListenAddress::Kind::kDns): a Kubernetes headless service answers with one address per
// pod, so the set of endpoints is whatever NAME resolves to now.
//
//   resolveName(name, hosts_file)   one lookup: every address, sorted and deduplicated
//   DnsWatcher                      re-resolves a set of names every discovery.dns_refresh_ms
//                                   on its own thread and reports when a set changes
//
// Where names are looked up (config DiscoveryConfig::hosts_file):
//   ""       the system resolver: getaddrinfo(AF_UNSPEC, SOCK_STREAM), which blocks
//   a path   that file only, in hosts(5) format, re-read on every lookup:
//
//              # comment to the end of the line
//              10.0.0.7      triton.models.svc  triton   # address, name, aliases...
//              10.0.0.8      triton.models.svc
//              fd00::9       TRITON.models.svc           # names match case-insensitively
//
//            Every line naming `name` (as its name or an alias) adds its address; an
//            address that is not an IPv4 or IPv6 literal is skipped.
//
// Addresses come back as endpoint text without a port: "10.0.0.7", or an IPv6 literal
// without brackets ("fd00::9") in its canonical form (inet_ntop), so that two spellings
// of one address count once.
//
// Errors: NOT_FOUND when the name resolves to nothing (the message names it and where it
// was looked up); UNAVAILABLE for any other failure: a temporary resolver failure
// (EAI_AGAIN) or another resolver error, or a hosts file that cannot be read (the message
// names the path and the errno text).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codecs/status.h"

namespace infergate::gateway::upstream {

// Every address `name` resolves to (see above). Blocks on the system resolver; safe from
// any thread.
codecs::StatusOr<std::vector<std::string>> resolveName(const std::string& name,
                                                       const std::string& hosts_file);

// Re-resolves a set of names on its own thread every `refresh`, and reports changes:
//
//   on_change(name, addresses)   at the first successful resolution of each name, then
//                                whenever its address set differs from the last one
//                                reported
//   on_error(name, status)       once per streak of failed resolutions; a failure keeps
//                                the last good set (no on_change). The streak ends at the
//                                next success, which calls on_change only if the set
//                                differs from the last one reported.
//
// Threads: the callbacks run on the watcher's thread (or, during start(), on the caller's),
// one at a time, never with a lock held; they must not block long and must not call
// stop(). refreshNow() is safe from any thread; the constructor, start(), stop() and the
// destructor belong to the owning thread.
// Lifetime: the callbacks and whatever they capture must outlive stop().
class DnsWatcher {
 public:
  struct Target {
    std::string name;
  };  // one per distinct dns: name

  using OnChange =
      std::function<void(const std::string& name, const std::vector<std::string>& addresses)>;
  using OnError = std::function<void(const std::string& name, const codecs::Status& error)>;

  // `names` may repeat (each is watched once, in first-seen order). `refresh` > 0.
  // `hosts_file` as for resolveName(). Nothing is resolved before start().
  DnsWatcher(std::vector<std::string> names, std::chrono::milliseconds refresh,
             std::string hosts_file, OnChange on_change, OnError on_error);
  ~DnsWatcher();  // stop()
  DnsWatcher(const DnsWatcher&) = delete;
  DnsWatcher& operator=(const DnsWatcher&) = delete;

  // The distinct names watched, in first-seen order.
  const std::vector<Target>& targets() const { return targets_; }

  // Resolves every name once on the calling thread, reporting as above (so the gateway
  // starts with addresses), then starts the thread. Once.
  void start();
  // Asks for a re-resolution of every name now (a test hook, and for reloads); returns at
  // once. Requests made before the thread gets to them are merged into one pass.
  void refreshNow();
  // Stops and joins the thread; idempotent. Returns promptly even mid-wait; a lookup in
  // progress is finished first (getaddrinfo cannot be interrupted), and no name after it
  // is resolved.
  void stop();

 private:
  // What was last reported for one target; touched only by the resolving thread.
  struct Reported {
    bool has_addresses = false;
    std::vector<std::string> addresses;
    bool failing = false;  // in a streak of failures, already reported
  };

  void resolveAll();
  void resolveOne(size_t i);
  void run();
  bool stopping();

  std::vector<Target> targets_;
  std::vector<Reported> reported_;  // index i = targets_[i]
  const std::chrono::milliseconds refresh_;
  const std::string hosts_file_;
  const OnChange on_change_;
  const OnError on_error_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;     // guarded by mutex_
  bool refresh_requested_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace infergate::gateway::upstream
