// resolveName() and DnsWatcher against real hosts files in a temporary folder, and the
// system resolver only for names it answers without a server ("localhost", a literal, a
// malformed name): nothing outside the machine is asked.
//
// Watchers run with an hour between refreshes, so that a pass happens only when a test
// calls refreshNow(); a test learns that a pass is over from a report it waits for (a
// bounded wait, never a sleep). Where a pass must report nothing for one name, a second
// name, resolved after it in the same pass, changes on purpose and is waited for.

#include "gateway/upstream/dns_discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace infergate::gateway::upstream {
namespace {

using namespace std::chrono_literals;
using Addresses = std::vector<std::string>;

constexpr auto kWait = std::chrono::seconds(30);
constexpr auto kNoTimer = std::chrono::hours(1);

std::string contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos
             ? ""
             : "\"" + haystack + "\" lacks \"" + std::string(needle) + "\"";
}

// `found` is an error with `code` whose message names each of `named`.
void expectError(const codecs::StatusOr<Addresses>& found, absl::StatusCode code,
                 std::initializer_list<std::string_view> named = {}) {
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), code) << found.status();
  std::string message(codecs::messageOf(found.status()));
  for (std::string_view part : named) EXPECT_EQ(contains(message, part), "");
}

// What a watcher reported, in order, and the threads it reported on.
class Reports {
 public:
  DnsWatcher::OnChange onChange() {
    return [this](const std::string& name, const Addresses& addresses) {
      std::lock_guard<std::mutex> lock(mutex_);
      changes_[name].push_back(addresses);
      threads_.push_back(std::this_thread::get_id());
      changed_.notify_all();
    };
  }
  DnsWatcher::OnError onError() {
    return [this](const std::string& name, const codecs::Status& error) {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_[name].push_back(error);
      threads_.push_back(std::this_thread::get_id());
      changed_.notify_all();
    };
  }

  std::vector<Addresses> changes(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return changes_[name];
  }
  std::vector<codecs::Status> errors(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_[name];
  }
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }
  bool waitChanges(const std::string& name, size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kWait, [&] { return changes_[name].size() >= n; });
  }
  bool waitErrors(const std::string& name, size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kWait, [&] { return errors_[name].size() >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<Addresses>> changes_;
  std::map<std::string, std::vector<codecs::Status>> errors_;
  std::vector<std::thread::id> threads_;
};

class DnsDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "infergate_dns_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    hosts_ = (dir_ / "hosts").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Replaces the hosts file at once (written aside, then renamed over it), so that a
  // watcher reading it never sees half of it.
  void writeHosts(const std::string& text) {
    std::filesystem::path aside = dir_ / "hosts.new";
    {
      std::ofstream out(aside, std::ios::binary | std::ios::trunc);
      out << text;
      ASSERT_TRUE(out.good());
    }
    std::filesystem::rename(aside, hosts_);
  }

  // A watcher of `names` in the hosts file, reporting to `reports`, with no timer of its
  // own: it resolves on start() and on refreshNow() only.
  DnsWatcher watch(std::vector<std::string> names, Reports& reports) {
    return DnsWatcher(std::move(names), kNoTimer, hosts_, reports.onChange(), reports.onError());
  }

  std::filesystem::path dir_;
  std::string hosts_;
};

TEST_F(DnsDiscoveryTest, HostsFileGathersEveryLineNamingTheName) {
  writeHosts(
      "# the pods of triton\n"
      "10.0.0.8\ttriton.models.svc   triton\n"
      "10.0.0.7 other.svc triton # an alias counts\n"
      "   10.0.0.9 TRITON.Models.SVC\n"
      "\n"
      "fd00::0009 triton.models.svc\n"
      "10.0.0.1 unrelated.svc\n"
      "# 10.0.0.2 triton.models.svc\n"
      "10.0.0.7 triton.models.svc\r\n");
  auto full = resolveName("triton.models.svc", hosts_);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(*full, (Addresses{"10.0.0.7", "10.0.0.8", "10.0.0.9", "fd00::9"}));

  auto alias = resolveName("Triton", hosts_);
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_EQ(*alias, (Addresses{"10.0.0.7", "10.0.0.8"}));
}

TEST_F(DnsDiscoveryTest, HostsFileSkipsInvalidAddresses) {
  writeHosts(
      "10.0.0.300 svc\n"
      "not-an-address svc\n"
      "[fd00::1] svc\n"
      "fd00::1%eth0 svc\n"
      "10.0.0.5 svc\n"
      "::1 svc\n"
      "svc\n");
  auto found = resolveName("svc", hosts_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (Addresses{"10.0.0.5", "::1"}));
}

