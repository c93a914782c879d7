// loadgen's HTTP/1.1 client: one thread, one epoll loop, N keep-alive connections, each
// with one request outstanding (no pipelining). The request is built once and written
// with one send() when the socket takes it whole; responses are framed by Content-Length
// or chunked encoding (or EOF when the server gives neither).
//
// Closed loop: a connection sends its next request as soon as the previous response is
// in. Open loop: sends fall due at fixed intervals; a due send waits in `pending_` for an
// idle connection, and its latency counts from when it fell due, not from when it went
// out (no coordinated omission).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "bench/loadgen.h"

namespace infergate::bench {
namespace {

constexpr int64_t kReconnectDelayNs = 10'000'000;  // after a failed connection: 10 ms
constexpr size_t kMaxHeaderBytes = 1 << 20;
constexpr size_t kMinReadRoom = 16 * 1024;
constexpr int kMaxEvents = 256;

std::string errnoKind(const char* what, int err) {
  const char* name = strerrorname_np(err);
  return std::string(what) + "_" + (name ? name : std::to_string(err));
}

bool equalsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

bool containsNoCase(std::string_view hay, std::string_view needle) {
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (equalsNoCase(hay.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

// How one response is framed, learned from its head; kept across reads.
struct Framing {
  size_t head_end = 0;  // 0 until the blank line after the headers has arrived
  size_t scanned = 0;   // the search for that blank line resumes here
  int status = 0;
  bool chunked = false;
  bool until_close = false;  // neither Content-Length nor chunked: the body ends at EOF
  bool close = false;        // the server closes after this response
  size_t content_length = 0;
  size_t chunk_pos = 0;  // chunked: where the next chunk-size line starts
};

enum class Parse { kIncomplete, kComplete, kInvalid };

// Status line and the three headers that frame the body; false if malformed.
bool parseHead(std::string_view head, Framing* f) {
  if (head.size() < 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ') return false;
  f->status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (head[i] < '0' || head[i] > '9') return false;
    f->status = f->status * 10 + (head[i] - '0');
  }
  f->close = head[7] == '0';
  bool has_length = false;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    size_t start = pos + 2;
    pos = head.find("\r\n", start);
    std::string_view line = head.substr(start, pos == std::string_view::npos ? head.npos
                                                                             : pos - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (equalsNoCase(name, "content-length")) {
      size_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
      }
      f->content_length = n;
      has_length = true;
    } else if (equalsNoCase(name, "transfer-encoding")) {
      f->chunked = containsNoCase(value, "chunked");
    } else if (equalsNoCase(name, "connection")) {
      if (containsNoCase(value, "close")) f->close = true;
      if (containsNoCase(value, "keep-alive")) f->close = false;
    }
  }
  bool no_body = f->status / 100 == 1 || f->status == 204 || f->status == 304;
  if (no_body) f->content_length = 0;
  f->until_close = !no_body && !has_length && !f->chunked;
  return true;
}

// Walks chunk-size lines from f->chunk_pos; *total = bytes of the whole response.
Parse parseChunks(std::string_view in, Framing* f, size_t* total) {
  while (true) {
    size_t eol = in.find("\r\n", f->chunk_pos);
    if (eol == std::string_view::npos) return Parse::kIncomplete;
    size_t size = 0;
    size_t i = f->chunk_pos;
    for (; i < eol && std::isxdigit(static_cast<unsigned char>(in[i])); ++i) {
      size = size * 16 + (in[i] <= '9' ? in[i] - '0' : (in[i] | 0x20) - 'a' + 10);
      if (size > (size_t{1} << 40)) return Parse::kInvalid;
    }
    if (i == f->chunk_pos) return Parse::kInvalid;
    if (size == 0) {  // last chunk, then trailers up to an empty line
      size_t end = in.substr(eol).find("\r\n\r\n");
      if (end == std::string_view::npos) return Parse::kIncomplete;
      *total = eol + end + 4;
      return Parse::kComplete;
    }
    if (in.size() < eol + 2 + size + 2) return Parse::kIncomplete;
    f->chunk_pos = eol + 2 + size + 2;
  }
}

class HttpLoadThread {
 public:
  HttpLoadThread(const Options& options, int connections, double rate, int64_t phase_ns,
                 const Timeline& timeline, Stats* stats)
      : options_(options), timeline_(timeline), stats_(*stats), conns_(connections),
        open_loop_(rate > 0), interval_ns_(rate > 0 ? 1e9 / rate : 0),
        first_send_(timeline.start + phase_ns) {
    buildRequest();
  }
  void run();

 private:
  enum class State { kDown, kConnecting, kIdle, kWriting, kReading };
  struct Conn {
    int fd = -1;
    State state = State::kDown;
    bool want_out = false;  // EPOLLOUT registered
    size_t written = 0;
    int64_t intended = 0;  // when the request in flight was due
    int64_t retry_at = 0;  // kDown: when to connect again
    std::vector<char> in;
    size_t in_len = 0;
    Framing framing;
  };

  void buildRequest();
  void connect(uint32_t index);
  void onConnected(uint32_t index);
  void onEvent(uint32_t index, uint32_t events);
  void becomeIdle(uint32_t index, int64_t now);
  void send(uint32_t index, int64_t intended);
  void writeMore(Conn& c);
  void readSome(uint32_t index);
  Parse parse(Conn& c, size_t* total);
  void complete(uint32_t index, size_t total);
  void fail(uint32_t index, const std::string& kind);
  void setEvents(Conn& c, bool want_out);
  int64_t nextSendAt() const { return first_send_ + static_cast<int64_t>(sent_ * interval_ns_); }
  void enqueueDue(int64_t now);
  void retryDown(int64_t now);
  int64_t nextWake() const;

  const Options& options_;
  const Timeline timeline_;
  Stats& stats_;
  std::string request_;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  int epoll_fd_ = -1;
  std::vector<Conn> conns_;
  int down_ = 0;  // connections in kDown
  // open loop
  bool open_loop_;
  double interval_ns_;
  int64_t first_send_;
  uint64_t sent_ = 0;  // sends that have fallen due so far
  std::deque<int64_t> pending_;
  std::vector<uint32_t> idle_;
};

void HttpLoadThread::buildRequest() {
  const Options& o = options_;
  std::string method = o.method.empty() ? (o.body.empty() ? "GET" : "POST") : o.method;
  bool has_type = false;
  for (const auto& h : o.headers) has_type |= equalsNoCase(h.substr(0, 13), "content-type:");
  std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  request_ = method + " " + o.path + " HTTP/1.1\r\nHost: " + host + ":" +
             std::to_string(o.port) + "\r\n";
  if (!o.body.empty() || method == "POST" || method == "PUT") {
    if (!has_type && !o.body.empty()) request_ += "Content-Type: application/json\r\n";
    request_ += "Content-Length: " + std::to_string(o.body.size()) + "\r\n";
  }
  for (const auto& h : o.headers) request_ += h + "\r\n";
  request_ += "\r\n" + o.body;

  if (o.host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr_);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(o.port);
    inet_pton(AF_INET6, o.host.c_str(), &a6->sin6_addr);
    addr_len_ = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr_);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(o.port);
    inet_pton(AF_INET, o.host.c_str(), &a4->sin_addr);
    addr_len_ = sizeof(sockaddr_in);
  }
}

void HttpLoadThread::run() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  for (uint32_t i = 0; i < conns_.size(); ++i) connect(i);
  epoll_event events[kMaxEvents];
  bool have_pwait2 = true;
  while (true) {
    int64_t now = nowNs();
    if (now >= timeline_.end) break;
    if (down_ > 0) retryDown(now);
    if (open_loop_) enqueueDue(now);
    int64_t wait_ns = std::max<int64_t>(0, nextWake() - now);
    int n;
    if (have_pwait2) {
      timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), wait_ns % 1'000'000'000};
      n = epoll_pwait2(epoll_fd_, events, kMaxEvents, &ts, nullptr);
      if (n < 0 && errno == ENOSYS) {
        have_pwait2 = false;
        continue;
      }
    } else {
      n = epoll_wait(epoll_fd_, events, kMaxEvents,
                     static_cast<int>((wait_ns + 999'999) / 1'000'000));
    }
    for (int i = 0; i < n; ++i) onEvent(events[i].data.u32, events[i].events);
  }
  stats_.unfinished += pending_.size();
  for (Conn& c : conns_) {
    if (c.state == State::kWriting || c.state == State::kReading) ++stats_.unfinished;
    if (c.fd >= 0) close(c.fd);
  }
  close(epoll_fd_);
}

int64_t HttpLoadThread::nextWake() const {
  int64_t wake = timeline_.end;
  if (open_loop_) wake = std::min(wake, nextSendAt());
  if (down_ > 0) {
    for (const Conn& c : conns_) {
      if (c.state == State::kDown) wake = std::min(wake, c.retry_at);
    }
  }
  return wake;
}

void HttpLoadThread::enqueueDue(int64_t now) {
  for (int64_t due = nextSendAt(); due <= now && due < timeline_.end; due = nextSendAt()) {
    pending_.push_back(due);
    ++sent_;
  }
  while (!pending_.empty() && !idle_.empty()) {
    uint32_t index = idle_.back();
    idle_.pop_back();
    send(index, pending_.front());
    pending_.pop_front();
  }
}

void HttpLoadThread::retryDown(int64_t now) {
  for (uint32_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i].state == State::kDown && conns_[i].retry_at <= now) {
      --down_;
      connect(i);
    }
  }
}

void HttpLoadThread::connect(uint32_t index) {
  Conn& c = conns_[index];
  c.fd = socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) {
    c.state = State::kConnecting;
    fail(index, errnoKind("socket", errno));
    return;
  }
  int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  c.state = State::kConnecting;
  c.want_out = true;
  epoll_event ev{EPOLLIN | EPOLLOUT, {}};
  ev.data.u32 = index;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
  if (::connect(c.fd, reinterpret_cast<sockaddr*>(&addr_), addr_len_) == 0) {
    onConnected(index);
  } else if (errno != EINPROGRESS) {
    fail(index, errnoKind("connect", errno));
  }
}

