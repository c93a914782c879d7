#include "gateway/http/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace infergate::gateway::http {
namespace {

std::string readSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// A whole decimal integer, possibly negative; nullopt for anything else.
std::optional<long long> parseInteger(std::string_view s) {
  s = trim(s);
  long long value = 0;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

std::optional<double> ratio(std::optional<long long> quota, std::optional<long long> period) {
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

// This process's cgroup v2 path ("0::/kubepods/pod.../cid" in /proc/self/cgroup); "/"
// when unknown. Inside a container's cgroup namespace it is "/".
std::string cgroupV2Path() {
  std::istringstream lines(readSmallFile("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "/";
}

size_t affinityCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0) return static_cast<size_t>(count);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::optional<double> cgroupCpuQuota(std::string_view cpu_max_v2, std::string_view quota_v1,
                                     std::string_view period_v1) {
  cpu_max_v2 = trim(cpu_max_v2);
  if (!cpu_max_v2.empty()) {
    const size_t space = cpu_max_v2.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const std::string_view quota = cpu_max_v2.substr(0, space);
    if (quota == "max") return std::nullopt;
    return ratio(parseInteger(quota), parseInteger(cpu_max_v2.substr(space + 1)));
  }
  return ratio(parseInteger(quota_v1), parseInteger(period_v1));
}

size_t cpusFrom(size_t affinity, std::optional<double> quota) {
  size_t count = std::max<size_t>(1, affinity);
  if (quota && *quota > 0) {
    // Rounded up: a quota of 1.5 CPUs keeps two loops busy half the time each, and loops
    // that mostly wait on sockets lose less to that than one loop would to its queue.
    const double up = std::ceil(*quota - 1e-9);
    count = std::min(count, static_cast<size_t>(std::max(1.0, up)));
  }
  return count;
}

size_t availableCpus() {
  std::string v2 = readSmallFile("/sys/fs/cgroup" + cgroupV2Path() + "/cpu.max");
  if (v2.empty()) v2 = readSmallFile("/sys/fs/cgroup/cpu.max");
  std::optional<double> quota = cgroupCpuQuota(v2, readSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                                               readSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us"));
  return cpusFrom(affinityCount(), quota);
}

}  // namespace infergate::gateway::http
