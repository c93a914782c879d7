#include "config/listen_address.h"

#include <gtest/gtest.h>

namespace infergate::config {
namespace {

using Kind = ListenAddress::Kind;

ListenAddress parsed(std::string_view text) {
  auto r = parseListenAddress(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status();
  return r.ok() ? *r : ListenAddress{};
}

void expectRejected(std::string_view text, std::string_view fragment) {
  auto r = parseListenAddress(text);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(codecs::messageOf(r.status()).find(fragment), std::string_view::npos)
      << text << ": " << codecs::messageOf(r.status()) << "\nexpected: " << fragment;
}

ListenAddress endpoint(std::string_view text) {
  auto r = parseEndpointAddress(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status();
  return r.ok() ? *r : ListenAddress{};
}

// The whole message, so the wording of the dns: errors is pinned down.
void expectEndpointRejected(std::string_view text, std::string_view message) {
  auto r = parseEndpointAddress(text);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(r.status()), message) << text;
}

TEST(ListenAddress, ParsesIpv4HostAndPort) {
  ListenAddress a = parsed("0.0.0.0:8000");
  EXPECT_EQ(a.kind, Kind::kTcp);
  EXPECT_EQ(a.host, "0.0.0.0");
  EXPECT_EQ(a.port, 8000);
  EXPECT_EQ(a.text, "0.0.0.0:8000");
  EXPECT_EQ(parsed("127.0.0.1:65535").port, 65535);
  EXPECT_EQ(parsed("127.0.0.1:0").port, 0);
}

TEST(ListenAddress, ParsesBracketedIpv6) {
  ListenAddress a = parsed("[::]:8001");
  EXPECT_EQ(a.host, "::");
  EXPECT_EQ(a.port, 8001);
  EXPECT_EQ(parsed("[2001:db8::1]:443").host, "2001:db8::1");
  EXPECT_EQ(parsed("[::ffff:10.0.0.1]:80").host, "::ffff:10.0.0.1");
  EXPECT_EQ(parsed("[fe80::1%eth0]:80").host, "fe80::1%eth0");
}

TEST(ListenAddress, ParsesHostNames) {
  EXPECT_EQ(parsed("localhost:8000").host, "localhost");
  EXPECT_EQ(parsed("triton-0.triton.default.svc:8001").host, "triton-0.triton.default.svc");
}

TEST(ListenAddress, ParsesUnixPaths) {
  ListenAddress a = parsed("unix:/run/infergate/http.sock");
  EXPECT_EQ(a.kind, Kind::kUnix);
  EXPECT_EQ(a.path, "/run/infergate/http.sock");
  EXPECT_EQ(parsed("unix:relative.sock").path, "relative.sock");
  EXPECT_EQ(parsed("unix:/" + std::string(kMaxUnixPathBytes - 1, 'x')).path.size(),
            kMaxUnixPathBytes);
}

TEST(ListenAddress, RejectsMissingParts) {
  expectRejected("", "the address is empty");
  expectRejected("0.0.0.0", "missing port in \"0.0.0.0\" (expected host:port");
  expectRejected("0.0.0.0:", "missing port");
  expectRejected("[::1]", "missing port");
  expectRejected(":8000", "missing host in \":8000\"");
  expectRejected("[]:80", "empty IPv6 address");
  expectRejected("unix:", "unix socket path is empty");
}

TEST(ListenAddress, RejectsBadPorts) {
  expectRejected("0.0.0.0:65536", "port 65536 is out of range (0-65535)");
  expectRejected("0.0.0.0:99999999999999999999", "out of range");
  expectRejected("0.0.0.0:http", "port \"http\" is not a number");
  expectRejected("0.0.0.0:-1", "port \"-1\" is not a number");
  expectRejected("0.0.0.0: 80", "is not a number");
}

TEST(ListenAddress, RejectsBadHosts) {
  expectRejected("::1:8000", "an IPv6 address needs brackets: \"[::1]:8000\"");
  expectRejected("[::1:8000", "missing ']'");
  expectRejected("[::1]8000", "expected ':' and a port after ']'");
  expectRejected("[1.2.3.4]:80", "not a valid IPv6 address");
  expectRejected("[fe80::1%]:80", "bad IPv6 zone");
  expectRejected("256.0.0.1:80", "\"256.0.0.1\" is not a valid IPv4 address");
  expectRejected("1.2.3:80", "not a valid IPv4 address");
  expectRejected("bad_host:80", "not a valid host name");
  expectRejected("-bad:80", "not a valid host name");
  expectRejected("a..b:80", "not a valid host name");
  expectRejected("*:80", "not a valid host name");
  expectRejected(std::string(64, 'a') + ":80", "not a valid host name");
}

TEST(ListenAddress, RejectsUnixPathsThatDoNotFit) {
  expectRejected("unix:/" + std::string(kMaxUnixPathBytes, 'x'),
                 "unix socket path is 108 bytes long; at most 107 fit in sockaddr_un");
  expectRejected(std::string("unix:/a\0b", 9), "contains a NUL byte");
}

TEST(ListenAddress, ClashesOnTheSamePortWhenHostsOverlap) {
  auto clash = [](std::string_view a, std::string_view b) {
    return listenAddressesClash(parsed(a), parsed(b));
  };
  EXPECT_TRUE(clash("0.0.0.0:8000", "0.0.0.0:8000"));
  EXPECT_TRUE(clash("0.0.0.0:8000", "127.0.0.1:8000"));
  EXPECT_TRUE(clash("127.0.0.1:8000", "0.0.0.0:8000"));
  EXPECT_TRUE(clash("0.0.0.0:8000", "localhost:8000"));
  EXPECT_TRUE(clash("[::]:8000", "127.0.0.1:8000"));
  EXPECT_TRUE(clash("[::]:8000", "[::1]:8000"));
  EXPECT_TRUE(clash("LOCALHOST:8000", "localhost:8000"));
  EXPECT_TRUE(clash("unix:/tmp/a.sock", "unix:/tmp/a.sock"));

  EXPECT_FALSE(clash("0.0.0.0:8000", "0.0.0.0:8001"));
  EXPECT_FALSE(clash("127.0.0.1:8000", "127.0.0.2:8000"));
  EXPECT_FALSE(clash("0.0.0.0:8000", "[::1]:8000"));
  EXPECT_FALSE(clash("0.0.0.0:0", "0.0.0.0:0"));
  EXPECT_FALSE(clash("unix:/tmp/a.sock", "unix:/tmp/b.sock"));
  EXPECT_FALSE(clash("unix:/tmp/a.sock", "0.0.0.0:8000"));
}

TEST(ListenAddress, RefusesDnsNames) {
  auto r = parseListenAddress("dns:triton.default.svc:8001");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(codecs::messageOf(r.status()),
            "\"dns:triton.default.svc:8001\": dns: is for upstream endpoints (every address a "
            "name resolves to); a listener takes host:port or unix:path");
  expectRejected("dns:", "dns: is for upstream endpoints");
}

TEST(EndpointAddress, ParsesDnsNameAndPort) {
  ListenAddress a = endpoint("dns:triton-headless.ns.svc.cluster.local:8001");
  EXPECT_EQ(a.kind, Kind::kDns);
  EXPECT_EQ(a.host, "triton-headless.ns.svc.cluster.local");
  EXPECT_EQ(a.port, 8001);
  EXPECT_EQ(a.text, "dns:triton-headless.ns.svc.cluster.local:8001");
  EXPECT_EQ(a.path, "");
  EXPECT_EQ(endpoint("dns:localhost:1").host, "localhost");
  EXPECT_EQ(endpoint("dns:a:65535").port, 65535);
  EXPECT_EQ(endpoint("dns:Triton-0:8001").host, "Triton-0");  // kept as written
}

TEST(EndpointAddress, TakesTheListenerFormsWithAPort) {
  ListenAddress tcp = endpoint("10.0.0.2:8001");
  EXPECT_EQ(tcp.kind, Kind::kTcp);
  EXPECT_EQ(tcp.host, "10.0.0.2");
  EXPECT_EQ(tcp.port, 8001);
  EXPECT_EQ(endpoint("[::1]:8001").host, "::1");
  EXPECT_EQ(endpoint("triton.local:8001").kind, Kind::kTcp);
  ListenAddress unix_socket = endpoint("unix:/run/triton.sock");
  EXPECT_EQ(unix_socket.kind, Kind::kUnix);
  EXPECT_EQ(unix_socket.path, "/run/triton.sock");
  // The listener forms' own errors come through unchanged.
  expectEndpointRejected("10.0.0.2", "missing port in \"10.0.0.2\" (expected host:port, e.g. "
                                     "0.0.0.0:8000)");
  expectEndpointRejected("unix:", "unix socket path is empty in \"unix:\"");
}

TEST(EndpointAddress, RefusesPortZero) {
  expectEndpointRejected("127.0.0.1:0", "endpoint \"127.0.0.1:0\" needs a port (0 is for "
                                        "listeners)");
  expectEndpointRejected("[::1]:0", "endpoint \"[::1]:0\" needs a port (0 is for listeners)");
  expectEndpointRejected("dns:triton:0", "endpoint \"dns:triton:0\" needs a port (0 is for "
                                         "listeners)");
}

TEST(EndpointAddress, RefusesBadDnsForms) {
  constexpr std::string_view kDnsExample =
      " (expected dns:NAME:PORT, e.g. dns:triton-headless.default.svc.cluster.local:8001)";
  auto with_example = [&](std::string_view message) {
    return std::string(message) + std::string(kDnsExample);
  };
  expectEndpointRejected("dns:", with_example("missing host name in \"dns:\""));
  expectEndpointRejected("dns::8001", with_example("missing host name in \"dns::8001\""));
  expectEndpointRejected("dns:triton", with_example("missing port in \"dns:triton\""));
  expectEndpointRejected("dns:triton:", with_example("missing port in \"dns:triton:\""));
  expectEndpointRejected("dns:triton:http", "port \"http\" is not a number");
  expectEndpointRejected("dns:triton:65536", "port 65536 is out of range (0-65535)");
  expectEndpointRejected("dns:bad_name:80", with_example("\"bad_name\" is not a valid host name"));
  expectEndpointRejected("dns:a..b:80", with_example("\"a..b\" is not a valid host name"));
  expectEndpointRejected("dns:1.2.3:80", with_example("\"1.2.3\" is not a valid host name"));
  expectEndpointRejected("dns:[h]:80", with_example("\"[h]\" is not a valid host name"));
  expectEndpointRejected("dns:10.0.0.1:8001", "\"10.0.0.1\" is an IP address, not a name to "
                                              "resolve (write \"10.0.0.1:8001\" without dns:)");
  expectEndpointRejected("dns:[::1]:8001", "\"[::1]\" is an IP address, not a name to resolve "
                                           "(write \"[::1]:8001\" without dns:)");
  expectEndpointRejected("dns:::1:8001", "\"::1\" is an IP address, not a name to resolve "
                                         "(write \"[::1]:8001\" without dns:)");
}

TEST(EndpointAddress, SameEndpointComparesKindHostAndPort) {
  auto same = [](std::string_view a, std::string_view b) {
    return sameEndpoint(endpoint(a), endpoint(b));
  };
  EXPECT_TRUE(same("dns:triton:8001", "dns:triton:8001"));
  EXPECT_TRUE(same("dns:Triton:8001", "dns:triton:8001"));  // names ignore case
  EXPECT_TRUE(same("h:1", "H:01"));
  EXPECT_TRUE(same("unix:/run/a.sock", "unix:/run/a.sock"));
  EXPECT_FALSE(same("dns:triton:8001", "dns:triton:8002"));
  EXPECT_FALSE(same("dns:triton:8001", "triton:8001"));  // every address vs one target
  EXPECT_FALSE(same("unix:/run/a.sock", "unix:/run/b.sock"));
  EXPECT_FALSE(same("10.0.0.1:80", "10.0.0.2:80"));
}

}  // namespace
}  // namespace infergate::config

namespace infergate::config {
namespace {

TEST(ListenAddressFormat, BracketsIpv6AndNamesUnixSockets) {
  EXPECT_EQ(formatHostPort("10.0.0.7", 8001), "10.0.0.7:8001");
  EXPECT_EQ(formatHostPort("triton-0.svc", 8001), "triton-0.svc:8001");
  EXPECT_EQ(formatHostPort("fd00::1", 8001), "[fd00::1]:8001");
  auto tcp = parseEndpointAddress("[::1]:9000");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_EQ(formatAddress(*tcp), "[::1]:9000");
  auto unix_socket = parseEndpointAddress("unix:/run/t.sock");
  ASSERT_TRUE(unix_socket.ok()) << unix_socket.status();
  EXPECT_EQ(formatAddress(*unix_socket), "unix:/run/t.sock");
}

}  // namespace
}  // namespace infergate::config
