#include "tls/client_credentials.h"

#include <absl/strings/match.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tls/testing/test_certs.h"

namespace infergate::tls {
namespace {

using testing::LeafOptions;
using testing::TestPki;

LeafOptions clientLeaf() {
  LeafOptions o;
  o.common_name = "gateway";
  o.dns_names = {"gateway.internal"};
  o.ip_addresses = {};
  o.client = true;
  return o;
}

class ClientCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override { pki_.issue("client", clientLeaf()); }

  config::UpstreamTlsConfig withClientCert() const {
    config::UpstreamTlsConfig c;
    c.ca = pki_.caCert();
    c.server_name = "triton.internal";
    c.cert = pki_.cert("client");
    c.key = pki_.key("client");
    return c;
  }

  // The error of a load that must fail, starting with "upstreams[u].tls.KEY: PATH: ".
  std::string failure(const config::UpstreamTlsConfig& c, const std::string& key,
                      const std::string& path) {
    auto loaded = loadClientTls("u", c);
    EXPECT_FALSE(loaded.ok());
    if (loaded.ok()) return "";
    const std::string message(loaded.status().message());
    EXPECT_TRUE(absl::StartsWith(message, "upstreams[u].tls." + key + ": " + path + ": "))
        << message;
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
    return message;
  }