TEST_F(DnsDiscoveryTest, HostsFileWithoutTheNameIsNotFound) {
  writeHosts(
      "10.0.0.1 a.svc\n"
      "# 10.0.0.2 b.svc\n"
      "garbage b.svc\n"
      "10.0.0.3 a.svc#b.svc\n");
  expectError(resolveName("b.svc", hosts_), absl::StatusCode::kNotFound, {"b.svc", hosts_});
}

TEST_F(DnsDiscoveryTest, EmptyHostsFileIsNotFound) {
  writeHosts("");
  expectError(resolveName("a.svc", hosts_), absl::StatusCode::kNotFound);
}

TEST_F(DnsDiscoveryTest, MissingHostsFileIsUnavailable) {
  std::string path = (dir_ / "absent").string();
  expectError(resolveName("a.svc", path), absl::StatusCode::kUnavailable,
              {path, std::strerror(ENOENT)});
}

TEST_F(DnsDiscoveryTest, UnreadableHostsFileIsUnavailable) {
  // A folder opens but cannot be read (EISDIR), even for root.
  expectError(resolveName("a.svc", dir_.string()), absl::StatusCode::kUnavailable,
              {dir_.string(), std::strerror(EISDIR)});
}

TEST(ResolveName, SystemResolverFindsLocalhostOnLoopback) {
  auto found = resolveName("localhost", "");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_FALSE(found->empty());
  EXPECT_TRUE(std::is_sorted(found->begin(), found->end()));
  for (const std::string& address : *found) {
    EXPECT_TRUE(address == "::1" || address.rfind("127.", 0) == 0) << address;
  }
}

TEST(ResolveName, SystemResolverReturnsLiteralsAsGiven) {
  auto found = resolveName("10.1.2.3", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (Addresses{"10.1.2.3"}));
}

TEST(ResolveName, SystemResolverSaysNotFoundForAMalformedName) {
  // An empty label: glibc refuses it before asking any server.
  expectError(resolveName("no..such.svc", ""), absl::StatusCode::kNotFound,
              {"no..such.svc", "system resolver"});
}

TEST_F(DnsDiscoveryTest, WatcherReportsEveryNameOnceBeforeStartReturns) {
  writeHosts("10.0.0.2 a.svc\n10.0.0.1 a.svc\n");
  Reports reports;
  DnsWatcher watcher = watch({"a.svc", "b.svc", "a.svc"}, reports);
  ASSERT_EQ(watcher.targets().size(), 2u);
  EXPECT_EQ(watcher.targets()[0].name, "a.svc");
  EXPECT_EQ(watcher.targets()[1].name, "b.svc");
  EXPECT_TRUE(reports.threads().empty());  // nothing before start()

  watcher.start();
  EXPECT_EQ(reports.changes("a.svc"), (std::vector<Addresses>{{"10.0.0.1", "10.0.0.2"}}));
  ASSERT_EQ(reports.errors("b.svc").size(), 1u);
  EXPECT_EQ(reports.errors("b.svc")[0].code(), absl::StatusCode::kNotFound);
  for (std::thread::id id : reports.threads()) EXPECT_EQ(id, std::this_thread::get_id());
  watcher.stop();
}

TEST_F(DnsDiscoveryTest, WatcherReportsAChangeAfterRefreshNow) {
  writeHosts("10.0.0.1 a.svc\n");
  Reports reports;
  DnsWatcher watcher = watch({"a.svc"}, reports);
  watcher.start();
  ASSERT_EQ(reports.changes("a.svc").size(), 1u);

  writeHosts("10.0.0.1 a.svc\n10.0.0.3 a.svc\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("a.svc", 2));
  EXPECT_EQ(reports.changes("a.svc")[1], (Addresses{"10.0.0.1", "10.0.0.3"}));
  EXPECT_NE(reports.threads().back(), std::this_thread::get_id());

  writeHosts("10.0.0.3 a.svc\n");  // a pod went away
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("a.svc", 3));
  EXPECT_EQ(reports.changes("a.svc")[2], (Addresses{"10.0.0.3"}));
  EXPECT_TRUE(reports.errors("a.svc").empty());
}

