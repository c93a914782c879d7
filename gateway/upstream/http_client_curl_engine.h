#pragma once

// HttpUpstreamClient's libcurl engine (TLS and host-name endpoints; http_client.h), shared
// by the two files that define it: http_client.cc (the multi handle on the loop, requests,
// connections, delivery) and http_client_curl_answer.cc (libcurl's data callbacks and what
// its result codes mean). Internal: no other file includes it.

#include <curl/curl.h>
#include <event2/event.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/event_loop.h"
#include "gateway/http/http_message.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway::upstream::curl_detail {

class CurlMultiClient;

// One request: the handle the caller holds, and the state libcurl's callbacks fill in.
class Call final : public HttpCallHandle, public std::enable_shared_from_this<Call> {
 public:
  ~Call() override {
    if (header_list) curl_slist_free_all(header_list);
    if (connect_to) curl_slist_free_all(connect_to);
  }
  void cancel() override;

  // Null once the call ended (delivered, cancelled) or the client was destroyed.
  CurlMultiClient* owner = nullptr;
  CURL* easy = nullptr;       // while the transfer is in the multi handle
  event* deadline = nullptr;  // the backstop timer, while armed
  curl_slist* header_list = nullptr;
  curl_slist* connect_to = nullptr;  // TLS with server_name (http_client_tls.h)
  SharedHttpRequest request;  // keeps the body's segments alive while libcurl reads them
  HttpUpstreamCallbacks callbacks;
  bool streaming = false;  // on_head was given: pieces instead of one body
  std::string endpoint;    // for messages
  std::chrono::steady_clock::time_point started;
  char error[CURL_ERROR_SIZE] = {};

  // Upload position in request.body.
  size_t segment = 0;
  size_t segment_offset = 0;
  // libcurl took body bytes (or rewound to send them again): the request may have reached
  // the upstream, even when the exchange ends in a connect error (libcurl re-sends on a new
  // connection when a reused one breaks, and that connect may fail).
  bool body_taken = false;

  // The response as it arrives. A new status line (after a 1xx) starts over.
  int status = 0;
  std::vector<std::pair<std::string, std::string>> raw_headers;
  std::optional<uint64_t> content_length;
  bool head_complete = false;  // the final response's header block ended
  http::HeaderList headers;    // built from raw_headers once head_complete
  codecs::MutableBuffer body;  // buffered mode
  size_t body_used = 0;
  std::vector<codecs::Buffer> pieces;  // streaming mode, not yet delivered
  codecs::Status local_error;                  // set by our own callbacks (memory)

  // Delivery state.
  bool queued = false;  // in CurlMultiClient::news_
  bool head_delivered = false;
  bool finished = false;  // left the multi handle; `outcome` is final
  codecs::Status outcome;
};

class CurlMultiClient {
 public:
  CurlMultiClient(http::EventLoop& loop, HttpClientOptions options);
  ~CurlMultiClient();

  std::shared_ptr<HttpCallHandle> send(const config::ListenAddress& endpoint,
                                       SharedHttpRequest request,
                                       HttpUpstreamCallbacks callbacks);
  void cancel(Call& call);
  // Ends every call in flight without calling back (see HttpUpstreamClient::abandonAll).
  void abandonAll();

  // libcurl's data callbacks (userdata: the Call).
  static size_t onHeader(char* data, size_t size, size_t count, void* userdata);
  static size_t onWrite(char* data, size_t size, size_t count, void* userdata);
  static size_t onRead(char* dest, size_t size, size_t count, void* userdata);
  static int onSeek(void* userdata, curl_off_t offset, int origin);

 private:
  // libcurl -> libevent
  static int onSocketUpdate(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp);
  static int onTimerUpdate(CURLM* multi, long timeout_ms, void* userp);
  // libevent -> libcurl
  static void onSocketReady(evutil_socket_t fd, short events, void* arg);
  // The connections' sockets (CURLOPT_OPENSOCKETFUNCTION / CLOSESOCKETFUNCTION; clientp:
  // the client), and the watch on one that sits idle in libcurl's cache.
  static curl_socket_t onOpenSocket(void* clientp, curlsocktype purpose, curl_sockaddr* address);
  static int onCloseSocket(void* clientp, curl_socket_t fd);
  static void onIdleReadable(evutil_socket_t fd, short events, void* arg);
  void dropIdleWatch(curl_socket_t fd);
  static void onTimeout(evutil_socket_t fd, short events, void* arg);
  static void onDeadline(evutil_socket_t fd, short events, void* arg);

  void afterAction();
  void collectFinished();
  void deliverNews();
  void markNews(Call& call);

  void armDeadline(Call& call);
  void dropDeadline(Call& call);
  // Takes an unfinished transfer out of the multi handle; its connection is closed.
  void abandonTransfer(Call& call);

  CURL* acquireEasy();
  void releaseEasy(CURL* easy);
  codecs::Status configure(Call& call, const config::ListenAddress& endpoint);
  // Ends `call` with `status` from the loop soon (never inside send()).
  void failSoon(const std::shared_ptr<Call>& call, codecs::Status status);
  codecs::Status outcomeOf(const Call& call, CURLcode result) const;
  std::string prefix(const Call& call) const;

  http::EventLoop& loop_;
  HttpClientOptions options_;
  CURLM* multi_ = nullptr;
  CURLSH* tls_sessions_ = nullptr;  // with options_.tls: sessions shared by the handles
  event* timer_ = nullptr;
  std::unordered_map<curl_socket_t, event*> sockets_;
  std::unordered_set<curl_socket_t> connections_;   // opened by onOpenSocket, still open
  std::unordered_map<curl_socket_t, event*> idle_;  // connections libcurl holds idle
  std::vector<CURL*> idle_easies_;
  std::unordered_map<Call*, std::shared_ptr<Call>> calls_;  // not yet delivered whole
  std::vector<std::shared_ptr<Call>> news_;
  bool* destroyed_ = nullptr;  // while delivering: set by the destructor
};

}  // namespace infergate::gateway::upstream::curl_detail
