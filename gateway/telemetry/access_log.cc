#include "gateway/telemetry/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "codecs/json_writer.h"
#include "gateway/telemetry/request_metrics.h"
#include "gateway/telemetry/text_format.h"

namespace infergate::gateway::telemetry {
namespace {

constexpr size_t kFlushBytes = 256 * 1024;
constexpr size_t kMaxBufferBytes = 4 * 1024 * 1024;
constexpr auto kFlushInterval = std::chrono::milliseconds(100);

int64_t micros(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

std::string nowStamp() { return utcTime(std::chrono::system_clock::now(), true); }

// Text: key=value pairs, separated by blanks.
void textField(std::string& out, std::string_view key, std::string_view value) {
  if (!out.empty()) out += ' ';
  out += key;
  out += '=';
  appendTextValue(out, value);
}

// "404" / "NOT_FOUND": how the entry's answer is named in a line.
std::string statusOf(const AccessEntry& e) {
  if (e.info->protocol == Protocol::kHttp) return std::to_string(e.code);
  return std::string(outcomeLabel(Protocol::kGrpc, grpcOutcome(e.code)));
}

}  // namespace

bool AccessEntry::failed() const {
  return info->protocol == Protocol::kHttp ? code >= 400 || info->cut : code != 0;
}

codecs::StatusOr<std::unique_ptr<AccessLog>> AccessLog::open(
    const config::ObservabilityConfig::AccessLog& config) {
  if (config.path == "-") {
    return std::unique_ptr<AccessLog>(new AccessLog(STDOUT_FILENO, false, config));
  }
  int fd = ::open(config.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::FailedPreconditionError(codecs::strCat(
        "cannot open the access log '", config.path, "': ", std::strerror(errno)));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(fd, true, config));
}

AccessLog::AccessLog(int fd, bool owns_fd, const config::ObservabilityConfig::AccessLog& config)
    : fd_(fd),
      owns_fd_(owns_fd),
      json_(config.format == config::ObservabilityConfig::AccessLog::Format::kJson),
      sample_percent_(config.sample_percent),
      writer_([this] { run(); }) {}

AccessLog::~AccessLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  writer_.join();
  if (owns_fd_) ::close(fd_);
}

bool AccessLog::sampled() {
  if (sample_percent_ >= 100) return true;
  // Evenly: the n-th request of a thread is logged when n * pct / 100 steps up.
  thread_local uint64_t n = 0;
  const uint64_t before = n * sample_percent_ / 100;
  ++n;
  return n * sample_percent_ / 100 != before;
}

std::string AccessLog::format(const AccessEntry& e, bool json) {
  const RequestInfo& info = *e.info;
  const RequestSeries::Labels* labels = info.series ? &info.series->labels() : nullptr;
  const CallStats* call = info.call.get();
  const int64_t total = micros(Clock::now() - info.start);
  std::string out;
  if (json) {
    codecs::JsonWriter w(out);
    w.beginObject().key("time").string(nowStamp());
    w.key("request_id").string(info.request_id);
    w.key("client").string(info.client_address);
    w.key("principal").string(info.principal);
    w.key("protocol").string(protocolName(info.protocol));
    w.key("endpoint").string(e.endpoint);
    if (!labels && !e.target.empty()) w.key("target").string(e.target);
    w.key("model").string(labels ? std::string_view(labels->model) : "");
    w.key("version").string(labels ? std::string_view(labels->version) : "");
    w.key("route").string(labels ? std::string_view(labels->route) : "");
    w.key("upstream").string(labels ? std::string_view(labels->upstream) : "");
    w.key("upstream_endpoint").string(call ? std::string_view(call->endpoint) : "");
    w.key("status").string(statusOf(e));
    w.key("bytes_in").uint64(info.request_bytes).key("bytes_out").uint64(info.response_bytes);
    w.key("total_us").int64(total);
    w.key("upstream_us").int64(call && call->attempts ? micros(call->upstream) : 0);
    w.key("queue_us").int64(call ? micros(call->queue_wait) : 0);
    w.key("shm_handoff").boolean(call && call->shm_handoff);
    if (info.cut) w.key("cut").boolean(true);
    if (info.trace.valid()) w.key("trace_id").string(info.trace.trace_id);
    w.endObject();
    return out;
  }
  textField(out, "time", nowStamp());
  textField(out, "request_id", info.request_id.empty() ? "-" : std::string_view(info.request_id));
  textField(out, "client", info.client_address.empty() ? "-" : std::string_view(info.client_address));
  textField(out, "principal", info.principal.empty() ? "-" : std::string_view(info.principal));
  textField(out, "protocol", protocolName(info.protocol));
  textField(out, "endpoint", e.endpoint);
  if (labels) {
    textField(out, "model", labels->model);
    textField(out, "version", labels->version.empty() ? "-" : std::string_view(labels->version));
    textField(out, "route", labels->route);
    textField(out, "upstream", labels->upstream);
  } else if (!e.target.empty()) {
    textField(out, "target", e.target);
  }
  if (call && !call->endpoint.empty()) textField(out, "upstream_endpoint", call->endpoint);
  textField(out, "status", statusOf(e));
  textField(out, "bytes_in", std::to_string(info.request_bytes));
  textField(out, "bytes_out", std::to_string(info.response_bytes));
  textField(out, "total_us", std::to_string(total));
  if (call && call->attempts) textField(out, "upstream_us", std::to_string(micros(call->upstream)));
  if (call) textField(out, "queue_us", std::to_string(micros(call->queue_wait)));
  textField(out, "shm_handoff", call && call->shm_handoff ? "true" : "false");
  if (info.cut) textField(out, "cut", "true");
  if (info.trace.valid()) textField(out, "trace_id", info.trace.trace_id);
  return out;
}

void AccessLog::record(const AccessEntry& entry) {
  if (!entry.failed() && !sampled()) return;
  std::string line = format(entry, json_);
  line += '\n';
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (buffer_.size() + line.size() > kMaxBufferBytes) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    buffer_ += line;
    wake = buffer_.size() >= kFlushBytes;
  }
  if (wake) wake_.notify_one();
}

void AccessLog::flush() {
  std::string data;
  std::lock_guard<std::mutex> write_lock(write_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    data.swap(buffer_);
  }
  writeOut(data);
}

void AccessLog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(lock, kFlushInterval,
                   [this] { return stopping_ || buffer_.size() >= kFlushBytes; });
    const bool stopping = stopping_;
    lock.unlock();
    flush();
    lock.lock();
    if (stopping && buffer_.empty()) return;
  }
}

void AccessLog::writeOut(std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a full disk or a closed pipe: the lines are lost, the gateway goes on
    done += static_cast<size_t>(n);
  }
}

}  // namespace infergate::gateway::telemetry
