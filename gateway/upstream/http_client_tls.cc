#include "gateway/upstream/http_client_tls.h"

#include "codecs/status.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::strCat;

// A host as a URL (and CURLOPT_CONNECT_TO) writes it: IPv6 bracketed, a zone's '%'
// escaped.
std::string urlHost(const std::string& host) {
  if (host.find(':') == std::string::npos) return host;
  std::string escaped;
  for (char c : host) {
    if (c == '%') {
      escaped += "%25";
    } else {
      escaped += c;
    }
  }
  return strCat("[", escaped, "]");
}

}  // namespace

std::string baseUrl(const config::ListenAddress& e, const HttpClientTls* tls) {
  const char* scheme = tls ? "https://" : "http://";
  const bool named = tls && !tls->server_name.empty();
  // A unix socket's URL host is only a name: the path goes in CURLOPT_UNIX_SOCKET_PATH.
  if (e.kind == config::ListenAddress::Kind::kUnix) {
    return strCat(scheme, named ? tls->server_name : std::string("localhost"));
  }
  return strCat(scheme, named ? tls->server_name : urlHost(e.host), ":", e.port);
}

CURLcode setTlsOptions(CURL* e, const HttpClientTls& tls, const config::ListenAddress& endpoint,
                       curl_slist** connect_to) {
  CURLcode rc = CURLE_OK;
  auto set = [&](CURLoption option, auto value) {
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, option, value);
  };
  auto blob = [](const std::string& bytes) {
    return curl_blob{const_cast<char*>(bytes.data()), bytes.size(), CURL_BLOB_NOCOPY};
  };

  set(CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  set(CURLOPT_SSL_VERIFYPEER, tls.verify ? 1L : 0L);
  set(CURLOPT_SSL_VERIFYHOST, tls.verify ? 2L : 0L);
  // Never the CA directory: with it libcurl 7.88 reads the whole trust store again for
  // each new connection (it caches a store read from a bundle file alone), and with `ca`
  // it would trust the directory's CAs besides the given ones.
  set(CURLOPT_CAPATH, static_cast<const char*>(nullptr));
  if (!tls.ca_pem.empty() || !tls.verify) {
    // Only the given bundle (or, verifying nothing, none: no file read at all).
    set(CURLOPT_CAINFO, static_cast<const char*>(nullptr));
  }
  if (!tls.ca_pem.empty()) {
    curl_blob ca = blob(tls.ca_pem);
    set(CURLOPT_CAINFO_BLOB, &ca);  // libcurl keeps the pointer and length, not `ca`
  }
  if (!tls.cert_pem.empty()) {
    curl_blob cert = blob(tls.cert_pem);
    curl_blob key = blob(tls.key_pem);
    set(CURLOPT_SSLCERT_BLOB, &cert);
    set(CURLOPT_SSLCERTTYPE, "PEM");
    set(CURLOPT_SSLKEY_BLOB, &key);
    set(CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (!tls.server_name.empty() && endpoint.kind == config::ListenAddress::Kind::kTcp) {
    const std::string entry = strCat(tls.server_name, ":", endpoint.port, ":",
                                     urlHost(endpoint.host), ":", endpoint.port);
    curl_slist* list = curl_slist_append(nullptr, entry.c_str());
    if (list == nullptr) return CURLE_OUT_OF_MEMORY;
    *connect_to = list;
    set(CURLOPT_CONNECT_TO, list);
  }
  return rc;
}

CURLSH* newTlsSessionShare() {
  CURLSH* share = curl_share_init();
  if (share == nullptr) return nullptr;
  if (curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
    curl_share_cleanup(share);
    return nullptr;
  }
  return share;
}

}  // namespace infergate::gateway::upstream
