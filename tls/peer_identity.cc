#include "tls/peer_identity.h"

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>

namespace infergate::tls {
namespace {

std::string nameText(const X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(std::max(len, 0L)));
  BIO_free(bio);
  return text;
}

std::string asn1Text(const ASN1_STRING* s) {
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, s);
  if (len < 0) return {};
  std::string text(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  return text;
}

}  // namespace

PeerIdentity identityOf(X509* cert) {
  PeerIdentity identity;
  const X509_NAME* subject = X509_get_subject_name(cert);
  identity.subject = nameText(subject);
  int cn = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (cn >= 0) {
    identity.common_name = asn1Text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, cn)));
  }
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
      switch (n->type) {
        case GEN_DNS: identity.dns_names.push_back(asn1Text(n->d.dNSName)); break;
        case GEN_URI: identity.uris.push_back(asn1Text(n->d.uniformResourceIdentifier)); break;
        case GEN_EMAIL: identity.emails.push_back(asn1Text(n->d.rfc822Name)); break;
        default: break;
      }
    }
    GENERAL_NAMES_free(names);
  }
  return identity;
}

std::optional<PeerIdentity> identityOfPem(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return std::nullopt;
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return std::nullopt;
  PeerIdentity identity = identityOf(cert);
  X509_free(cert);
  return identity;
}

}  // namespace infergate::tls
