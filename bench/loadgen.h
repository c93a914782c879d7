#pragma once

// loadgen: the project's load generator (bench/README.md, "Frontends"). Shared pieces of
// its three files: the options, the run's timeline, the latency histogram and the
// per-thread counters. loadgen.cc parses options and prints the result;
// loadgen_http.cc and loadgen_grpc.cc each drive one event-loop thread.
//
// Threads: main() starts `threads` load threads; each owns its own Stats and touches
// nothing shared but the const Options and Timeline. main() merges the Stats after
// joining them.

#include <time.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace grpc {
class Channel;
}

namespace infergate::bench {

// CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall).
inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

enum class Protocol { kHttp, kGrpc };

struct Options {
  Protocol protocol = Protocol::kHttp;
  std::string host = "127.0.0.1";  // a loopback address, checked by the parser
  uint16_t port = 0;
  // HTTP: the request, sent byte for byte the same on every connection.
  std::string method;  // empty: POST with a body, GET without
  std::string path = "/";
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  // gRPC: a serialized ModelInferRequest, sent through the generic stub unchanged.
  std::string grpc_request;
  std::string grpc_method = "/inference.GRPCInferenceService/ModelInfer";
  int grpc_channels = 1;
  std::string grpc_tls_ca;  // PEM CA bundle: TLS toward the target, verified against it

  int concurrency = 1;  // connections (HTTP) or calls in flight (gRPC)
  double rate = 0;      // requests/s over all threads; 0 = closed loop
  double duration_s = 10;
  double warmup_s = 0;
  int threads = 1;
};

// Absolute CLOCK_MONOTONIC times of one run: load from `start`, counted from
// `measure_from`, nothing sent or counted after `end`.
struct Timeline {
  int64_t start = 0;
  int64_t measure_from = 0;
  int64_t end = 0;
  bool counts(int64_t t) const { return t >= measure_from && t <= end; }
};

// Log-linear latency buckets in microseconds, as HdrHistogram lays them out: exact
// below 2^(kSubBits+1) us, then 2^kSubBits linear sub-buckets per power of two (relative
// error under 1/128 = 0.8%), up to kMaxUs; slower values land in the last bucket and are
// counted as overflow (the exact maximum is kept apart).
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int64_t kMaxUs = 60'000'000;  // 60 s

  LatencyHistogram() : counts_(indexOf(kMaxUs) + 1, 0) {}

  void record(int64_t us);
  void merge(const LatencyHistogram& other);
  // The value at or below which `percent`% of the samples lie: the upper edge of its
  // bucket, never above the exact maximum. 0 when empty.
  int64_t percentile(double percent) const;

  uint64_t count() const { return count_; }
  uint64_t overflow() const { return overflow_; }
  int64_t min() const { return count_ ? min_ : 0; }
  int64_t max() const { return max_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0; }

  static size_t indexOf(int64_t us);
  static int64_t upperEdge(size_t index);

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t overflow_ = 0;
  int64_t min_ = INT64_MAX;
  int64_t max_ = 0;
  int64_t sum_ = 0;
};

// What one load thread saw inside the measured window (errors of every kind, the first
// response's size, what was still outstanding when the window closed).
struct Stats {
  LatencyHistogram latency;  // successful requests only, from intended send time
  LatencyHistogram send_lag;  // open loop: how late each request went out
  uint64_t ok = 0;
  uint64_t errors = 0;
  std::map<std::string, uint64_t> error_kinds;  // "http_503", "grpc_UNAVAILABLE", "conn_reset"
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t response_bytes = 0;  // size of the first successful response (body / message)
  uint64_t unfinished = 0;      // sent but unanswered, or due but unsent, at `end`
  std::string sample_check;     // what the first response's check found (gRPC)

  void error(const std::string& kind) {
    ++errors;
    ++error_kinds[kind];
  }
  void merge(const Stats& other);
};

// One HTTP/1.1 load thread: `connections` keep-alive connections on its own epoll loop.
// `rate` is this thread's share (0 = closed loop); its first send is due at
// timeline.start + phase_ns. Returns at timeline.end.
void runHttpThread(const Options& options, int connections, double rate, int64_t phase_ns,
                   const Timeline& timeline, Stats* stats);

// One gRPC load thread: up to `calls` ModelInfer calls in flight on its own completion
// queue, spread over `channels`. Same rate and timeline contract as runHttpThread.
void runGrpcThread(const Options& options,
                   const std::vector<std::shared_ptr<grpc::Channel>>& channels, int calls,
                   double rate, int64_t phase_ns, const Timeline& timeline, Stats* stats);

// Opens `options.grpc_channels` distinct connections and waits (up to 10 s) until each is
// ready; an empty vector and a message on stderr when one is not.
std::vector<std::shared_ptr<grpc::Channel>> connectGrpcChannels(const Options& options);

}  // namespace infergate::bench
