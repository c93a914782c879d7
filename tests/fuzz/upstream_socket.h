#pragma once

// Shared by the drivers that play an upstream to one of the gateway's clients
// (http_client_fuzzer, grpc_client_fuzzer): the client's event loop, a unix listener the
// fuzzer accepts on, running the loop until things settle, and writing an answer in pieces.
// One of each per process.

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/listen_address.h"
#include "gateway/http/event_loop.h"
#include "tests/fuzz/fuzz_util.h"

namespace infergate::fuzz {

inline gateway::http::EventLoop& upstreamLoop() {
  static gateway::http::EventLoop* instance = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return new gateway::http::EventLoop();
  }();
  return *instance;
}

// The upstream's listening unix socket, /tmp/infergate-<name>-fuzz.<pid>, made at the first
// call (every call names the same one) and unlinked at exit.
struct UnixUpstream {
  int fd = -1;
  config::ListenAddress endpoint;
};

inline const UnixUpstream& unixUpstream(const char* name) {
  static std::string path;
  static UnixUpstream* instance = [name] {
    auto* u = new UnixUpstream();
    path = std::string("/tmp/infergate-") + name + "-fuzz." + std::to_string(::getpid());
    ::unlink(path.c_str());
    u->fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path.copy(a.sun_path, sizeof(a.sun_path) - 1);
    FUZZ_CHECK(::bind(u->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    FUZZ_CHECK(::listen(u->fd, 16) == 0);
    std::atexit([] { ::unlink(path.c_str()); });
    auto parsed = config::parseEndpointAddress("unix:" + path);
    FUZZ_CHECK(parsed.ok());
    u->endpoint = *parsed;
    return u;
  }();
  return *instance;
}

// Runs the loop until neither it nor the upstream's socket (when >= 0, its bytes appended
// to `received`) moves for three turns.
inline void settle(int upstream_fd, std::string& received) {
  for (int quiet = 0; quiet < 3;) {
    event_base_loop(upstreamLoop().base(), EVLOOP_NONBLOCK);
    bool moved = false;
    if (upstream_fd >= 0) {
      char buffer[4096];
      ssize_t n;
      while ((n = ::recv(upstream_fd, buffer, sizeof(buffer), MSG_DONTWAIT)) > 0) {
        received.append(buffer, static_cast<size_t>(n));
        moved = true;
      }
    }
    quiet = moved ? 0 : quiet + 1;
  }
}

// Writes `answer` in pieces of the given sizes (cycled), settling after each, until all is
// written, `stop()` says so, or the client no longer takes bytes (it closed the connection:
// the rest stays unsent, the same way in every run).
inline void sendInPieces(int upstream_fd, std::string_view answer, const std::vector<size_t>& pieces,
                         std::string& received, const std::function<bool()>& stop = nullptr) {
  size_t sent = 0, piece = 0;
  int stuck = 0;
  while (sent < answer.size() && stuck < 3) {
    const size_t size = std::min(pieces[piece++ % pieces.size()], answer.size() - sent);
    const ssize_t n = ::send(upstream_fd, answer.data() + sent, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    stuck = n > 0 ? 0 : stuck + 1;
    if (n > 0) sent += static_cast<size_t>(n);
    settle(upstream_fd, received);
    if (stop && stop()) break;
  }
}

}  // namespace infergate::fuzz