void HttpLoadThread::onConnected(uint32_t index) {
  Conn& c = conns_[index];
  setEvents(c, false);
  c.in_len = 0;
  becomeIdle(index, nowNs());
}

void HttpLoadThread::becomeIdle(uint32_t index, int64_t now) {
  conns_[index].state = State::kIdle;
  if (now >= timeline_.end) return;
  if (!open_loop_) {
    send(index, now);
  } else if (!pending_.empty()) {
    int64_t due = pending_.front();
    pending_.pop_front();
    send(index, due);
  } else {
    idle_.push_back(index);
  }
}

void HttpLoadThread::setEvents(Conn& c, bool want_out) {
  if (c.want_out == want_out) return;
  c.want_out = want_out;
  epoll_event ev{EPOLLIN | (want_out ? EPOLLOUT : 0u), {}};
  ev.data.u32 = static_cast<uint32_t>(&c - conns_.data());
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpLoadThread::onEvent(uint32_t index, uint32_t events) {
  Conn& c = conns_[index];
  if (c.state == State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      fail(index, errnoKind("connect", err));
    } else if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
      onConnected(index);
    }
    return;
  }
  if ((events & EPOLLOUT) && c.state == State::kWriting) writeMore(c);
  if (c.fd >= 0 && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) readSome(index);
}

