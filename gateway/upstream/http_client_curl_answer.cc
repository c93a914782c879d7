// HttpUpstreamClient's libcurl engine, the answer's side: libcurl's data callbacks (inside
// curl_multi_socket_action, they only record) and what a transfer's result code means for
// the caller. The rest is in http_client.cc; the classes in http_client_curl_engine.h.

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "codecs/buffer_pool.h"
#include "gateway/upstream/http_client_common.h"
#include "gateway/upstream/http_client_curl_engine.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway::upstream::curl_detail {
namespace {

using codecs::Status;
using codecs::strCat;
using http_client_detail::callPrefix;
using http_client_detail::equalsIgnoreCase;
using http_client_detail::kInitialBodyBytes;
using http_client_detail::kMaxReservedBodyBytes;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

// ---- libcurl data callbacks (inside curl_multi_socket_action: record only) ----

size_t CurlMultiClient::onHeader(char* data, size_t size, size_t count, void* userdata) {
  auto& call = *static_cast<Call*>(userdata);
  size_t length = size * count;
  if (call.head_complete) return length;  // trailers of a chunked body: not part of the head
  std::string_view line = trim(std::string_view(data, length));
  if (line.substr(0, 5) == "HTTP/") {
    // A status line: a 1xx's headers are dropped by starting over.
    call.status = 0;
    call.raw_headers.clear();
    call.content_length.reset();
    size_t space = line.find(' ');
    if (space != line.npos) {
      std::string_view code = line.substr(space + 1, 3);
      std::from_chars(code.data(), code.data() + code.size(), call.status);
    }
    return length;
  }
  if (line.empty()) {  // the end of a header block
    if (call.status >= 200) {
      call.head_complete = true;
      for (auto& [name, value] : call.raw_headers) {
        call.headers.add(name, value);
      }
      call.raw_headers.clear();
      if (call.streaming && call.owner != nullptr) call.owner->markNews(call);
    }
    return length;
  }
  if ((data[0] == ' ' || data[0] == '\t') && !call.raw_headers.empty()) {
    // obs-fold: a continuation of the previous header's value.
    call.raw_headers.back().second.append(" ").append(line);
    return length;
  }
  size_t colon = line.find(':');
  if (colon == line.npos) return length;  // not a header line; libcurl judged the framing
  std::string_view name = trim(line.substr(0, colon));
  std::string_view value = trim(line.substr(colon + 1));
  if (equalsIgnoreCase(name, "content-length")) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec == std::errc() && end == value.data() + value.size()) call.content_length = n;
  }
  call.raw_headers.emplace_back(std::string(name), std::string(value));
  return length;
}

size_t CurlMultiClient::onWrite(char* data, size_t size, size_t count, void* userdata) {
  auto& call = *static_cast<Call*>(userdata);
  size_t length = size * count;
  if (length == 0) return 0;
  // No exception may unwind through libcurl; returning less than `length` fails the
  // transfer (CURLE_WRITE_ERROR) and local_error says why.
  try {
    if (call.streaming) {
      call.pieces.push_back(codecs::Buffer::copyOf(std::string_view(data, length)));
      if (call.owner != nullptr) call.owner->markNews(call);
      return length;
    }
    size_t needed = call.body_used + length;
    if (needed > call.body.size()) {
      size_t capacity = std::max({needed, call.body.size() * 2, kInitialBodyBytes});
      if (call.body.size() == 0 && call.content_length && *call.content_length >= needed &&
          *call.content_length <= kMaxReservedBodyBytes) {
        capacity = static_cast<size_t>(*call.content_length);  // the one allocation
      }
      codecs::MutableBuffer grown = codecs::BufferPool::shared().allocate(capacity);
      if (call.body_used > 0) std::memcpy(grown.data(), call.body.data(), call.body_used);
      call.body = std::move(grown);
    }
    std::memcpy(call.body.data() + call.body_used, data, length);
    call.body_used += length;
    return length;
  } catch (const std::bad_alloc&) {
    call.local_error =
        codecs::withOrigin(codecs::resourceExhausted(
                               "upstream '", call.owner ? call.owner->options_.upstream_name : "",
                               "' (", call.endpoint, "): no memory for a response body of ",
                               call.body_used + length, "+ bytes"),
                           codecs::ErrorOrigin::kInternal);
    return 0;
  }
}

size_t CurlMultiClient::onRead(char* dest, size_t size, size_t count, void* userdata) {
  auto& call = *static_cast<Call*>(userdata);
  const std::vector<codecs::Buffer>& segments = call.request->body.segments();
  size_t room = size * count;
  size_t copied = 0;
  while (copied < room && call.segment < segments.size()) {
    const codecs::Buffer& segment = segments[call.segment];
    size_t take = std::min(room - copied, segment.size() - call.segment_offset);
    std::memcpy(dest + copied, segment.data() + call.segment_offset, take);
    copied += take;
    call.body_taken = true;
    call.segment_offset += take;
    if (call.segment_offset == segment.size()) {
      ++call.segment;
      call.segment_offset = 0;
    }
  }
  return copied;
}

