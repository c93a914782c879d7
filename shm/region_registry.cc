// The table of registered regions and the rules a registration must pass (see the header).
// Opening a region (shm_open + mmap, or a CUDA IPC open) and destroying one (munmap, IPC
// close) are slow and may block, so both happen with the mutex released.

#include "shm/region_registry.h"

#include <utility>

namespace infergate::shm {
namespace {

// Triton's python backend names its own regions with this; a client naming one could read
// or corrupt another model's tensors, so it is refused whatever the allowlist says.
constexpr std::string_view kTritonReservedPrefix = "triton_python_backend_shm_region";

std::string_view withoutLeadingSlashes(std::string_view s) {
  size_t first = s.find_first_not_of('/');
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

codecs::Status disabled() {
  return codecs::unimplemented(
      "Client shared memory is disabled. Enable it with `shm.enabled: true` in the gateway's "
      "configuration");
}

codecs::Status alreadyExists(std::string_view name) {
  return absl::AlreadyExistsError(
      codecs::strCat("shared memory region '", name, "' already in manager"));
}

codecs::Status checkName(std::string_view name) {
  if (name.empty()) return codecs::invalidArgument("shared memory region name must not be empty");
  return absl::OkStatus();
}

RegionStatus statusOf(const Region& region) {
  RegionStatus row;
  row.name = region.name();
  row.kind = region.kind();
  row.byte_size = region.byteSize();
  // The concrete classes are final and kind() names which one this is.
  if (region.kind() == RegionKind::kSystem) {
    const auto& system = static_cast<const SystemRegion&>(region);
    row.key = system.key();
    row.offset = system.offset();
  } else {
    row.device_id = static_cast<const CudaRegion&>(region).deviceId();
  }
  return row;
}

}  // namespace

codecs::Status checkSystemKey(std::string_view key,
                              const std::vector<std::string>& allowed_prefixes,
                              const std::vector<std::string>& reserved_prefixes) {
  // glibc names the object after the key's leading slashes; compare what it will open.
  std::string_view object = withoutLeadingSlashes(key);
  if (object.empty()) {
    return codecs::invalidArgument("key '", key, "' names no shared-memory object (it is ",
                                   key.empty() ? "empty" : "only slashes", ")");
  }
  if (object.find('/') != std::string_view::npos) {
    return codecs::invalidArgument("key '", key,
                                   "' has a '/' after its leading slashes (not a POSIX "
                                   "shared-memory object name)");
  }
  if (object.starts_with(kTritonReservedPrefix)) {
    return codecs::invalidArgument("key '", key, "' uses the reserved prefix '",
                                   kTritonReservedPrefix,
                                   "' (Triton's python backend regions are never registered)");
  }
  for (const std::string& prefix : reserved_prefixes) {
    std::string_view reserved = withoutLeadingSlashes(prefix);
    if (!reserved.empty() && object.starts_with(reserved)) {
      return codecs::invalidArgument("key '", key, "' names one of the gateway's own handoff pools ('",
                                     prefix, "...'), which clients cannot register");
    }
  }
  for (const std::string& prefix : allowed_prefixes) {
    if (object.starts_with(withoutLeadingSlashes(prefix))) return absl::OkStatus();
  }
  std::string allowed;
  for (const std::string& prefix : allowed_prefixes) {
    if (!allowed.empty()) allowed += ", ";
    allowed += prefix;
  }
  return codecs::invalidArgument("key '", key, "' is outside the allowed prefixes [", allowed,
                                 "] (shm.allowed_key_prefixes)");
}

RegionRegistry::RegionRegistry(RegistryPolicy policy) : policy_(std::move(policy)) {}

void RegionRegistry::setPolicy(RegistryPolicy policy) {
  std::lock_guard lock(mu_);
  policy_ = std::move(policy);
}

RegistryPolicy RegionRegistry::policy() const {
  std::lock_guard lock(mu_);
  return policy_;
}

bool RegionRegistry::enabled() const {
  std::lock_guard lock(mu_);
  return policy_.enabled;
}

codecs::Status RegionRegistry::registerSystem(std::string_view name, std::string_view key,
                                              uint64_t offset, uint64_t byte_size) {
  RegistryPolicy current = policy();
  if (!current.enabled) return disabled();
  INFERGATE_RETURN_IF_ERROR(checkName(name));
  INFERGATE_RETURN_IF_ERROR(
      checkSystemKey(key, current.allowed_key_prefixes, current.reserved_key_prefixes));
  // A name already taken is answered before mapping anything (Triton's order); admit()
  // asks again under the lock, since another thread may take the name meanwhile.
  {
    std::lock_guard lock(mu_);
    if (regions_.contains(name)) return alreadyExists(name);
  }
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const SystemRegion> region,
                             SystemRegion::open(std::string(name), std::string(key), offset,
                                                byte_size));
  return admit(name, std::move(region));
}

codecs::Status RegionRegistry::registerCuda(std::string_view name, std::string_view raw_handle,
                                            int64_t device_id, uint64_t byte_size) {
  RegistryPolicy current = policy();
  if (!current.enabled) return disabled();
  if (!current.cuda) {
    return codecs::unimplemented(
        "CUDA shared memory is disabled in the gateway's configuration (`shm.cuda: false`)");
  }
  INFERGATE_RETURN_IF_ERROR(checkName(name));
  {
    std::lock_guard lock(mu_);
    if (regions_.contains(name)) return alreadyExists(name);
  }
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const CudaRegion> region,
                             CudaRegion::open(std::string(name), raw_handle, device_id,
                                              byte_size));
  return admit(name, std::move(region));
}

