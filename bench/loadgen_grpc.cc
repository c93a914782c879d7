// loadgen's gRPC client: one thread, one completion queue, up to N unary calls in flight
// through grpc's generic stub. The request is a serialized ModelInferRequest held in one
// ByteBuffer (each call takes a reference, nothing is re-serialized); replies are not
// parsed, except the first one, which is checked to be a ModelInferResponse with outputs.
// Closed and open loop as in loadgen_http.cc. The open loop's sends are timed by a pacer
// thread sleeping on CLOCK_MONOTONIC, because grpc's completion-queue deadlines round up
// to whole milliseconds; slots and the pending queue are shared with it under `mutex_`.

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench/loadgen.h"
#include "grpc_service.pb.h"

namespace infergate::bench {
namespace {

constexpr int64_t kDrainNs = 5'000'000'000;  // wait for cancelled calls at the end

const char* codeName(grpc::StatusCode code) {
  static const char* const kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN_CODE";
}

gpr_timespec deadlineIn(int64_t ns) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_nanos(std::max<int64_t>(ns, 0), GPR_TIMESPAN));
}

class GrpcLoadThread {
 public:
  GrpcLoadThread(const Options& options,
                 const std::vector<std::shared_ptr<grpc::Channel>>& channels, int calls,
                 double rate, int64_t phase_ns, const Timeline& timeline, Stats* stats)
      : options_(options), timeline_(timeline), stats_(*stats), slots_(calls, nullptr),
        open_loop_(rate > 0), interval_ns_(rate > 0 ? 1e9 / rate : 0),
        first_send_(timeline.start + phase_ns) {
    for (const auto& channel : channels) stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    grpc::Slice slice(options.grpc_request);
    request_ = grpc::ByteBuffer(&slice, 1);
    for (int i = calls - 1; i >= 0; --i) free_slots_.push_back(i);
  }
  // False if calls were still outstanding after the drain: the queue cannot be
  // destroyed then, and the caller leaks this object.
  bool run();

 private:
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer reply;
    grpc::Status status;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
    int64_t intended = 0;
    int slot = 0;
  };

  void start(int64_t intended);  // under mutex_
  void finish(Call* call);
  void checkSample(Call* call);
  int64_t nextSendAt() const { return first_send_ + static_cast<int64_t>(sent_ * interval_ns_); }
  void pace();  // the open loop's pacer thread

  const Options& options_;
  const Timeline timeline_;
  Stats& stats_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  size_t next_stub_ = 0;
  grpc::ByteBuffer request_;
  std::mutex mutex_;          // guards what follows, up to open_loop_
  std::vector<Call*> slots_;  // calls in flight, by slot
  std::vector<int> free_slots_;
  int in_flight_ = 0;
  LatencyHistogram send_lag_;
  bool open_loop_;
  double interval_ns_;
  int64_t first_send_;
  uint64_t sent_ = 0;
  std::deque<int64_t> pending_;
};

bool GrpcLoadThread::run() {
  std::thread pacer;
  if (open_loop_) {
    pacer = std::thread([this] { pace(); });
  } else {
    std::lock_guard lock(mutex_);
    int64_t now = nowNs();
    while (!free_slots_.empty()) start(now);
  }
  while (true) {
    int64_t now = nowNs();
    if (now >= timeline_.end) break;
    void* tag = nullptr;
    bool ok = false;
    auto result = cq_.AsyncNext(&tag, &ok, deadlineIn(timeline_.end - now));
    if (result == grpc::CompletionQueue::GOT_EVENT) finish(static_cast<Call*>(tag));
    if (result == grpc::CompletionQueue::SHUTDOWN) break;
  }
  if (pacer.joinable()) pacer.join();
  {
    std::lock_guard lock(mutex_);
    stats_.unfinished += pending_.size() + in_flight_;
    stats_.send_lag.merge(send_lag_);
    for (Call* call : slots_) {
      if (call != nullptr) call->context.TryCancel();
    }
  }
  int64_t drain_until = nowNs() + kDrainNs;
  while (in_flight_ > 0 && nowNs() < drain_until) {
    void* tag = nullptr;
    bool ok = false;
    if (cq_.AsyncNext(&tag, &ok, deadlineIn(drain_until - nowNs())) ==
        grpc::CompletionQueue::GOT_EVENT) {
      finish(static_cast<Call*>(tag));
    }
  }
  if (in_flight_ > 0) return false;
  cq_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
  }
  return true;
}

