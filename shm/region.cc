// Registered regions: the Region base, system regions (a client's POSIX shm object mapped
// here), the one bounds check for tensor references, and Buffers viewing a mapping.
// CudaRegion lives in cuda_region.cc.

#include "shm/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

#include "shm/region_internal.h"

namespace infergate::shm {
namespace {

std::atomic<uint64_t> next_serial{1};

std::string errnoText(int error) { return std::system_category().message(error); }

// Closes the descriptor on every failed exit of SystemRegion::open; the region keeps it.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

codecs::Status internal::checkRange(const Region& region, uint64_t offset, uint64_t size) {
  if (!rangeInside(offset, size, region.byteSize())) {
    return codecs::invalidArgument("range [", offset, ", ", offset, " + ", size, ") is outside ",
                                   kindName(region.kind()), " shared memory region '",
                                   region.name(), "' of ", region.byteSize(), " bytes");
  }
  return absl::OkStatus();
}

std::string_view kindName(RegionKind kind) {
  return kind == RegionKind::kCuda ? "cuda" : "system";
}

Region::Region(std::string name, RegionKind kind, uint64_t byte_size)
    : name_(std::move(name)),
      kind_(kind),
      byte_size_(byte_size),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)) {}

codecs::StatusOr<std::shared_ptr<const SystemRegion>> SystemRegion::open(std::string name,
                                                                         std::string key,
                                                                         uint64_t offset,
                                                                         uint64_t byte_size) {
  auto refuse = [&](const auto&... why) {
    return codecs::invalidArgument("Unable to register system shared memory region '", name,
                                   "' (key '", key, "'): ", why...);
  };
  if (byte_size == 0) return refuse("byte_size must be greater than 0");
  if (offset > std::numeric_limits<uint64_t>::max() - byte_size) {
    return refuse("offset ", offset, " + byte_size ", byte_size, " overflows");
  }
  // O_RDWR only: the client creates the object; the gateway never creates one in its name.
  int fd = ::shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return refuse("shm_open failed: ", errnoText(errno));
  FdCloser closer(fd);

  struct stat st;
  if (::fstat(fd, &st) != 0) return refuse("fstat failed: ", errnoText(errno));
  if (!S_ISREG(st.st_mode)) return refuse("not a regular shared-memory object");
  uint64_t object_size = st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
  if (offset + byte_size > object_size) {
    return refuse("offset ", offset, " + byte_size ", byte_size, " exceeds the object's ",
                  object_size, " bytes");
  }

  // mmap wants a page-aligned file offset: map from the page boundary below `offset` and
  // point data_ past the difference. offset + byte_size fits in the object, so in off_t.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t aligned = offset - offset % page;
  const uint64_t lead = offset - aligned;
  const size_t mapping_size = static_cast<size_t>(lead + byte_size);
  void* mapping = ::mmap(nullptr, mapping_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                         static_cast<off_t>(aligned));
  if (mapping == MAP_FAILED) return refuse("mmap failed: ", errnoText(errno));
  uint8_t* data = static_cast<uint8_t*>(mapping) + lead;
  return std::make_shared<SystemRegion>(std::move(name), std::move(key), offset, byte_size,
                                        closer.release(), mapping, mapping_size, data);
}

SystemRegion::SystemRegion(std::string name, std::string key, uint64_t offset,
                           uint64_t byte_size, int fd, void* mapping, size_t mapping_size,
                           uint8_t* data)
    : Region(std::move(name), RegionKind::kSystem, byte_size),
      key_(std::move(key)),
      offset_(offset),
      fd_(fd),
      mapping_(mapping),
      mapping_size_(mapping_size),
      data_(data) {}

SystemRegion::~SystemRegion() {
  ::munmap(mapping_, mapping_size_);
  ::close(fd_);
}

codecs::Status SystemRegion::stillBacked() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    return absl::FailedPreconditionError(codecs::strCat(
        "system shared memory region '", name(), "': fstat of key '", key_,
        "' failed: ", errnoText(errno)));
  }
  const uint64_t object_size = st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
  if (object_size < offset_ + byteSize()) {  // no overflow: checked at registration
    return absl::FailedPreconditionError(codecs::strCat(
        "system shared memory region '", name(), "': the object of key '", key_, "' shrank to ",
        object_size, " bytes, below the registered offset ", offset_, " + byte_size ",
        byteSize(), "; register the region again"));
  }
  return absl::OkStatus();
}

codecs::Status SystemRegion::read(uint64_t offset, std::span<uint8_t> dst) const {
  if (codecs::Status s = internal::checkRange(*this, offset, dst.size()); !s.ok()) return s;
  if (!dst.empty()) std::memcpy(dst.data(), data_ + offset, dst.size());
  return absl::OkStatus();
}

codecs::Status SystemRegion::write(uint64_t offset, std::span<const uint8_t> src) const {
  if (codecs::Status s = internal::checkRange(*this, offset, src.size()); !s.ok()) return s;
  // memmove: an output may alias an input in the same region (identity models answer
  // with their input's bytes).
  if (!src.empty()) std::memmove(data_ + offset, src.data(), src.size());
  return absl::OkStatus();
}

codecs::Status checkReference(const Region& region, uint64_t offset, uint64_t byte_size) {
  if (offset >= region.byteSize()) {
    return codecs::invalidArgument("Invalid offset for shared memory region: '", region.name(),
                                   "' (offset ", offset, ", region byte_size ",
                                   region.byteSize(), ")");
  }
  if (byte_size > region.byteSize() - offset) {
    return codecs::invalidArgument("Invalid offset + byte size for shared memory region: '",
                                   region.name(), "' (offset ", offset, " + byte_size ",
                                   byte_size, " > region byte_size ", region.byteSize(), ")");
  }
  return absl::OkStatus();
}

codecs::Buffer viewOf(std::shared_ptr<const Region> region, uint64_t offset, uint64_t size) {
  // A CUDA region has no host bytes, and an unchecked range must not become a view: both
  // are caller bugs, answered with an empty Buffer rather than a pointer outside the map.
  if (region == nullptr || region->hostData() == nullptr ||
      !internal::checkRange(*region, offset, size).ok()) {
    return codecs::Buffer();
  }
  const uint8_t* data = region->hostData() + offset;
  return codecs::Buffer(std::shared_ptr<const void>(std::move(region)), data,
                        static_cast<size_t>(size));
}

}  // namespace infergate::shm
