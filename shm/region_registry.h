#pragma once

// The gateway's table of registered shared-memory regions: one name space for system and
// CUDA regions (as in Triton), shared by both frontends and every worker thread.
//
// Security (the policy comes from the config's `shm:` section and may change on reload;
// regions already registered stay):
//   - registration is refused (UNIMPLEMENTED) unless the policy enables it; status works
//     and lists nothing then;
//   - a system key must start with one of the allowed prefixes (compared with leading
//     slashes removed on both sides, as glibc names the object under /dev/shm); Triton's
//     own `triton_python_backend_shm_region` prefix is refused whatever the list says, as
//     are a key of only slashes and a key with a '/' after its leading slashes;
//   - the object must exist and be big enough (SystemRegion::open); CUDA needs a GPU;
//   - at most `max_regions` regions at once (RESOURCE_EXHAUSTED past it).
//
// Errors and codes follow Triton's (PROTOCOL.md 3 and 8): duplicate name ALREADY_EXISTS;
// unknown name in status NOT_FOUND; unknown name in unregister succeeds silently; a
// name registered as the other kind counts as unknown for status and unregister of this
// kind; find() of an unknown name NOT_FOUND "Unable to find shared memory region: 'x'".
//
// Threads: every member is safe to call from any thread (one mutex; find() copies a
// shared_ptr under it and nothing slow runs under it: regions are opened before the lock
// is taken and destroyed after it is released).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/status.h"
#include "shm/region.h"

namespace infergate::shm {

struct RegistryPolicy {
  bool enabled = false;
  std::vector<std::string> allowed_key_prefixes;  // empty: no system key is allowed
  bool cuda = true;                               // CUDA registration (still needs a GPU)
  uint32_t max_regions = 1024;
  // Keys of the gateway's own objects (the handoff pools' prefixes): refused whatever the
  // allowed prefixes say, or a client could register a pool and read other requests'
  // tensors through it.
  std::vector<std::string> reserved_key_prefixes;
};

// One row of a status answer.
struct RegionStatus {
  std::string name;
  RegionKind kind = RegionKind::kSystem;
  std::string key;         // system
  uint64_t offset = 0;     // system
  int64_t device_id = 0;   // cuda
  uint64_t byte_size = 0;
};

class RegionRegistry {
 public:
  explicit RegionRegistry(RegistryPolicy policy = {});

  void setPolicy(RegistryPolicy policy);
  RegistryPolicy policy() const;
  // policy().enabled, without copying the policy: asked on every request that names a region.
  bool enabled() const;

  codecs::Status registerSystem(std::string_view name, std::string_view key, uint64_t offset,
                                uint64_t byte_size);
  codecs::Status registerCuda(std::string_view name, std::string_view raw_handle,
                              int64_t device_id, uint64_t byte_size);

  // One region of `kind` by name (unknown: OK), or every region of `kind`.
  codecs::Status unregister(RegionKind kind, std::string_view name);
  codecs::Status unregisterAll(RegionKind kind);

  // Every region of `kind` sorted by name, or only `name` (NOT_FOUND "Unable to find
  // system shared memory region: 'x'" / "... cuda ..." when not registered as `kind`).
  codecs::StatusOr<std::vector<RegionStatus>> status(RegionKind kind,
                                                     std::optional<std::string_view> name) const;

  codecs::StatusOr<std::shared_ptr<const Region>> find(std::string_view name) const;

  size_t size() const;

  // Called (outside the lock) with each region that leaves the table by unregister, so the
  // handoff can unregister its pass-through copies at upstreams.
  void setOnUnregister(std::function<void(const std::shared_ptr<const Region>&)> callback);

 private:
  codecs::Status admit(std::string_view name, std::shared_ptr<const Region> region);

  mutable std::mutex mu_;
  RegistryPolicy policy_;
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> regions_;
  std::function<void(const std::shared_ptr<const Region>&)> on_unregister_;
};

// The key rules above, alone (the handoff uses them to decide whether an upstream can
// open a client's key): OK or INVALID_ARGUMENT naming the rule the key breaks.
codecs::Status checkSystemKey(std::string_view key, const std::vector<std::string>& allowed_prefixes,
                              const std::vector<std::string>& reserved_prefixes = {});

}  // namespace infergate::shm
