// HostAddresses (host_addresses.h): what discovery found for each host-name endpoint, as
// the native clients read it, and the lookup a miss asks for.

#include "gateway/upstream/host_addresses.h"

#include <gtest/gtest.h>

namespace infergate::gateway::upstream {
namespace {

TEST(HostAddresses, NamesCompareIgnoringCaseAndAnUnknownOneIsNull) {
  HostAddresses hosts;
  hosts.resolved("Triton.Models", {"10.0.0.7", "fd00::9"});
  ASSERT_NE(hosts.find("triton.models"), nullptr);
  EXPECT_EQ(hosts.find("TRITON.MODELS")->addresses, (std::vector<std::string>{"10.0.0.7", "fd00::9"}));
  EXPECT_EQ(hosts.find("triton"), nullptr);
}

TEST(HostAddresses, AFailureKeepsTheAddressesKnownAndIsKeptWhenThereAreNone) {
  HostAddresses hosts;
  hosts.failed("gone", absl::NotFoundError("nothing"));
  ASSERT_NE(hosts.find("gone"), nullptr);
  EXPECT_TRUE(hosts.find("gone")->addresses.empty());
  EXPECT_EQ(hosts.find("gone")->error.message(), "nothing");

  hosts.resolved("flaky", {"10.0.0.8"});
  hosts.failed("flaky", absl::UnavailableError("resolver down"));
  EXPECT_EQ(hosts.find("flaky")->addresses, (std::vector<std::string>{"10.0.0.8"}));

  // A new set is a new entry: it starts at its first address.
  hosts.find("flaky")->preferred.store(1);
  hosts.resolved("flaky", {"10.0.0.8", "10.0.0.9"});
  EXPECT_EQ(hosts.find("flaky")->preferred.load(), 0u);
}

TEST(HostAddresses, RetainForgetsTheNamesNotListed) {
  HostAddresses hosts;
  hosts.resolved("a", {"10.0.0.1"});
  hosts.resolved("b", {"10.0.0.2"});
  hosts.retain({"B"});
  EXPECT_EQ(hosts.find("a"), nullptr);
  EXPECT_NE(hosts.find("b"), nullptr);
}

TEST(HostAddresses, AMissAsksForALookupOncePerGapAndNotAfterTheRefresherIsGone) {
  HostAddresses hosts;
  hosts.missed();  // no refresher: nothing to ask
  int asked = 0;
  hosts.setRefresher([&asked] { ++asked; });
  hosts.missed();
  EXPECT_EQ(asked, 1);
  hosts.missed();  // within kMinRefreshGap of the first
  EXPECT_EQ(asked, 1);
  hosts.setRefresher(nullptr);
  hosts.missed();
  EXPECT_EQ(asked, 1);
  hosts.setRefresher([&asked] { asked += 10; });  // a new refresher asks at once
  hosts.missed();
  EXPECT_EQ(asked, 11);
}

}  // namespace
}  // namespace infergate::gateway::upstream