TEST_F(DnsDiscoveryTest, WatcherReportsNothingWhenTheSetIsUnchanged) {
  writeHosts("10.0.0.1 a.svc\nfd00::1 a.svc\n10.0.0.9 marker\n");
  Reports reports;
  DnsWatcher watcher = watch({"a.svc", "marker"}, reports);
  watcher.start();

  // The same set for a.svc: other order, case and IPv6 spelling, a comment, a duplicate
  // line and an invalid address (inet_pton refuses a leading zero).
  writeHosts(
      "# rewritten\n"
      "fd00:0::0001 A.SVC\n"
      "010.0.0.1 a.svc\n"
      "10.0.0.1 a.svc\n"
      "10.0.0.1 a.svc\n"
      "10.0.0.9 marker\n");
  watcher.refreshNow();
  writeHosts("10.0.0.1 a.svc\nfd00::1 a.svc\n10.0.0.10 marker\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("marker", 2));
  EXPECT_EQ(reports.changes("marker").back(), (Addresses{"10.0.0.10"}));
  EXPECT_EQ(reports.changes("a.svc"), (std::vector<Addresses>{{"10.0.0.1", "fd00::1"}}));
  EXPECT_TRUE(reports.errors("a.svc").empty());
}

TEST_F(DnsDiscoveryTest, WatcherKeepsTheLastSetThroughErrorsAndReportsEachStreakOnce) {
  writeHosts("10.0.0.1 a.svc\n10.0.0.2 a.svc\n10.0.1.1 marker\n");
  Reports reports;
  DnsWatcher watcher = watch({"a.svc", "marker"}, reports);
  watcher.start();
  ASSERT_EQ(reports.changes("a.svc").size(), 1u);

  // The name is gone: one error, the set kept (no change reported).
  writeHosts("10.0.1.2 marker\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("marker", 2));
  ASSERT_EQ(reports.errors("a.svc").size(), 1u);
  EXPECT_EQ(reports.errors("a.svc")[0].code(), absl::StatusCode::kNotFound);

  // Still gone: the same streak, no second error.
  writeHosts("10.0.1.3 marker\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("marker", 3));
  EXPECT_EQ(reports.errors("a.svc").size(), 1u);

  // Back with the same addresses: the streak ends, the set is what was last reported.
  writeHosts("10.0.0.2 a.svc\n10.0.0.1 a.svc\n10.0.1.4 marker\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("marker", 4));
  EXPECT_EQ(reports.changes("a.svc"), (std::vector<Addresses>{{"10.0.0.1", "10.0.0.2"}}));

  // The file itself is gone: a new streak, UNAVAILABLE for every name.
  std::filesystem::remove(hosts_);
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitErrors("marker", 1));
  ASSERT_EQ(reports.errors("a.svc").size(), 2u);
  EXPECT_EQ(reports.errors("a.svc")[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(reports.errors("marker")[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(reports.changes("a.svc").size(), 1u);

  // Back with another set: reported.
  writeHosts("10.0.0.3 a.svc\n10.0.1.4 marker\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("a.svc", 2));
  EXPECT_EQ(reports.changes("a.svc")[1], (Addresses{"10.0.0.3"}));
}

TEST_F(DnsDiscoveryTest, WatcherReportsANameFirstFoundAfterStart) {
  writeHosts("10.0.0.1 other.svc\n");
  Reports reports;
  DnsWatcher watcher = watch({"a.svc"}, reports);
  watcher.start();
  ASSERT_EQ(reports.errors("a.svc").size(), 1u);
  EXPECT_TRUE(reports.changes("a.svc").empty());

  writeHosts("10.0.0.5 a.svc\n");
  watcher.refreshNow();
  ASSERT_TRUE(reports.waitChanges("a.svc", 1));
  EXPECT_EQ(reports.changes("a.svc")[0], (Addresses{"10.0.0.5"}));
  EXPECT_EQ(reports.errors("a.svc").size(), 1u);
}

TEST_F(DnsDiscoveryTest, WatcherRefreshesOnItsOwnEveryInterval) {
  writeHosts("10.0.0.1 a.svc\n");
  Reports reports;
  DnsWatcher watcher({"a.svc"}, 5ms, hosts_, reports.onChange(), reports.onError());
  watcher.start();
  writeHosts("10.0.0.2 a.svc\n");  // no refreshNow()
  ASSERT_TRUE(reports.waitChanges("a.svc", 2));
  EXPECT_EQ(reports.changes("a.svc")[1], (Addresses{"10.0.0.2"}));
}

TEST_F(DnsDiscoveryTest, StopIsPromptWithALongIntervalAndIdempotent) {
  writeHosts("10.0.0.1 a.svc\n");
  Reports reports;
  auto watcher = std::make_unique<DnsWatcher>(std::vector<std::string>{"a.svc"}, 10h, hosts_,
                                              reports.onChange(), reports.onError());
  watcher->start();
  auto before = std::chrono::steady_clock::now();
  watcher->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 10s);
  watcher->stop();
  watcher->refreshNow();  // after stop: nothing runs
  watcher.reset();        // the destructor stops again
  EXPECT_EQ(reports.changes("a.svc").size(), 1u);
}

TEST_F(DnsDiscoveryTest, WatcherNeverStartedStopsAndDestroys) {
  Reports reports;
  DnsWatcher watcher = watch({"a.svc"}, reports);
  watcher.stop();
  EXPECT_TRUE(reports.threads().empty());
}

}  // namespace
}  // namespace infergate::gateway::upstream