void HttpLoadThread::send(uint32_t index, int64_t intended) {
  Conn& c = conns_[index];
  if (open_loop_) {
    int64_t now = nowNs();
    if (timeline_.counts(now)) stats_.send_lag.record((now - intended) / 1000);
  }
  c.intended = intended;
  c.written = 0;
  c.framing = Framing{};
  c.state = State::kWriting;
  writeMore(c);
}

void HttpLoadThread::writeMore(Conn& c) {
  while (c.written < request_.size()) {
    ssize_t n = ::send(c.fd, request_.data() + c.written, request_.size() - c.written,
                       MSG_NOSIGNAL);
    if (n > 0) {
      c.written += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      setEvents(c, true);
      return;
    } else {
      fail(static_cast<uint32_t>(&c - conns_.data()),
           errno == EPIPE || errno == ECONNRESET ? "conn_reset" : errnoKind("write", errno));
      return;
    }
  }
  setEvents(c, false);
  c.state = State::kReading;
}

void HttpLoadThread::readSome(uint32_t index) {
  Conn& c = conns_[index];
  if (c.in.size() - c.in_len < kMinReadRoom) c.in.resize(std::max(c.in.size() * 2, 4 * kMinReadRoom));
  ssize_t n = recv(c.fd, c.in.data() + c.in_len, c.in.size() - c.in_len, 0);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    fail(index, errno == ECONNRESET ? "conn_reset" : errnoKind("read", errno));
    return;
  }
  if (n == 0) {
    if (c.state == State::kReading && c.framing.until_close && c.framing.head_end > 0) {
      c.framing.close = true;
      complete(index, c.in_len);
    } else if (c.state == State::kIdle) {  // keep-alive timeout: not a request's failure
      close(c.fd);
      c.fd = -1;
      idle_.erase(std::remove(idle_.begin(), idle_.end(), index), idle_.end());
      connect(index);
    } else {
      fail(index, "conn_eof");
    }
    return;
  }
  c.in_len += static_cast<size_t>(n);
  if (c.state != State::kWriting && c.state != State::kReading) {
    fail(index, "unexpected_data");
    return;
  }
  size_t total = 0;
  switch (parse(c, &total)) {
    case Parse::kIncomplete:
      return;
    case Parse::kInvalid:
      fail(index, "bad_response");
      return;
    case Parse::kComplete:
      complete(index, total);
      return;
  }
}

