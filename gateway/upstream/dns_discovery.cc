#include "gateway/upstream/dns_discovery.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "config/text_file.h"

namespace infergate::gateway::upstream {
namespace {

// The canonical text of an IPv4 or IPv6 literal, or nothing.
std::optional<std::string> canonicalAddress(const std::string& literal) {
  char text[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (::inet_pton(AF_INET, literal.c_str(), &v4) == 1) {
    ::inet_ntop(AF_INET, &v4, text, sizeof(text));
    return std::string(text);
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, literal.c_str(), &v6) == 1) {
    ::inet_ntop(AF_INET6, &v6, text, sizeof(text));
    return std::string(text);
  }
  return std::nullopt;
}

void sortUnique(std::vector<std::string>& addresses) {
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// The whitespace-separated words of `line`, up to a '#'.
std::vector<std::string_view> words(std::string_view line) {
  line = line.substr(0, line.find('#'));
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && isBlank(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !isBlank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Hosts files are small; a runaway one is refused rather than read whole.
constexpr size_t kMaxHostsFileBytes = 16 * 1024 * 1024;

codecs::StatusOr<std::vector<std::string>> resolveFromFile(const std::string& name,
                                                           const std::string& path) {
  codecs::StatusOr<std::string> read = config::readTextFile(path, kMaxHostsFileBytes);
  // For the watcher any failure to read means "keep the last addresses": UNAVAILABLE.
  if (!read.ok()) {
    return absl::UnavailableError(codecs::strCat(codecs::messageOf(read.status()), " (hosts file)"));
  }
  const std::string& text = *read;
  std::vector<std::string> addresses;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    std::vector<std::string_view> w = words(line);
    if (w.size() < 2) continue;
    bool named = std::any_of(w.begin() + 1, w.end(),
                             [&](std::string_view n) { return equalsIgnoreCase(n, name); });
    if (!named) continue;
    if (auto address = canonicalAddress(std::string(w[0]))) addresses.push_back(std::move(*address));
  }
  if (addresses.empty()) {
    return absl::NotFoundError(codecs::strCat("dns name '", name, "' not found in hosts file ", path));
  }
  sortUnique(addresses);
  return addresses;
}

codecs::StatusOr<std::vector<std::string>> resolveFromSystem(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_ADDRFAMILY) {
    return absl::NotFoundError(
        codecs::strCat("dns name '", name, "' not found by the system resolver: ", gai_strerror(rc)));
  }
  if (rc != 0) {
    const char* detail = rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
    return absl::UnavailableError(
        codecs::strCat("cannot resolve dns name '", name, "' with the system resolver: ", detail));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  std::vector<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = nullptr;
    if (a->ai_family == AF_INET) raw = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    if (a->ai_family == AF_INET6) raw = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    if (raw != nullptr && ::inet_ntop(a->ai_family, raw, text, sizeof(text)) != nullptr) {
      addresses.emplace_back(text);
    }
  }
  if (addresses.empty()) {
    return absl::NotFoundError(
        codecs::strCat("dns name '", name, "' not found by the system resolver: no IP address"));
  }
  sortUnique(addresses);
  return addresses;
}

}  // namespace

codecs::StatusOr<std::vector<std::string>> resolveName(const std::string& name,
                                                       const std::string& hosts_file) {
  return hosts_file.empty() ? resolveFromSystem(name) : resolveFromFile(name, hosts_file);
}

DnsWatcher::DnsWatcher(std::vector<std::string> names, std::chrono::milliseconds refresh,
                       std::string hosts_file, OnChange on_change, OnError on_error)
    : refresh_(refresh),
      hosts_file_(std::move(hosts_file)),
      on_change_(std::move(on_change)),
      on_error_(std::move(on_error)) {
  std::unordered_set<std::string> seen;
  for (std::string& name : names) {
    if (seen.insert(name).second) targets_.push_back(Target{std::move(name)});
  }
  reported_.resize(targets_.size());
}

DnsWatcher::~DnsWatcher() { stop(); }

void DnsWatcher::start() {
  resolveAll();
  thread_ = std::thread([this] { run(); });
}

void DnsWatcher::refreshNow() {
  std::lock_guard<std::mutex> lock(mutex_);
  refresh_requested_ = true;
  wake_.notify_all();
}

void DnsWatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool DnsWatcher::stopping() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_requested_;
}

void DnsWatcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait_for(lock, refresh_, [this] { return stop_requested_ || refresh_requested_; });
    if (stop_requested_) return;
    refresh_requested_ = false;
    lock.unlock();
    resolveAll();
    lock.lock();
  }
}

void DnsWatcher::resolveAll() {
  for (size_t i = 0; i < targets_.size() && !stopping(); ++i) resolveOne(i);
}

void DnsWatcher::resolveOne(size_t i) {
  const std::string& name = targets_[i].name;
  Reported& last = reported_[i];
  codecs::StatusOr<std::vector<std::string>> resolved = resolveName(name, hosts_file_);
  if (!resolved.ok()) {
    if (!last.failing && on_error_) on_error_(name, resolved.status());
    last.failing = true;
    return;
  }
  last.failing = false;
  if (last.has_addresses && last.addresses == *resolved) return;
  last.has_addresses = true;
  last.addresses = std::move(*resolved);
  if (on_change_) on_change_(name, last.addresses);
}

}  // namespace infergate::gateway::upstream
