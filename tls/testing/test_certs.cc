#include "tls/testing/test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace infergate::tls::testing {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificates: ") + what);
}

EVP_PKEY* newKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  check(key != nullptr, "EVP_EC_gen");
  return key;
}

void addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

X509* newCert(EVP_PKEY* key, const std::string& cn, long serial, std::chrono::seconds from,
              std::chrono::seconds to) {
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), static_cast<long>(from.count()));
  X509_gmtime_adj(X509_getm_notAfter(cert), static_cast<long>(to.count()));
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("infergate tests"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

void writePem(const std::string& path, X509* cert, X509* then = nullptr) {
  FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, "fopen");
  check(PEM_write_X509(f, cert) == 1, "PEM_write_X509");
  if (then) check(PEM_write_X509(f, then) == 1, "PEM_write_X509");
  std::fclose(f);
}

void writeKey(const std::string& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, "fopen");
  check(PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_PrivateKey");
  std::fclose(f);
}

}  // namespace

SSL_CTX* newClientContext(const std::string& ca, const std::string& cert,
                          const std::string& key) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  check(ctx != nullptr, "SSL_CTX_new");
  if (!ca.empty()) {
    check(SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) == 1, "load the CA");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (!cert.empty()) {
    check(SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) == 1, "load the client chain");
    check(SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) == 1,
          "load the client key");
  }
  return ctx;
}

struct TestPki::Impl {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  long next_serial = 2;
};

TestPki::TestPki(const std::string& ca_name) : impl_(new Impl) {
  char pattern[] = "/tmp/infergate-pki-XXXXXX";
  check(mkdtemp(pattern) != nullptr, "mkdtemp");
  dir_ = pattern;
  impl_->key = newKey();
  impl_->cert = newCert(impl_->key, ca_name, 1, std::chrono::seconds(-86400),
                        std::chrono::seconds(30 * 86400));
  X509_set_issuer_name(impl_->cert, X509_get_subject_name(impl_->cert));
  addExtension(impl_->cert, impl_->cert, NID_basic_constraints, "critical,CA:TRUE");
  addExtension(impl_->cert, impl_->cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  addExtension(impl_->cert, impl_->cert, NID_subject_key_identifier, "hash");
  check(X509_sign(impl_->cert, impl_->key, EVP_sha256()) > 0, "X509_sign");
  writePem(caCert(), impl_->cert);
  writeKey(dir_ + "/ca.key", impl_->key);
}

TestPki::~TestPki() {
  X509_free(impl_->cert);
  EVP_PKEY_free(impl_->key);
  delete impl_;
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void TestPki::issue(const std::string& name, const LeafOptions& options) {
  EVP_PKEY* key = newKey();
  X509* cert = newCert(key, options.common_name, impl_->next_serial++, options.not_before,
                       options.not_after);
  X509_set_issuer_name(cert, X509_get_subject_name(impl_->cert));
  addExtension(cert, impl_->cert, NID_basic_constraints, "critical,CA:FALSE");
  addExtension(cert, impl_->cert, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  addExtension(cert, impl_->cert, NID_ext_key_usage, options.client ? "clientAuth" : "serverAuth");
  addExtension(cert, impl_->cert, NID_authority_key_identifier, "keyid:always");
  std::string san;
  auto add = [&](const char* kind, const std::string& value) {
    if (!san.empty()) san += ",";
    san += kind;
    san += ":";
    san += value;
  };
  for (const auto& d : options.dns_names) add("DNS", d);
  for (const auto& ip : options.ip_addresses) add("IP", ip);
  for (const auto& u : options.uris) add("URI", u);
  if (!san.empty()) addExtension(cert, impl_->cert, NID_subject_alt_name, san);
  check(X509_sign(cert, impl_->key, EVP_sha256()) > 0, "X509_sign");
  writePem(this->cert(name), cert, impl_->cert);
  writeKey(this->key(name), key);
  X509_free(cert);
  EVP_PKEY_free(key);
}

}  // namespace infergate::tls::testing
