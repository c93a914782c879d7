#include "gateway/http/cpu_count.h"

#include <sched.h>

#include <gtest/gtest.h>

namespace infergate::gateway::http {
namespace {

TEST(CpuCount, ReadsCgroupV2CpuMax) {
  EXPECT_EQ(cgroupCpuQuota("max 100000\n", "", ""), std::nullopt);
  EXPECT_DOUBLE_EQ(*cgroupCpuQuota("150000 100000\n", "", ""), 1.5);
  EXPECT_DOUBLE_EQ(*cgroupCpuQuota("200000 100000", "-1", "100000"), 2.0);  // v2 wins
  EXPECT_EQ(cgroupCpuQuota("garbage", "", ""), std::nullopt);
  EXPECT_EQ(cgroupCpuQuota("0 100000", "", ""), std::nullopt);
  EXPECT_EQ(cgroupCpuQuota("100000 abc", "", ""), std::nullopt);
}

TEST(CpuCount, ReadsCgroupV1CfsQuota) {
  EXPECT_EQ(cgroupCpuQuota("", "-1\n", "100000\n"), std::nullopt);
  EXPECT_DOUBLE_EQ(*cgroupCpuQuota("", "50000\n", "100000\n"), 0.5);
  EXPECT_DOUBLE_EQ(*cgroupCpuQuota("", "400000", "100000"), 4.0);
  EXPECT_EQ(cgroupCpuQuota("", "400000", ""), std::nullopt);
  EXPECT_EQ(cgroupCpuQuota("", "", ""), std::nullopt);
}

TEST(CpuCount, CapsTheAffinityByTheQuotaRoundedUp) {
  EXPECT_EQ(cpusFrom(64, std::nullopt), 64u);
  EXPECT_EQ(cpusFrom(64, 2.0), 2u);
  EXPECT_EQ(cpusFrom(64, 1.5), 2u);
  EXPECT_EQ(cpusFrom(64, 0.25), 1u);
  EXPECT_EQ(cpusFrom(4, 16.0), 4u);  // a quota above the cpuset does not add CPUs
  EXPECT_EQ(cpusFrom(0, std::nullopt), 1u);
}

TEST(CpuCount, NeverExceedsThisProcessAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  const size_t n = availableCpus();
  EXPECT_GE(n, 1u);
  EXPECT_LE(n, static_cast<size_t>(CPU_COUNT(&set)));
}

}  // namespace
}  // namespace infergate::gateway::http
