// What one large tensor costs the machine at least, measured where the benchmark runs:
// forwarding.sh compares infergate's added latency on 4 MiB requests with these figures,
// taken in the same run (bench/README.md, "Forwarding").
//
//   copy_costs [BYTES] [ITERATIONS]     (defaults: 4194304 bytes, 101 iterations)
//
// memcpy: BYTES into a warm (touched, reused) buffer from a warm source; median of N. The
//   same two buffers every time, so at 4 MiB they mostly stay in the CPU caches.
// memcpy_cold_cache: the same, each copy between a different pair of warm buffers out of
//   64 MiB or more of them, so that source and destination come from memory.
// loopback: BYTES sent over a TCP connection on 127.0.0.1 from one thread to another, from
//   the first send() until the receiver holds the last byte (both clocks CLOCK_MONOTONIC);
//   the receiver then answers one byte so that transfers never overlap; median of N.
// rtt: a 1-byte round trip over the same connection (the per-message floor); median of N.
// Prints one JSON object: {"bytes","iterations","memcpy_us","memcpy_cold_cache_us",
// "loopback_us","rtt_1byte_us", plus each one's min and max}; exit 1 on a socket error.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double microsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

struct Summary {
  double median = 0, min = 0, max = 0;
};

Summary summarize(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values[values.size() / 2], values.front(), values.back()};
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "copy_costs: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

bool sendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool recvAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

Summary timeMemcpy(size_t bytes, int iterations) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // both touched: warm
  std::memcpy(dst.data(), src.data(), bytes);
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    src[static_cast<size_t>(i) % bytes] = static_cast<char>(i);
    auto start = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    auto end = Clock::now();
    asm volatile("" : : "r"(dst.data()) : "memory");  // the copy is used
    times.push_back(microsSince(start, end));
  }
  return summarize(times);
}

Summary timeMemcpyColdCache(size_t bytes, int iterations) {
  const size_t pairs = std::max<size_t>(2, ((size_t{32} << 20) + bytes - 1) / bytes);
  std::vector<std::vector<char>> src, dst;
  for (size_t i = 0; i < pairs; ++i) {
    src.emplace_back(bytes, 1);
    dst.emplace_back(bytes, 0);
  }
  std::vector<double> times;
  for (int i = 0; i < iterations + static_cast<int>(pairs); ++i) {
    const size_t k = static_cast<size_t>(i) % pairs;
    auto start = Clock::now();
    std::memcpy(dst[k].data(), src[k].data(), bytes);
    auto end = Clock::now();
    asm volatile("" : : "r"(dst[k].data()) : "memory");
    if (i >= static_cast<int>(pairs)) times.push_back(microsSince(start, end));
  }
  return summarize(times);
}

// A connected pair of TCP sockets on 127.0.0.1, Nagle off on both (as the servers run).
void connectedPair(int* a, int* b) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind");
  if (::listen(listener, 1) != 0) fail("listen");
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
  *a = ::socket(AF_INET, SOCK_STREAM, 0);
  if (*a < 0) fail("socket");
  if (::connect(*a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
  *b = ::accept(listener, nullptr, nullptr);
  if (*b < 0) fail("accept");
  ::close(listener);
  int one = 1;
  ::setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct LoopbackResult {
  Summary transfer, rtt;
};

LoopbackResult timeLoopback(size_t bytes, int iterations) {
  int sender = -1, receiver = -1;
  connectedPair(&sender, &receiver);
  std::vector<char> out(bytes, 2), in(bytes, 0);
  const int warmups = 3;
  const int total = warmups + iterations;
  std::vector<Clock::time_point> arrived(static_cast<size_t>(total));
  std::atomic<bool> receiver_ok{true};

  // Receiver: each round, the whole message, its arrival time, then a 1-byte answer; then
  // `total` 1-byte pings echoed back.
  auto serve = [&] {
    char byte = 0;
    for (int i = 0; i < total; ++i) {
      if (!recvAll(receiver, in.data(), bytes)) return false;
      arrived[static_cast<size_t>(i)] = Clock::now();
      if (!sendAll(receiver, &byte, 1)) return false;
    }
    for (int i = 0; i < total; ++i) {
      if (!recvAll(receiver, &byte, 1) || !sendAll(receiver, &byte, 1)) return false;
    }
    return true;
  };
  std::thread peer([&] { receiver_ok.store(serve()); });

  std::vector<double> transfers, rtts;
  char ack = 0;
  for (int i = 0; i < total; ++i) {
    auto start = Clock::now();
    if (!sendAll(sender, out.data(), bytes) || !recvAll(sender, &ack, 1)) fail("loopback send");
    if (i >= warmups) transfers.push_back(microsSince(start, arrived[static_cast<size_t>(i)]));
  }
  for (int i = 0; i < total; ++i) {
    auto start = Clock::now();
    if (!sendAll(sender, &ack, 1) || !recvAll(sender, &ack, 1)) fail("loopback ping");
    if (i >= warmups) rtts.push_back(microsSince(start, Clock::now()));
  }
  peer.join();
  if (!receiver_ok.load()) fail("loopback receive");
  ::close(sender);
  ::close(receiver);
  return {summarize(transfers), summarize(rtts)};
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{4} << 20;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 101;
  if (bytes == 0 || iterations <= 0) {
    std::fprintf(stderr, "usage: copy_costs [BYTES] [ITERATIONS]\n");
    return 2;
  }
  Summary copy = timeMemcpy(bytes, iterations);
  Summary cold = timeMemcpyColdCache(bytes, iterations);
  LoopbackResult net = timeLoopback(bytes, iterations);
  std::printf(
      "{\"bytes\":%zu,\"iterations\":%d,"
      "\"memcpy_us\":%.1f,\"memcpy_min_us\":%.1f,\"memcpy_max_us\":%.1f,"
      "\"memcpy_cold_cache_us\":%.1f,\"memcpy_cold_cache_min_us\":%.1f,"
      "\"memcpy_cold_cache_max_us\":%.1f,"
      "\"loopback_us\":%.1f,\"loopback_min_us\":%.1f,\"loopback_max_us\":%.1f,"
      "\"rtt_1byte_us\":%.1f,\"rtt_1byte_min_us\":%.1f,\"rtt_1byte_max_us\":%.1f}\n",
      bytes, iterations, copy.median, copy.min, copy.max, cold.median, cold.min, cold.max,
      net.transfer.median, net.transfer.min, net.transfer.max, net.rtt.median, net.rtt.min,
      net.rtt.max);
  return 0;
}
