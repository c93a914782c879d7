#include "gateway/http/listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace infergate::gateway::http {
namespace {

constexpr int kBacklog = 4096;

codecs::Status bindError(std::string_view what, std::string_view address, int err) {
  return absl::UnavailableError(
      codecs::strCat("cannot ", what, " ", address, ": ", std::strerror(err)));
}

// `share`: SO_REUSEPORT, so that the process's other loops bind the same port.
codecs::StatusOr<int> bindOne(const sockaddr* addr, socklen_t len, std::string_view label, bool share = true) {
  int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return bindError("create a socket for", label, errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr->sa_family != AF_UNIX) {
    if (share) ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (addr->sa_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  }
  if (::bind(fd, addr, len) != 0) {
    int err = errno;
    ::close(fd);
    return bindError("bind", label, err);
  }
  if (::listen(fd, kBacklog) != 0) {
    int err = errno;
    ::close(fd);
    return bindError("listen on", label, err);
  }
  return fd;
}

codecs::StatusOr<BoundSockets> bindTcp(const ListenSpec& spec, size_t count) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(spec.port);
  std::string label = codecs::strCat(spec.host, ":", spec.port);
  int rc = ::getaddrinfo(spec.host.empty() ? nullptr : spec.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(codecs::strCat("cannot resolve ", label, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  sockaddr_storage storage{};
  std::memcpy(&storage, found->ai_addr, found->ai_addrlen);
  socklen_t len = found->ai_addrlen;
  if (spec.port != 0) {
    // SO_REUSEPORT would let a second process of the same user share a port in use: a
    // socket without it, bound and closed first, finds such a port taken.
    auto probe = bindOne(reinterpret_cast<sockaddr*>(&storage), len, label, /*share=*/false);
    if (!probe.ok()) return probe.status();
    ::close(*probe);
  }
  BoundSockets out;
  for (size_t i = 0; i < std::max<size_t>(count, 1); ++i) {
    auto fd = bindOne(reinterpret_cast<sockaddr*>(&storage), len, label);
    if (!fd.ok()) {
      for (int open_fd : out.fds) ::close(open_fd);
      return fd.status();
    }
    out.fds.push_back(*fd);
    if (i == 0) {  // learn the port (port 0) and bind the others to the same one
      sockaddr_storage bound{};
      socklen_t bound_len = sizeof(bound);
      ::getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
      char host[INET6_ADDRSTRLEN] = {};
      if (bound.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&bound);
        out.port = ntohs(a->sin6_port);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        out.address = codecs::strCat("[", host, "]:", out.port);
        reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = a->sin6_port;
      } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&bound);
        out.port = ntohs(a->sin_port);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        out.address = codecs::strCat(host, ":", out.port);
        reinterpret_cast<sockaddr_in*>(&storage)->sin_port = a->sin_port;
      }
    }
  }
  return out;
}

codecs::StatusOr<BoundSockets> bindUnix(const ListenSpec& spec) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string label = "unix:" + spec.path;
  if (spec.path.empty() || spec.path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(codecs::strCat(
        "unix socket path must be 1 to ", sizeof(addr.sun_path) - 1, " bytes: '", spec.path, "'"));
  }
  std::memcpy(addr.sun_path, spec.path.data(), spec.path.size());
  struct stat st;
  if (::lstat(spec.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::UnavailableError(
          codecs::strCat("cannot bind ", label, ": a file that is not a socket is there"));
    }
    ::unlink(spec.path.c_str());  // a stale socket from an earlier run
  }
  auto fd = bindOne(reinterpret_cast<sockaddr*>(&addr), sizeof(addr), label);
  if (!fd.ok()) return fd.status();
  BoundSockets out;
  out.fds.push_back(*fd);
  out.address = label;
  return out;
}

}  // namespace

std::string socketAddressText(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "";
}

codecs::StatusOr<BoundSockets> bindListener(const ListenSpec& spec, size_t count) {
  return spec.kind == ListenSpec::Kind::kUnix ? bindUnix(spec) : bindTcp(spec, count);
}

}  // namespace infergate::gateway::http
