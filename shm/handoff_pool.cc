// The handoff pool (see the header): shared memory the gateway owns, cut into slots with a
// first-fit allocator over an ordered free list.

#include "shm/handoff_pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <system_error>
#include <utility>

#include "shm/cuda_probe.h"
#include "shm/region_internal.h"

namespace infergate::shm {
namespace {

// Slots start on 64-byte boundaries (a cache line, and enough for any tensor element type
// and for vectorised copies on the upstream's side).
constexpr uint64_t kSlotAlignment = 64;

std::atomic<uint64_t> next_pool_number{0};

std::string errnoText(int error) { return std::system_category().message(error); }

struct SystemObject {
  uint8_t* data;
  int fd;  // open and flocked (LOCK_EX) for the pool's life
};

// Creates, locks, sizes and maps a new POSIX shm object; on failure nothing is left behind.
codecs::StatusOr<SystemObject> createSystemObject(const std::string& key, uint64_t byte_size) {
  if (byte_size > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return codecs::invalidArgument("handoff pool of ", byte_size, " bytes is too large");
  }
  // O_EXCL: the name embeds our process tag and a counter, so an existing object is
  // someone else's and must not be taken over.
  int fd = ::shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return codecs::internalError("handoff pool: shm_open('", key,
                                 "', O_CREAT|O_EXCL) failed: ", errnoText(errno));
  }
  auto fail = [&](const char* call) {
    codecs::Status status =
        codecs::internalError("handoff pool '", key, "': ", call, " failed: ", errnoText(errno));
    ::close(fd);
    ::shm_unlink(key.c_str());
    return status;
  };
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return fail("flock");
  if (::ftruncate(fd, static_cast<off_t>(byte_size)) != 0) return fail("ftruncate");
  void* data = ::mmap(nullptr, static_cast<size_t>(byte_size), PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail("mmap");
  return SystemObject{static_cast<uint8_t*>(data), fd};
}

// Whether `name` (no leading '/') is `<prefix><digits>_<8 hex>_<digits>`.
bool isPoolName(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  auto digits = [&name](size_t min, size_t max, bool hex) {
    size_t n = 0;
    while (n < name.size() && n < max &&
           ((name[n] >= '0' && name[n] <= '9') || (hex && name[n] >= 'a' && name[n] <= 'f'))) {
      ++n;
    }
    if (n < min) return false;
    name.remove_prefix(n);
    return true;
  };
  auto underscore = [&name] {
    if (name.empty() || name.front() != '_') return false;
    name.remove_prefix(1);
    return true;
  };
  return digits(1, 20, false) && underscore() && digits(8, 8, true) && underscore() &&
         digits(1, 20, false) && name.empty();
}

}  // namespace

codecs::StatusOr<std::shared_ptr<HandoffPool>> HandoffPool::create(const Options& options) {
  if (options.byte_size == 0) {
    return codecs::invalidArgument("a handoff pool needs a byte_size greater than 0");
  }
  if (options.kind == RegionKind::kCuda) {
    CudaStatus cuda = probeCuda();
    if (!cuda.usable) {
      return codecs::unimplemented("CUDA handoff pool is not available: ", cuda.detail);
    }
    std::string error;
    std::unique_ptr<CudaDeviceBuffer> buffer =
        CudaDeviceBuffer::create(options.device, options.byte_size, &error);
    if (buffer == nullptr) return codecs::internalError("CUDA handoff pool: ", error);
    return std::make_shared<HandoffPool>(options, std::string(), nullptr, -1, std::move(buffer));
  }
  std::string key = codecs::strCat(options.key_prefix, processTag(), '_',
                                   next_pool_number.fetch_add(1, std::memory_order_relaxed));
  INFERGATE_ASSIGN_OR_RETURN(SystemObject object, createSystemObject(key, options.byte_size));
  return std::make_shared<HandoffPool>(options, std::move(key), object.data, object.fd, nullptr);
}

const std::string& HandoffPool::processTag() {
  static const std::string tag = [] {
    std::random_device entropy;
    const uint32_t word = entropy();
    char hex[9];
    for (int i = 0; i < 8; ++i) hex[i] = "0123456789abcdef"[(word >> (28 - 4 * i)) & 0xf];
    hex[8] = '\0';
    return codecs::strCat(static_cast<int64_t>(::getpid()), '_', hex);
  }();
  return tag;
}

size_t HandoffPool::removeStale(const std::string& key_prefix, std::chrono::seconds min_age) {
  // glibc's shm_open names live in /dev/shm; a prefix is "/" + a name without '/'.
  if (key_prefix.size() < 2 || key_prefix[0] != '/') return 0;
  const std::string_view prefix = std::string_view(key_prefix).substr(1);
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  std::vector<std::string> candidates;
  while (dirent* entry = ::readdir(dir)) {
    if (isPoolName(entry->d_name, prefix)) candidates.push_back(entry->d_name);
  }
  ::closedir(dir);
  size_t removed = 0;
  const time_t now = ::time(nullptr);
  for (const std::string& name : candidates) {
    const std::string key = "/" + name;
    int fd = ::shm_open(key.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) continue;
    struct stat st;
    // Not held by a live pool (its owner keeps LOCK_EX), and not one being created.
    if (::fstat(fd, &st) == 0 && now - st.st_mtime >= min_age.count() &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (::shm_unlink(key.c_str()) == 0) ++removed;
    }
    ::close(fd);  // drops the lock, if taken
  }
  return removed;
}

HandoffPool::HandoffPool(const Options& options, std::string key, uint8_t* data, int fd,
                         std::unique_ptr<CudaDeviceBuffer> device_buffer)
    : options_(options),
      key_(std::move(key)),
      data_(data),
      fd_(fd),
      device_buffer_(std::move(device_buffer)) {
  free_.emplace(0, options_.byte_size);
}

HandoffPool::~HandoffPool() {
  if (data_ != nullptr) {
    ::munmap(data_, static_cast<size_t>(options_.byte_size));
    ::shm_unlink(key_.c_str());
  }
  if (fd_ >= 0) ::close(fd_);
}

const uint8_t* HandoffPool::cudaHandle() const {
  return device_buffer_ != nullptr ? device_buffer_->ipcHandle() : nullptr;
}

std::shared_ptr<HandoffPool::Slot> HandoffPool::allocate(uint64_t size) {
  // An empty tensor has nothing to hand off; anything bigger than the pool never fits.
  if (size == 0 || size > options_.byte_size) return nullptr;
  const uint64_t rounded = (size + (kSlotAlignment - 1)) / kSlotAlignment * kSlotAlignment;
  uint64_t offset = 0;
  uint64_t taken = 0;
  {
    std::lock_guard lock(mu_);
    auto it = free_.begin();
    while (it != free_.end() && it->second < size) ++it;
    if (it == free_.end()) return nullptr;
    // Every free range starts on a boundary; only the one ending at the pool's end may be
    // shorter than a multiple of the alignment, and then the slot takes all of it.
    offset = it->first;
    taken = std::min(rounded, it->second);
    const uint64_t left = it->second - taken;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + taken, left);
    in_use_bytes_ += taken;
    ++in_use_slots_;
  }
  return std::make_shared<Slot>(shared_from_this(), offset, taken);
}

