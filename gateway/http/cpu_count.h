#pragma once

// How many CPUs this process may really use, for `workers: 0`. In a container the core
// count of the machine says nothing: a pod limited to 2 CPUs on a 64-core node that starts
// 64 event loops gets throttled by the kernel's CFS quota. So the count is the affinity
// mask (cpusets, taskset) capped by the cgroup's CPU quota, rounded up.

#include <cstddef>
#include <optional>
#include <string_view>

namespace infergate::gateway::http {

// The CPUs this process may use now: at least 1.
size_t availableCpus();

// The quota of a cgroup in CPUs (quota / period, not rounded), from cgroup v2's `cpu.max`
// text ("max 100000" = none, "150000 100000" = 1.5), else from v1's cfs_quota_us
// ("-1" = none) and cfs_period_us. nullopt: no quota, or text that does not parse
// (empty = the file is absent).
std::optional<double> cgroupCpuQuota(std::string_view cpu_max_v2, std::string_view quota_v1,
                                     std::string_view period_v1);

// `affinity` capped by `quota` rounded up; at least 1.
size_t cpusFrom(size_t affinity, std::optional<double> quota);

}  // namespace infergate::gateway::http
