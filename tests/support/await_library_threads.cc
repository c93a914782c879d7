// Linked into every unit-test binary (cmake/InfergateCompiler.cmake): before the process
// exits, waits (2 s at most) for the threads libraries named for themselves (grpc's event
// engine and timer threads) to end. grpc shuts down in the background once its last object
// is gone, and its threads free their OpenSSL state in thread-exit handlers; a process
// exiting meanwhile has LeakSanitizer report that state as leaked. gateway/main.cc waits
// the same way.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace {

// The threads of this process that carry a name of their own (the project's threads keep
// the process's name).
int namedThreads() {
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

class AwaitLibraryThreads : public ::testing::Environment {
 public:
  void TearDown() override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (namedThreads() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kRegistered =
    ::testing::AddGlobalTestEnvironment(new AwaitLibraryThreads);

}  // namespace
