// Linked into every unit-test binary (cmake/InfergateCompiler.cmake): before the process
// exits, waits (2 s at most) for grpc's own threads to end, as gateway/main.cc does
// (gateway/library_threads.h says why).

#include <gtest/gtest.h>

#include "gateway/library_threads.h"

namespace {

class AwaitLibraryThreads : public ::testing::Environment {
 public:
  void TearDown() override {
    infergate::gateway::awaitLibraryThreads(std::chrono::seconds(2));
  }
};

[[maybe_unused]] ::testing::Environment* const kRegistered =
    ::testing::AddGlobalTestEnvironment(new AwaitLibraryThreads);

}  // namespace
