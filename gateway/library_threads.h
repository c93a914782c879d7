#pragma once

// Waiting for the threads libraries start for themselves (grpc's event engine and timer
// threads) to end. grpc shuts down in the background once its last object is gone, and its
// threads free their OpenSSL state in thread-exit handlers: a process that exits while one
// is half way races those handlers with exit-time checks and destructors (LeakSanitizer
// reports the state as leaked). gateway/main.cc waits before it exits, and so does every
// unit-test binary (tests/support/await_library_threads.cc). Header-only: the test binaries
// link no gateway library.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

namespace infergate::gateway {

// The threads of this process that carry a name of their own: grpc names each of its
// threads; the project's threads keep the process's name.
inline int namedThreads() {
  std::error_code error;
  std::string self;
  std::ifstream("/proc/self/comm") >> self;
  int named = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::string name;
    std::ifstream(task.path() / "comm") >> name;
    if (!name.empty() && name != self) ++named;
  }
  return named;
}

// Returns once no named thread is left, or after `limit`.
inline void awaitLibraryThreads(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (namedThreads() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace infergate::gateway