Parse HttpLoadThread::parse(Conn& c, size_t* total) {
  Framing& f = c.framing;
  std::string_view in(c.in.data(), c.in_len);
  if (f.head_end == 0) {
    size_t pos = in.find("\r\n\r\n", f.scanned >= 3 ? f.scanned - 3 : 0);
    if (pos == std::string_view::npos) {
      f.scanned = in.size();
      return in.size() > kMaxHeaderBytes ? Parse::kInvalid : Parse::kIncomplete;
    }
    if (!parseHead(in.substr(0, pos), &f)) return Parse::kInvalid;
    f.head_end = pos + 4;
    f.chunk_pos = f.head_end;
  }
  if (f.chunked) return parseChunks(in, &f, total);
  if (f.until_close || in.size() < f.head_end + f.content_length) return Parse::kIncomplete;
  *total = f.head_end + f.content_length;
  return Parse::kComplete;
}

void HttpLoadThread::complete(uint32_t index, size_t total) {
  Conn& c = conns_[index];
  int64_t now = nowNs();
  if (c.state == State::kWriting) {
    // Answered before the request was written whole: the rest would be read as the
    // next request, so this connection cannot be reused.
    c.framing.close = true;
  }
  if (timeline_.counts(now)) {
    if (c.framing.status == 200) {
      ++stats_.ok;
      stats_.latency.record((now - c.intended) / 1000);
      stats_.bytes_sent += request_.size();
      stats_.bytes_received += total;
      if (stats_.response_bytes == 0) stats_.response_bytes = total - c.framing.head_end;
    } else {
      stats_.error("http_" + std::to_string(c.framing.status));
    }
  }
  if (c.framing.close) {
    close(c.fd);
    c.fd = -1;
    c.state = State::kDown;
    connect(index);
    return;
  }
  c.in_len -= total;
  if (c.in_len > 0) std::memmove(c.in.data(), c.in.data() + total, c.in_len);
  becomeIdle(index, now);
}

void HttpLoadThread::fail(uint32_t index, const std::string& kind) {
  Conn& c = conns_[index];
  int64_t now = nowNs();
  if (timeline_.counts(now)) stats_.error(kind);
  if (c.state == State::kIdle) {
    idle_.erase(std::remove(idle_.begin(), idle_.end(), index), idle_.end());
  }
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  c.want_out = false;
  c.in_len = 0;
  c.state = State::kDown;
  c.retry_at = now + kReconnectDelayNs;
  ++down_;
}

}  // namespace

void runHttpThread(const Options& options, int connections, double rate, int64_t phase_ns,
                   const Timeline& timeline, Stats* stats) {
  HttpLoadThread thread(options, connections, rate, phase_ns, timeline, stats);
  thread.run();
}

}  // namespace infergate::bench
