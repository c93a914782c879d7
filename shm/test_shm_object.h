#pragma once

// Test helper: a POSIX shared-memory object created the way a client would (shm_open
// O_CREAT|O_EXCL, ftruncate), with a name unique to this process, unlinked when it goes.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/status.h"

namespace infergate::shm::test_util {

inline std::string uniqueKey(const std::string& prefix = "/infergate_test_") {
  static std::atomic<int> counter{0};
  return prefix + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

// The byte at `index` of the test pattern: not periodic in any power of two, so a read at
// the wrong offset shows.
inline uint8_t patternByte(uint64_t index) { return static_cast<uint8_t>((index * 31 + 7) % 251); }

// Whether `text` contains `part`, saying what it held when not (gtest without gmock).
inline ::testing::AssertionResult contains(std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part
                                       << "\"";
}
inline ::testing::AssertionResult contains(const codecs::Status& status, std::string_view part) {
  return contains(codecs::messageOf(status), part);
}

class TestShmObject {
 public:
  explicit TestShmObject(uint64_t size, const std::string& prefix = "/infergate_test_")
      : key_(uniqueKey(prefix)), size_(size) {
    int fd = ::shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      ADD_FAILURE() << "shm_open(" << key_ << ") failed: " << std::strerror(errno);
      return;
    }
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      ADD_FAILURE() << "ftruncate failed: " << std::strerror(errno);
    }
    ::close(fd);
  }
  ~TestShmObject() { ::shm_unlink(key_.c_str()); }
  TestShmObject(const TestShmObject&) = delete;
  TestShmObject& operator=(const TestShmObject&) = delete;

  const std::string& key() const { return key_; }

  // Fills the whole object with patternByte(i) through a mapping of its own.
  void fillPattern() {
    std::vector<uint8_t> bytes(size_);
    for (uint64_t i = 0; i < size_; ++i) bytes[i] = patternByte(i);
    store(bytes);
  }

  // The object's bytes, read through a fresh mapping (not the region under test).
  std::vector<uint8_t> contents() const {
    std::vector<uint8_t> bytes(size_);
    withMapping([&](uint8_t* data) { std::memcpy(bytes.data(), data, size_); });
    return bytes;
  }

  void store(const std::vector<uint8_t>& bytes) {
    withMapping([&](uint8_t* data) { std::memcpy(data, bytes.data(), bytes.size()); });
  }

 private:
  template <typename F>
  void withMapping(F f) const {
    int fd = ::shm_open(key_.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    void* data = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(data, MAP_FAILED) << std::strerror(errno);
    f(static_cast<uint8_t*>(data));
    ::munmap(data, size_);
  }

  std::string key_;
  uint64_t size_;
};

}  // namespace infergate::shm::test_util
