#include "gateway/upstream/endpoint_handoff.h"

#include "gateway/telemetry/log.h"

#include <unistd.h>


namespace infergate::gateway::upstream {
namespace {

std::atomic<uint64_t> next_endpoint_number{0};

// Unique per process, endpoint (two upstreams of one gateway may name the same server) and
// registration.
std::string regionNameAtUpstream(uint64_t endpoint_number, uint64_t serial) {
  return "infergate_r" + shm::HandoffPool::processTag() + "_" + std::to_string(endpoint_number) +
         "_" + std::to_string(serial);
}

}  // namespace

EndpointHandoff::EndpointHandoff(const config::UpstreamConfig& upstream, std::string endpoint_key)
    : config_(upstream.handoff),
      upstream_name_(upstream.name),
      endpoint_key_(std::move(endpoint_key)),
      number_(next_endpoint_number.fetch_add(1)) {
  if (config_.pool_bytes == 0) return;
  shm::HandoffPool::Options options;
  options.kind = config_.kind == config::HandoffConfig::Kind::kCuda ? shm::RegionKind::kCuda
                                                                   : shm::RegionKind::kSystem;
  options.byte_size = config_.pool_bytes;
  options.key_prefix = config_.key_prefix;
  options.device = config_.device;
  if (options.kind == shm::RegionKind::kSystem) {
    // A gateway killed before it could remove its pool (an OOM kill, a container restart:
    // the pod's /dev/shm outlives both) leaves the memory taken until someone frees it.
    if (size_t removed = shm::HandoffPool::removeStale(options.key_prefix)) {
      telemetry::logEvent(telemetry::Level::kInfo, "handoff_stale_pools_removed",
                          {{"upstream", upstream_name_}, {"key_prefix", options.key_prefix},
                           {"count", static_cast<int64_t>(removed)}});
    }
  }
  codecs::StatusOr<std::shared_ptr<shm::HandoffPool>> pool = shm::HandoffPool::create(options);
  if (!pool.ok()) {
    telemetry::logEvent(telemetry::Level::kWarning, "handoff_pool_unavailable",
                        {{"upstream", upstream_name_}, {"endpoint", endpoint_key_},
                         {"error", codecs::messageOf(pool.status())},
                         {"effect", "large tensors go inline"}});
    return;
  }
  pool_ = std::move(*pool);
  pool_name_ = "infergate_pool_" + shm::HandoffPool::processTag() + "_" + std::to_string(number_);
}

EndpointHandoff::~EndpointHandoff() = default;

std::shared_ptr<shm::HandoffPool> EndpointHandoff::readyPool() const {
  if (refused()) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  return pool_state_ == State::kReady ? pool_ : nullptr;
}

std::optional<std::string> EndpointHandoff::passthroughName(
    const std::shared_ptr<const shm::Region>& region) {
  if (!config_.passthrough || refused()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  Passthrough& p = regions_[region->serial()];
  if (p.state == State::kReady) return p.name;
  if (p.name.empty()) {
    p.name = regionNameAtUpstream(number_, region->serial());
    p.kind = region->kind();
    p.region = region;
  }
  return std::nullopt;  // kUnregistered: takeWork() sends it; kFailed: inline for good
}

std::optional<uint64_t> EndpointHandoff::outputSize(const std::string& model,
                                                    const std::string& output) const {
  std::lock_guard<std::mutex> lock(sizes_mu_);
  auto m = output_sizes_.find(model);
  if (m == output_sizes_.end()) return std::nullopt;
  auto o = m->second.find(output);
  if (o == m->second.end()) return std::nullopt;
  return o->second;
}

std::vector<std::string> EndpointHandoff::outputsOf(const std::string& model) const {
  std::lock_guard<std::mutex> lock(sizes_mu_);
  auto m = all_outputs_.find(model);
  return m == all_outputs_.end() ? std::vector<std::string>() : m->second;
}

void EndpointHandoff::learnOutputsOf(const std::string& model, std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(sizes_mu_);
  all_outputs_[model] = std::move(names);
}

void EndpointHandoff::learnOutputSize(const std::string& model, const std::string& output,
                                      uint64_t bytes) {
  std::lock_guard<std::mutex> lock(sizes_mu_);
  output_sizes_[model][output] = bytes;
}

void EndpointHandoff::lostRegistrations() { endpointDown(); }

std::vector<EndpointHandoff::Work> EndpointHandoff::takeWork() {
  std::vector<Work> work;
  if (refused()) return work;
  std::lock_guard<std::mutex> lock(mu_);
  if (pool_ && pool_state_ == State::kUnregistered) {
    Work w{Work::Kind::kRegisterPool, pool_name_};
    w.region_kind = pool_->kind();
    w.key = pool_->key();
    w.byte_size = pool_->byteSize();
    w.device = pool_->device();
    if (const uint8_t* handle = pool_->cudaHandle()) {
      w.cuda_handle.assign(reinterpret_cast<const char*>(handle), shm::kCudaIpcHandleBytes);
    }
    work.push_back(std::move(w));
    pool_state_ = State::kRegistering;
  }
  for (auto it = regions_.begin(); it != regions_.end();) {
    Passthrough& p = it->second;
    std::shared_ptr<const shm::Region> region = p.region.lock();
    if (!region) {  // the client's region is gone at the gateway
      if (p.state == State::kReady) unregister_queue_.push_back(unregisterWork(p.name, it->first, p.kind));
      it = regions_.erase(it);
      continue;
    }
    if (p.state == State::kUnregistered) {
      Work w{Work::Kind::kRegisterRegion, p.name};
      w.serial = it->first;
      w.byte_size = region->byteSize();
      if (const auto* system = dynamic_cast<const shm::SystemRegion*>(region.get())) {
        w.key = system->key();
        w.offset = system->offset();
      } else if (const auto* cuda = dynamic_cast<const shm::CudaRegion*>(region.get())) {
        w.region_kind = shm::RegionKind::kCuda;
        w.cuda_handle = cuda->rawHandle();
        w.device = cuda->deviceId();
      }
      work.push_back(std::move(w));
      p.state = State::kRegistering;
    }
    ++it;
  }
  for (Work& w : unregister_queue_) work.push_back(std::move(w));
  unregister_queue_.clear();
  return work;
}

void EndpointHandoff::refuse(const std::string& error) {
  if (refused_.exchange(true)) return;
  telemetry::logEvent(telemetry::Level::kWarning, "handoff_refused",
                      {{"upstream", upstream_name_}, {"endpoint", endpoint_key_}, {"error", error},
                       {"hint", "Triton needs --allow-client-shm=true for the shared-memory "
                                "handoff; forwarding inline to this endpoint from now on"}});
}

void EndpointHandoff::poolRegistered(bool ok, bool refused, const std::string& error) {
  if (refused) refuse(error);
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    pool_state_ = State::kReady;
    ++counters_.pool_registrations;
    return;
  }
  ++counters_.refusals;
  // Tried again on the registrar's next rounds (the upstream may come up later), unless
  // client shared memory is refused outright.
  pool_state_ = State::kUnregistered;
  if (!refused && !warned_) {
    warned_ = true;
    telemetry::logEvent(telemetry::Level::kWarning, "handoff_pool_registration_failed",
                        {{"upstream", upstream_name_}, {"endpoint", endpoint_key_},
                         {"error", error}, {"effect", "retrying"}});
  }
}

EndpointHandoff::Work EndpointHandoff::unregisterWork(std::string name, uint64_t serial,
                                                     shm::RegionKind kind) {
  Work w{Work::Kind::kUnregisterRegion, std::move(name)};
  w.serial = serial;
  w.region_kind = kind;
  return w;
}

void EndpointHandoff::regionRegistered(uint64_t serial, bool ok, bool refused,
                                       const std::string& error, shm::RegionKind kind) {
  // UNIMPLEMENTED to a CUDA region says the upstream has no usable GPU (infergate and a
  // CPU-only Triton answer so), not that it refuses client shared memory: only that region
  // goes inline (kFailed below); the pool and system regions keep going by reference.
  if (refused && kind == shm::RegionKind::kSystem) refuse(error);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(serial);
  if (ok) ++counters_.region_registrations;
  if (!ok) ++counters_.refusals;
  if (it == regions_.end()) {
    // Unregistered at the gateway meanwhile: take the copy back at the upstream too.
    if (ok) unregister_queue_.push_back(unregisterWork(regionNameAtUpstream(number_, serial), serial, kind));
    return;
  }
  // A region the upstream cannot open (another /dev/shm, permissions) stays inline.
  it->second.state = ok ? State::kReady : State::kFailed;
}

void EndpointHandoff::regionUnregistered(uint64_t) {}

void EndpointHandoff::endpointDown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pool_state_ == State::kReady) pool_state_ = State::kUnregistered;
  for (auto& [serial, p] : regions_) {
    if (p.state == State::kReady) p.state = State::kUnregistered;
  }
}