int CurlMultiClient::onSeek(void* userdata, curl_off_t offset, int origin) {
  auto& call = *static_cast<Call*>(userdata);
  call.body_taken = true;
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  auto remaining = static_cast<uint64_t>(offset);
  const std::vector<codecs::Buffer>& segments = call.request->body.segments();
  for (size_t i = 0; i < segments.size(); ++i) {
    if (remaining < segments[i].size()) {
      call.segment = i;
      call.segment_offset = static_cast<size_t>(remaining);
      return CURL_SEEKFUNC_OK;
    }
    remaining -= segments[i].size();
  }
  if (remaining != 0) return CURL_SEEKFUNC_FAIL;
  call.segment = segments.size();
  call.segment_offset = 0;
  return CURL_SEEKFUNC_OK;
}

// ---- errors ----

std::string CurlMultiClient::prefix(const Call& call) const {
  return callPrefix(options_.upstream_name, call.endpoint);
}

Status CurlMultiClient::outcomeOf(const Call& call, CURLcode result) const {
  if (!call.local_error.ok()) return call.local_error;
  if (result == CURLE_OK) return Status();
  long os_errno = 0;
  curl_easy_getinfo(call.easy, CURLINFO_OS_ERRNO, &os_errno);
  // libcurl's own text (error buffer, else the code's name) follows our summary in
  // parentheses: ours says what it means for the request, libcurl's what happened.
  std::string detail = call.error[0] != '\0' ? std::string(call.error) : curl_easy_strerror(result);
  auto message = [&](std::string_view what) {
    return strCat(prefix(call), what, " (", detail, ")");
  };
  auto upstream = [](Status s) {
    return codecs::withOrigin(std::move(s), codecs::ErrorOrigin::kUpstream);
  };
  // A connect error is "never sent" only for a request whose body libcurl never took.
  auto markNotSent = [&call](Status s) {
    return call.body_taken ? s : gateway::upstream::markNotSent(std::move(s));
  };
  switch (result) {
    case CURLE_COULDNT_CONNECT:
      return markNotSent(upstream(absl::UnavailableError(
          message(os_errno == ECONNREFUSED ? "connection refused" : "cannot connect"))));
    case CURLE_COULDNT_RESOLVE_HOST:
      return markNotSent(upstream(absl::UnavailableError(message("cannot resolve the host name"))));
    case CURLE_SSL_CONNECT_ERROR:
      return markNotSent(upstream(absl::UnavailableError(message("TLS handshake failed"))));
    case CURLE_PEER_FAILED_VERIFICATION:
      return markNotSent(upstream(absl::UnavailableError(
          message("the upstream's TLS certificate was not accepted"))));
    case CURLE_SEND_ERROR:
      return upstream(
          absl::UnavailableError(message("connection broken while sending the request")));
    case CURLE_RECV_ERROR:
      // libcurl 7.88 reports a broken chunked body with this code too ("Illegal or missing
      // hexadecimal sequence in chunked-encoding"): a malformed answer (502), not a broken
      // connection (503).
      if (detail.find("chunked-encoding") != std::string::npos) {
        return upstream(codecs::invalidArgument(message("answered a malformed chunked body")));
      }
      return upstream(
          absl::UnavailableError(message("connection broken while receiving the response")));
    case CURLE_GOT_NOTHING:
      return upstream(absl::UnavailableError(message("connection closed without a response")));
    case CURLE_PARTIAL_FILE:
      return upstream(
          absl::UnavailableError(message("connection closed before the whole response arrived")));
    case CURLE_SEND_FAIL_REWIND:
      return upstream(
          absl::UnavailableError(message("connection lost and the request could not be resent")));
    case CURLE_OPERATION_TIMEDOUT: {
      // libcurl reports the request's timeout and the connect timeout with the same code.
      // Its clock starts after `started`, so when the request's timeout fired our elapsed
      // time is at least that timeout; anything earlier was the connect timeout.
      auto elapsed = std::chrono::steady_clock::now() - call.started;
      if (call.request->timeout.count() > 0 && elapsed >= call.request->timeout) {
        return upstream(absl::DeadlineExceededError(message(strCat(
            "no response within the request's timeout of ", call.request->timeout.count(), " ms"))));
      }
      return markNotSent(upstream(absl::UnavailableError(
          message(strCat("cannot connect within ", options_.connect_timeout.count(), " ms")))));
    }
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return upstream(
          codecs::invalidArgument(message("answered something that is not an HTTP/1.x response")));
    case CURLE_BAD_CONTENT_ENCODING:
      return upstream(
          codecs::invalidArgument(message("answered a body with a malformed encoding")));
    case CURLE_URL_MALFORMAT:
      // The target (the client's, or a rewrite of it) is not sendable: the request's fault.
      return codecs::invalidArgument(
          message(strCat("the target \"", call.request->target, "\" cannot be sent")));
    case CURLE_SSL_CERTPROBLEM:      // the client certificate or CA bundle, checked at
    case CURLE_SSL_CACERT_BADFILE:   // set-up: libcurl refusing them is ours to fix
    case CURLE_OUT_OF_MEMORY:
    case CURLE_WRITE_ERROR:
    case CURLE_READ_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_FAILED_INIT:
      return codecs::withOrigin(
          codecs::internalError(message("the transfer failed inside the gateway")),
          codecs::ErrorOrigin::kInternal);
    default:
      return upstream(absl::UnavailableError(message("the exchange failed")));
  }
}

}  // namespace infergate::gateway::upstream::curl_detail
