// Who reaches the admin API: the loopback test on client addresses as the server writes
// them, and the security stage's verdict for the admin group on a public metrics listener
// (the e2e tests reach it only from loopback).

#include "gateway/admin_api.h"

#include <gtest/gtest.h>

#include "config/listen_address.h"
#include "gateway/security.h"

namespace infergate::gateway {
namespace {

TEST(AdminApi, LoopbackClientsAreThoseOnThisHostsLoopbackOnly) {
  for (const char* address : {"127.0.0.1:4711", "127.255.0.9:1", "[::1]:80", "[::ffff:127.0.0.1]:1", "unix"}) {
    EXPECT_TRUE(AdminApi::loopbackClient(address)) << address;
  }
  for (const char* address : {"10.0.0.1:4711", "1.127.0.0:1", "[::127.0.0.1]:1", "[::10]:1",
                              "[::ffff:10.0.0.1]:1", "[2001:db8::1]:1", "unixx", ""}) {
    EXPECT_FALSE(AdminApi::loopbackClient(address)) << address;
  }
}

config::GatewayConfig withMetricsAt(const char* address) {
  config::GatewayConfig config;
  codecs::StatusOr<config::ListenAddress> parsed = config::parseListenAddress(address);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  config.metrics = config::ListenerConfig{*parsed};
  return config;
}

TEST(AdminApi, APublicMetricsListenerServesTheAdminGroupToLoopbackClientsOnly) {
  auto none = [](std::string_view) { return std::string_view(); };
  auto pub = Security::create(withMetricsAt("0.0.0.0:8002"));
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_TRUE((*pub)->admitAdmin(none, nullptr, /*write=*/true, /*loopback=*/true).ok());
  auto remote = (*pub)->admitAdmin(none, nullptr, /*write=*/false, /*loopback=*/false);
  EXPECT_EQ(remote.status().code(), absl::StatusCode::kPermissionDenied);
  // A private one serves anyone; the other groups are not held to the admin API's default.
  auto priv = Security::create(withMetricsAt("127.0.0.1:8002"));
  ASSERT_TRUE(priv.ok()) << priv.status();
  EXPECT_TRUE((*priv)->admitAdmin(none, nullptr, /*write=*/true, /*loopback=*/false).ok());
  EXPECT_TRUE((*pub)->admit(none, nullptr, config::ApiGroup::kInference, false, tls::Listener::kHttp).ok());
}

}  // namespace
}  // namespace infergate::gateway
