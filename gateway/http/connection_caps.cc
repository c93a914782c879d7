#include "gateway/http/connection_caps.h"

#include <netinet/in.h>

namespace infergate::gateway::http {
namespace {

// The client's address as bytes, the key of the per-client count: 4 for IPv4 (also when
// it arrives IPv4-mapped on an IPv6 socket), 16 for IPv6.
std::string clientKey(const sockaddr_storage& peer) {
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    return std::string(reinterpret_cast<const char*>(&in->sin_addr), 4);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
  const auto* bytes = reinterpret_cast<const char*>(&in6->sin6_addr);
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return std::string(bytes + 12, 4);
  return std::string(bytes, 16);
}

}  // namespace

bool ConnectionCaps::admit(const sockaddr_storage* peer, std::string* client) {
  client->clear();
  // Counted before the caller closes: a client that sees its connection closed and then
  // reads the metrics finds the refusal there. The check and the count are two steps, so
  // loops accepting at the same moment may pass the total by one each.
  if (open_.load(std::memory_order_relaxed) >= max_connections_) {
    refused_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (peer != nullptr && (peer->ss_family == AF_INET || peer->ss_family == AF_INET6) &&
      max_per_client_ != SIZE_MAX) {
    std::string key = clientKey(*peer);
    std::lock_guard<std::mutex> lock(clients_mu_);
    size_t& open = clients_[key];  // the cap is at least 1: a new entry is counted at once
    if (open >= max_per_client_) {
      refused_client_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    ++open;
    *client = std::move(key);
  }
  open_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ConnectionCaps::release(const std::string& client) {
  open_.fetch_sub(1, std::memory_order_relaxed);
  if (client.empty()) return;
  std::lock_guard<std::mutex> lock(clients_mu_);
  auto it = clients_.find(client);
  if (it != clients_.end() && --it->second == 0) clients_.erase(it);
}

}  // namespace infergate::gateway::http