void EndpointHandoff::clientUnregistered(const shm::Region& region) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(region.serial());
  if (it == regions_.end()) return;
  if (it->second.state == State::kReady || it->second.state == State::kRegistering) {
    unregister_queue_.push_back(unregisterWork(it->second.name, region.serial(), it->second.kind));
  }
  regions_.erase(it);
}

EndpointHandoff::Counters EndpointHandoff::counters() const {
  Counters c;
  std::shared_ptr<shm::HandoffPool> pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = counters_;
    c.pool_ready = pool_state_ == State::kReady;
    pool = pool_;
  }
  if (pool) {  // the pool's own lock, not ours: slots are freed without taking mu_
    c.pool_bytes = pool->byteSize();
    c.pool_bytes_in_use = pool->bytesInUse();
    c.pool_slots_in_use = pool->slotsInUse();
  }
  c.refused = refused();
  c.pool_bytes_in = pool_bytes_in_.load(std::memory_order_relaxed);
  c.pool_bytes_in_place = pool_bytes_in_place_.load(std::memory_order_relaxed);
  c.pool_bytes_out = pool_bytes_out_.load(std::memory_order_relaxed);
  c.passthrough_bytes = passthrough_bytes_.load(std::memory_order_relaxed);
  c.inline_bytes = inline_bytes_.load(std::memory_order_relaxed);
  c.pool_full = pool_full_.load(std::memory_order_relaxed);
  c.inline_retries = inline_retries_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace infergate::gateway::upstream