void HandoffPool::release(uint64_t offset, uint64_t size) {
  std::lock_guard lock(mu_);
  uint64_t start = offset;
  uint64_t length = size;
  auto next = free_.lower_bound(offset);
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      start = previous->first;
      length += previous->second;
      free_.erase(previous);
    }
  }
  if (next != free_.end() && offset + size == next->first) {
    length += next->second;
    free_.erase(next);
  }
  free_.emplace(start, length);
  in_use_bytes_ -= size;
  --in_use_slots_;
}

uint64_t HandoffPool::bytesInUse() const {
  std::lock_guard lock(mu_);
  return in_use_bytes_;
}

uint64_t HandoffPool::slotsInUse() const {
  std::lock_guard lock(mu_);
  return in_use_slots_;
}

HandoffPool::Slot::~Slot() { pool_->release(offset_, size_); }

uint8_t* HandoffPool::Slot::data() const {
  return pool_->data_ != nullptr ? pool_->data_ + offset_ : nullptr;
}

codecs::Status HandoffPool::Slot::write(uint64_t at, std::span<const uint8_t> src) const {
  if (!internal::rangeInside(at, src.size(), size_)) {
    return codecs::invalidArgument("write of ", src.size(), " bytes at ", at,
                                   " is outside a handoff slot of ", size_, " bytes");
  }
  if (src.empty()) return absl::OkStatus();
  if (pool_->data_ != nullptr) {
    std::memcpy(pool_->data_ + offset_ + at, src.data(), src.size());
    return absl::OkStatus();
  }
  std::string error;
  if (!pool_->device_buffer_->copyFromHost(offset_ + at, src.data(), src.size(), &error)) {
    return codecs::internalError("writing a CUDA handoff slot: ", error);
  }
  return absl::OkStatus();
}

codecs::Status HandoffPool::Slot::read(uint64_t at, std::span<uint8_t> dst) const {
  if (!internal::rangeInside(at, dst.size(), size_)) {
    return codecs::invalidArgument("read of ", dst.size(), " bytes at ", at,
                                   " is outside a handoff slot of ", size_, " bytes");
  }
  if (dst.empty()) return absl::OkStatus();
  if (pool_->data_ != nullptr) {
    std::memcpy(dst.data(), pool_->data_ + offset_ + at, dst.size());
    return absl::OkStatus();
  }
  std::string error;
  if (!pool_->device_buffer_->copyToHost(offset_ + at, dst.data(), dst.size(), &error)) {
    return codecs::internalError("reading a CUDA handoff slot: ", error);
  }
  return absl::OkStatus();
}

}  // namespace infergate::shm