void GrpcLoadThread::pace() {
  for (int64_t due = nextSendAt(); due < timeline_.end; due = nextSendAt()) {
    timespec at{static_cast<time_t>(due / 1'000'000'000), static_cast<long>(due % 1'000'000'000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
    }
    std::lock_guard lock(mutex_);
    int64_t now = nowNs();
    for (due = nextSendAt(); due <= now && due < timeline_.end; due = nextSendAt()) {
      pending_.push_back(due);
      ++sent_;
    }
    while (!pending_.empty() && !free_slots_.empty()) {
      start(pending_.front());
      pending_.pop_front();
    }
  }
}

void GrpcLoadThread::start(int64_t intended) {
  auto* call = new Call;
  call->intended = intended;
  call->slot = free_slots_.back();
  free_slots_.pop_back();
  slots_[call->slot] = call;
  ++in_flight_;
  if (open_loop_) {
    int64_t now = nowNs();
    if (timeline_.counts(now)) send_lag_.record((now - intended) / 1000);
  }
  grpc::GenericStub& stub = *stubs_[next_stub_++ % stubs_.size()];
  call->reader = stub.PrepareUnaryCall(&call->context, options_.grpc_method, request_, &cq_);
  call->reader->StartCall();
  call->reader->Finish(&call->reply, &call->status, call);
}

void GrpcLoadThread::finish(Call* call) {
  int64_t now = nowNs();
  {
    std::lock_guard lock(mutex_);
    --in_flight_;
    slots_[call->slot] = nullptr;
    free_slots_.push_back(call->slot);
    if (!pending_.empty() && now < timeline_.end) {
      start(pending_.front());
      pending_.pop_front();
    } else if (!open_loop_ && now < timeline_.end) {
      start(now);
    }
  }
  if (timeline_.counts(now)) {
    if (call->status.ok()) {
      ++stats_.ok;
      stats_.latency.record((now - call->intended) / 1000);
      stats_.bytes_sent += options_.grpc_request.size();
      stats_.bytes_received += call->reply.Length();
      if (stats_.response_bytes == 0) checkSample(call);
    } else {
      stats_.error(std::string("grpc_") + codeName(call->status.error_code()));
    }
  }
  delete call;
}

void GrpcLoadThread::checkSample(Call* call) {
  stats_.response_bytes = call->reply.Length();
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (call->reply.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  inference::ModelInferResponse response;
  stats_.sample_check = !response.ParseFromString(bytes) ? "not a ModelInferResponse"
                        : response.outputs_size() == 0
                            ? "no outputs"
                            : "ok: " + std::to_string(response.outputs_size()) + " outputs";
}

}  // namespace

std::vector<std::shared_ptr<grpc::Channel>> connectGrpcChannels(const Options& options) {
  std::string host = options.host.find(':') != std::string::npos ? "[" + options.host + "]"
                                                                  : options.host;
  std::string target = host + ":" + std::to_string(options.port);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.grpc_tls_ca.empty()) {
    std::ifstream in(options.grpc_tls_ca);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in || pem.str().empty()) {
      std::cerr << "loadgen: cannot read " << options.grpc_tls_ca << "\n";
      return {};
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < options.grpc_channels; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per channel
    args.SetInt("infergate.loadgen.channel", i);
    auto channel = grpc::CreateCustomChannel(target, credentials, args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::cerr << "loadgen: cannot connect to grpc://" << target << "\n";
      return {};
    }
    channels.push_back(std::move(channel));
  }
  return channels;
}

void runGrpcThread(const Options& options,
                   const std::vector<std::shared_ptr<grpc::Channel>>& channels, int calls,
                   double rate, int64_t phase_ns, const Timeline& timeline, Stats* stats) {
  auto* thread = new GrpcLoadThread(options, channels, calls, rate, phase_ns, timeline, stats);
  if (thread->run()) delete thread;  // else leaked on purpose: see run()
}

}  // namespace infergate::bench