  TestPki pki_;
};

TEST_F(ClientCredentialsTest, LoadsTheCaAndTheClientCertificate) {
  auto loaded = loadClientTls("u", withClientCert());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_NE((*loaded)->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE((*loaded)->cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE((*loaded)->key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ((*loaded)->config.server_name, "triton.internal");
  auto credentials = channelCredentials(**loaded);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_NE(*credentials, nullptr);
}

TEST_F(ClientCredentialsTest, EmptySettingsReadNoFileAndUseTheSystemStore) {
  auto loaded = loadClientTls("u", config::UpstreamTlsConfig{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->ca_pem, "");
  EXPECT_EQ((*loaded)->cert_pem, "");
  EXPECT_TRUE(channelCredentials(**loaded).ok());
}

TEST_F(ClientCredentialsTest, InsecureSkipVerifyStillBuildsTlsCredentials) {
  config::UpstreamTlsConfig c;
  c.insecure_skip_verify = true;
  auto loaded = loadClientTls("u", c);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto credentials = channelCredentials(**loaded);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_NE(*credentials, nullptr);
  // With a client certificate too (mTLS toward an upstream whose name is not checked).
  c.cert = pki_.cert("client");
  c.key = pki_.key("client");
  loaded = loadClientTls("u", c);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(channelCredentials(**loaded).ok());
}

TEST_F(ClientCredentialsTest, MissingCaFileNamesTheKeyAndThePath) {
  config::UpstreamTlsConfig c = withClientCert();
  c.ca = pki_.dir() + "/absent.pem";
  EXPECT_NE(failure(c, "ca", c.ca).find("No such file or directory"), std::string::npos);
}

TEST_F(ClientCredentialsTest, CaFileWithoutCertificatesIsRefused) {
  config::UpstreamTlsConfig c = withClientCert();
  c.ca = pki_.dir() + "/junk.pem";
  { std::ofstream(c.ca) << "not a certificate\n"; }
  EXPECT_NE(failure(c, "ca", c.ca).find("no PEM certificate in the file"), std::string::npos);
  // A key where the CA bundle belongs: no certificate in it either.
  c.ca = pki_.key("client");
  EXPECT_NE(failure(c, "ca", c.ca).find("no PEM certificate in the file"), std::string::npos);
}

TEST_F(ClientCredentialsTest, CorruptCertificateInTheBundleIsRefused) {
  config::UpstreamTlsConfig c = withClientCert();
  c.ca = pki_.dir() + "/broken.pem";
  {
    std::ofstream out(c.ca);
    out << "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
  }
  failure(c, "ca", c.ca);
}

TEST_F(ClientCredentialsTest, KeyOfAnotherCertificateNamesBothFiles) {
  pki_.issue("other", clientLeaf());
  config::UpstreamTlsConfig c = withClientCert();
  c.key = pki_.key("other");
  const std::string message = failure(c, "key", c.key);
  EXPECT_NE(message.find("the key does not belong to the certificate in " + c.cert),
            std::string::npos)
      << message;
}

TEST_F(ClientCredentialsTest, MissingClientCertificateOrKeyFileIsNamed) {
  config::UpstreamTlsConfig c = withClientCert();
  c.cert = pki_.dir() + "/absent.pem";
  failure(c, "cert", c.cert);
  c = withClientCert();
  c.key = pki_.dir() + "/absent.key";
  failure(c, "key", c.key);
  c = withClientCert();
  c.cert = pki_.key("client");  // a key is no certificate
  EXPECT_NE(failure(c, "cert", c.cert).find("no PEM certificate"), std::string::npos);
}

TEST_F(ClientCredentialsTest, CertWithoutKeyIsRefused) {
  config::UpstreamTlsConfig c = withClientCert();
  c.key.clear();
  EXPECT_NE(failure(c, "cert", c.cert).find("give cert and key together"), std::string::npos);
}

TEST_F(ClientCredentialsTest, EncryptedKeyIsRefusedWithoutAPrompt) {
  const std::string encrypted = pki_.dir() + "/encrypted.key";
  {
    std::FILE* in = std::fopen(pki_.key("client").c_str(), "r");
    ASSERT_NE(in, nullptr);
    EVP_PKEY* key = PEM_read_PrivateKey(in, nullptr, nullptr, nullptr);
    std::fclose(in);
    ASSERT_NE(key, nullptr);
    std::FILE* out = std::fopen(encrypted.c_str(), "w");
    ASSERT_NE(out, nullptr);
    char passphrase[] = "secret";
    EXPECT_EQ(PEM_write_PrivateKey(out, key, EVP_aes_256_cbc(),
                                   reinterpret_cast<unsigned char*>(passphrase), 6, nullptr,
                                   nullptr),
              1);
    std::fclose(out);
    EVP_PKEY_free(key);
  }
  config::UpstreamTlsConfig c = withClientCert();
  c.key = encrypted;
  EXPECT_NE(failure(c, "key", c.key).find("an encrypted key is not supported"),
            std::string::npos);
}

TEST_F(ClientCredentialsTest, SameFilesAreTheSameLoadAndChangedOnesAreNot) {
  auto first = loadClientTls("u", withClientCert());
  auto second = loadClientTls("u", withClientCert());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(sameClientTls(**first, **second));
  pki_.issue("client", clientLeaf());  // renewed in place
  auto renewed = loadClientTls("u", withClientCert());
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_FALSE(sameClientTls(**first, **renewed));
  config::UpstreamTlsConfig other_name = withClientCert();
  other_name.server_name = "other.internal";
  auto renamed = loadClientTls("u", other_name);
  ASSERT_TRUE(renamed.ok());
  EXPECT_FALSE(sameClientTls(**renewed, **renamed));
}

TEST_F(ClientCredentialsTest, ServerNameBecomesTheTargetNameOverride) {
  auto loaded = loadClientTls("u", withClientCert());
  ASSERT_TRUE(loaded.ok());
  ::grpc::ChannelArguments args;
  setChannelArguments(**loaded, args);
  grpc_channel_args c_args = args.c_channel_args();
  std::string name;
  for (size_t i = 0; i < c_args.num_args; ++i) {
    if (std::string(c_args.args[i].key) == GRPC_SSL_TARGET_NAME_OVERRIDE_ARG) {
      name = c_args.args[i].value.string;
    }
  }
  EXPECT_EQ(name, "triton.internal");

  ::grpc::ChannelArguments none;
  auto no_name = loadClientTls("u", config::UpstreamTlsConfig{});
  ASSERT_TRUE(no_name.ok());
  setChannelArguments(**no_name, none);
  grpc_channel_args plain = none.c_channel_args();
  for (size_t i = 0; i < plain.num_args; ++i) {
    EXPECT_NE(std::string(plain.args[i].key), GRPC_SSL_TARGET_NAME_OVERRIDE_ARG);
  }
}

}  // namespace
}  // namespace infergate::tls
