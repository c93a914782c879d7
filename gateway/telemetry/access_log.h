#pragma once

// The access log: one line per finished request, JSON or text, appended to a file or
// written to standard output. Fields: time (when the request finished), request id,
// client address, protocol, method / endpoint, model, version, route, upstream, upstream
// endpoint, status (HTTP status or gRPC code), bytes in and out, durations in
// microseconds (total, upstream, queue), whether the shared-memory handoff was used, and
// the trace id when the request carried a valid traceparent.
//
//   {"time":"2026-11-22T10:00:00.123456Z","request_id":"r-17","client":"127.0.0.1:53122",
//    "protocol":"http","endpoint":"infer","model":"simple","version":"","route":"routes[0]",
//    "upstream":"triton","upstream_endpoint":"127.0.0.1:8001","status":"200",
//    "bytes_in":312,"bytes_out":228,"total_us":412,"upstream_us":297,"queue_us":0,
//    "shm_handoff":false,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}
//
// Sampling: `sample_percent` of the successful requests are logged (evenly: exactly that
// many of every hundred a thread finishes); failures always are.
//
// Cost on the request path: the line is formatted on the request's thread into a shared
// buffer (one mutex, held for the append); a writer thread writes the buffer out every
// 100 ms or once it holds 256 KiB. A full buffer (4 MiB: the disk cannot keep up) drops
// lines and counts them (dropped()), so the request path never waits on the disk.
//
// Threads: record() from any thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "codecs/status.h"
#include "config/config.h"
#include "gateway/telemetry/request_info.h"

namespace infergate::gateway::telemetry {

struct AccessEntry {
  const RequestInfo* info = nullptr;
  std::string_view endpoint;  // HTTP endpoint name or gRPC method
  std::string_view target;    // HTTP: the request target (names the model when unrouted)
  int code = 0;               // HTTP status, or gRPC code (by info->protocol)
  // HTTP >= 400, gRPC not OK: never sampled away.
  bool failed() const;
};

class AccessLog {
 public:
  // Opens `config.path` for appending ("-": standard output). Errors: the file cannot be
  // opened (FAILED_PRECONDITION naming it and why).
  static codecs::StatusOr<std::unique_ptr<AccessLog>> open(
      const config::ObservabilityConfig::AccessLog& config);
  ~AccessLog();  // writes out what is buffered
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void record(const AccessEntry& entry);
  // Writes out what is buffered now (tests, shutdown). Any thread.
  void flush();
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  // One entry's line (without the newline), as record() writes it.
  static std::string format(const AccessEntry& entry, bool json);

 private:
  AccessLog(int fd, bool owns_fd, const config::ObservabilityConfig::AccessLog& config);
  bool sampled();
  void run();
  void writeOut(std::string& data);

  const int fd_;
  const bool owns_fd_;
  const bool json_;
  const uint32_t sample_percent_;
  std::atomic<uint64_t> dropped_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  std::string buffer_;       // guarded
  bool stopping_ = false;    // guarded
  std::mutex write_mu_;      // one writeOut at a time
  std::thread writer_;
};

}  // namespace infergate::gateway::telemetry