codecs::Status RegionRegistry::admit(std::string_view name,
                                     std::shared_ptr<const Region> region) {
  // On refusal `region` is the last reference: it is unmapped when this function returns,
  // after the lock below is released.
  std::lock_guard lock(mu_);
  // The policy may have been reloaded while the region was being opened.
  if (!policy_.enabled) return disabled();
  if (regions_.contains(name)) return alreadyExists(name);
  if (regions_.size() >= policy_.max_regions) {
    return codecs::resourceExhausted("cannot register shared memory region '", name,
                                     "': the gateway already holds ", regions_.size(),
                                     " regions (shm.max_regions)");
  }
  regions_.emplace(std::string(name), std::move(region));
  return absl::OkStatus();
}

codecs::Status RegionRegistry::unregister(RegionKind kind, std::string_view name) {
  std::shared_ptr<const Region> removed;
  std::function<void(const std::shared_ptr<const Region>&)> callback;
  {
    std::lock_guard lock(mu_);
    if (!policy_.enabled) return disabled();
    auto it = regions_.find(name);
    if (it == regions_.end() || it->second->kind() != kind) return absl::OkStatus();
    removed = std::move(it->second);
    regions_.erase(it);
    callback = on_unregister_;
  }
  if (callback) callback(removed);
  return absl::OkStatus();  // `removed` goes here, unless a request still holds the region
}

codecs::Status RegionRegistry::unregisterAll(RegionKind kind) {
  std::vector<std::shared_ptr<const Region>> removed;
  std::function<void(const std::shared_ptr<const Region>&)> callback;
  {
    std::lock_guard lock(mu_);
    if (!policy_.enabled) return disabled();
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->second->kind() == kind) {
        removed.push_back(std::move(it->second));
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
    callback = on_unregister_;
  }
  if (callback) {
    for (const auto& region : removed) callback(region);
  }
  return absl::OkStatus();
}

codecs::StatusOr<std::vector<RegionStatus>> RegionRegistry::status(
    RegionKind kind, std::optional<std::string_view> name) const {
  std::vector<std::shared_ptr<const Region>> rows;
  {
    std::lock_guard lock(mu_);
    if (name.has_value()) {
      auto it = regions_.find(*name);
      if (it == regions_.end() || it->second->kind() != kind) {
        return absl::NotFoundError(codecs::strCat("Unable to find ", kindName(kind),
                                                  " shared memory region: '", *name, "'"));
      }
      rows.push_back(it->second);
    } else {
      for (const auto& [region_name, region] : regions_) {
        if (region->kind() == kind) rows.push_back(region);
      }
    }
  }
  // The map is ordered by name, so rows already are.
  std::vector<RegionStatus> out;
  out.reserve(rows.size());
  for (const auto& region : rows) out.push_back(statusOf(*region));
  return out;
}

codecs::StatusOr<std::shared_ptr<const Region>> RegionRegistry::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        codecs::strCat("Unable to find shared memory region: '", name, "'"));
  }
  return it->second;
}

size_t RegionRegistry::size() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

void RegionRegistry::setOnUnregister(
    std::function<void(const std::shared_ptr<const Region>&)> callback) {
  std::lock_guard lock(mu_);
  on_unregister_ = std::move(callback);
}

}  // namespace infergate::shm
