#include "shm/cuda_probe.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace infergate::shm {
namespace {

bool gpuDeviceNodePresent() { return std::filesystem::exists("/dev/nvidia0"); }

TEST(CudaProbe, ReportsBuildChoice) {
  CudaStatus status = probeCuda();
  EXPECT_EQ(status.compiled_in, INFERGATE_HAVE_CUDA != 0);
  EXPECT_FALSE(status.detail.empty());
  if (!status.compiled_in) EXPECT_FALSE(status.usable);
}

TEST(CudaProbe, FindsNoDeviceWithoutAGpuAndKeepsRunning) {
  if (gpuDeviceNodePresent()) GTEST_SKIP() << "a GPU is present: covered by SeesTheGpu";
  CudaStatus status = probeCuda();
  EXPECT_FALSE(status.usable);
  EXPECT_EQ(status.device_count, 0);
  CudaStatus again = probeCuda();  // a second probe after the failure behaves the same
  EXPECT_FALSE(again.usable);
}

TEST(CudaProbe, SeesTheGpu) {
  if (!gpuDeviceNodePresent()) {
    GTEST_SKIP() << "no GPU on this machine (/dev/nvidia0 absent): CUDA device test skipped";
  }
  if (!INFERGATE_HAVE_CUDA) GTEST_SKIP() << "built without CUDA";
  CudaStatus status = probeCuda();
  EXPECT_TRUE(status.usable) << status.detail;
  EXPECT_GE(status.device_count, 1);
  EXPECT_GE(status.runtime_version, 12000);
}

}  // namespace
}  // namespace infergate::shm
