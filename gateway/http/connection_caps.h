#pragma once

// What a listener admits at accept (limits.max_connections, max_connections_per_client):
// at most `max_connections` open at once, and at most `max_per_client` of them from one
// client address (IPv4, IPv6; an IPv4-mapped IPv6 address counts as its IPv4 one). A unix
// socket's connections count toward the total only. Refusals are counted by cap, and so are
// connections closed for the send timeout (limits.send_timeout_ms), which the server reports.
// HttpServer and the gRPC frontend's native server each keep one.
//
// Threads: any (the loops accept and close on their own threads).

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace infergate::gateway::http {

class ConnectionCaps {
 public:
  explicit ConnectionCaps(size_t max_connections = SIZE_MAX, size_t max_per_client = SIZE_MAX)
      : max_connections_(max_connections), max_per_client_(max_per_client) {}
  ConnectionCaps(const ConnectionCaps&) = delete;
  ConnectionCaps& operator=(const ConnectionCaps&) = delete;

  // Before the first accept.
  void setMaxConnections(size_t cap) { max_connections_ = cap; }
  void setMaxPerClient(size_t cap) { max_per_client_ = cap; }

  // A connection just accepted from `peer` (null: a unix socket). True: it is counted, and
  // `*client` names its per-client entry ("" when none), for release() when it closes.
  // False: over a cap, counted as refused; the caller closes it.
  bool admit(const sockaddr_storage* peer, std::string* client);
  void release(const std::string& client);

  size_t open() const { return open_.load(std::memory_order_relaxed); }
  uint64_t refusedOverTotal() const { return refused_total_.load(std::memory_order_relaxed); }
  uint64_t refusedOverClient() const { return refused_client_.load(std::memory_order_relaxed); }

  // A connection was closed (or, on gRPC, one of its streams reset) because its client took
  // none of the bytes waiting for it for the send timeout.
  void countSendTimeout() { send_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t sendTimeouts() const { return send_timeouts_.load(std::memory_order_relaxed); }
  // A gRPC connection was closed because its client reset streams faster than the
  // listener allows (limits.grpc_reset_burst / grpc_resets_per_second).
  void countResetFlood() { reset_floods_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t resetFloods() const { return reset_floods_.load(std::memory_order_relaxed); }

 private:
  size_t max_connections_;
  size_t max_per_client_;
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> refused_total_{0};
  std::atomic<uint64_t> refused_client_{0};
  std::atomic<uint64_t> send_timeouts_{0};
  std::atomic<uint64_t> reset_floods_{0};
  std::mutex clients_mu_;
  std::unordered_map<std::string, size_t> clients_;  // address bytes -> connections open
};

}  // namespace infergate::gateway::http
