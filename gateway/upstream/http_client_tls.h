#pragma once

// The HTTP client's TLS (https toward an upstream): the URL an endpoint is reached at and
// the libcurl options of each request. Internal to http_client.cc.
//
//   URL      "https://HOST:PORT" (the endpoint's host), or "https://SERVER_NAME:PORT" when
//            server_name is set: libcurl then sends server_name as SNI and verifies it in
//            the certificate, and CURLOPT_CONNECT_TO "SERVER_NAME:PORT:HOST:PORT" still
//            sends the connection to the endpoint (no name is resolved). A unix: endpoint
//            is "https://localhost" or "https://SERVER_NAME" over its socket.
//   trust    the CA bundle's bytes (CURLOPT_CAINFO_BLOB), and no CA file or directory: with
//            `ca` set, only that bundle is trusted (Debian's libcurl would otherwise add
//            /etc/ssl/certs). Without `ca`, libcurl's default bundle file (the system's,
//            /etc/ssl/certs/ca-certificates.crt on Debian), read once per client and cached
//            by libcurl; never the CA directory, which libcurl reads again per connection.
//   client   certificate chain and key as PEM blobs (mTLS).
//   checks   VERIFYPEER 1 and VERIFYHOST 2, TLS 1.2 at least; both checks off only with
//            insecure_skip_verify.
//
// The bytes were read when the upstream was set up (tls/client_credentials.h), so a
// request never opens a file on the loop thread. The blobs are not copied: they live in
// the client's options, which outlive every easy handle (an idle handle is reset; libcurl
// copies what a cached connection keeps).

#include <curl/curl.h>

#include <string>

#include "config/config.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway::upstream {

// The scheme and authority of `endpoint`'s URL; `tls` null = plaintext.
std::string baseUrl(const config::ListenAddress& endpoint, const HttpClientTls* tls);

// Sets the TLS options on `easy` for a request to `endpoint`. `*connect_to` receives the
// CURLOPT_CONNECT_TO list the handle then refers to (or stays null): the caller frees it
// once the handle is reset or cleaned up.
CURLcode setTlsOptions(CURL* easy, const HttpClientTls& tls, const config::ListenAddress& endpoint,
                       curl_slist** connect_to);

// A share of TLS sessions between the client's easy handles, so that a new connection to
// an endpoint resumes the session of an earlier one; null when libcurl cannot make one
// (sessions are then per handle). One loop thread uses it: no locking.
CURLSH* newTlsSessionShare();

}  // namespace infergate::gateway::upstream
