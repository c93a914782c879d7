#pragma once

// Certificates for tests, made at run time with OpenSSL (no private key is ever committed):
// a CA, and leaf certificates it signs for servers and clients, written as PEM files into
// a temporary directory that is removed with the object.

#include <openssl/ssl.h>

#include <chrono>
#include <string>
#include <vector>

namespace infergate::tls::testing {

struct LeafOptions {
  std::string common_name = "localhost";
  std::vector<std::string> dns_names = {"localhost"};
  std::vector<std::string> ip_addresses = {"127.0.0.1", "::1"};
  std::vector<std::string> uris;  // e.g. "spiffe://example.org/client"
  bool client = false;            // extendedKeyUsage clientAuth (else serverAuth)
  // Validity relative to now: {-1 day, +1 day} by default; a past end makes it expired.
  std::chrono::seconds not_before{-86400}, not_after{86400};
};

// A TLS client context for tests: trusting `ca` and checking the server's certificate
// ("" = no verification), presenting `cert` / `key` when given. The caller frees it.
SSL_CTX* newClientContext(const std::string& ca, const std::string& cert = "",
                          const std::string& key = "");

class TestPki {
 public:
  // A fresh directory and a CA named `ca_name` in it (ca.pem, ca.key).
  explicit TestPki(const std::string& ca_name = "infergate test CA");
  ~TestPki();
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& dir() const { return dir_; }
  std::string caCert() const { return dir_ + "/ca.pem"; }

  // Writes <name>.pem (the leaf, then the CA) and <name>.key, signed by this CA.
  void issue(const std::string& name, const LeafOptions& options);
  std::string cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

 private:
  struct Impl;
  Impl* impl_;
  std::string dir_;
};

}  // namespace infergate::tls::testing
