#pragma once

// PEM bytes held in memory, as OpenSSL reads them: owning pointers for what it returns,
// a read-only memory BIO over a string, and the passphrase callback that never prompts.
// Internal to tls/ (client_credentials.cc checks the files, client_session.cc builds the
// context from the same bytes).

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace infergate::tls::pem {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// Reads `bytes` in place: they must outlive the BIO.
inline BioPtr memoryBio(const std::string& bytes) {
  return BioPtr(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
}

// Never asks for a passphrase: OpenSSL's default callback would prompt on the terminal.
inline int noPassphrase(char*, int, int, void*) { return -1; }

}  // namespace infergate::tls::pem
