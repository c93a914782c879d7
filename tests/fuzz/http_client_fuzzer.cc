// Property: the HTTP/1.1 client toward upstreams (gateway/upstream/http_client_native, the
// engine for plaintext IP and unix endpoints) reads an upstream's answer the same however
// the answer is cut into reads. The fuzzer's bytes are what an upstream sends back on a
// unix socket to one request; the client gets them three times:
//
//   whole     written at once, the answer buffered (on_complete only)
//   cut       written in pieces (one byte at a time, or sizes drawn from the input),
//             buffered
//   streamed  written in those pieces, the answer streamed (on_head, on_data...)
//
// and then the end of the stream. The outcomes must agree: the same error (code and
// message) or the same status, headers and body, the streamed pieces joined being that
// body; an error is UNAVAILABLE, or INVALID_ARGUMENT marked as the upstream's, and names
// the upstream; nothing may crash or leak. The first input byte picks the method (GET,
// HEAD, a POST with a body) and the plan of the pieces.

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/listen_address.h"
#include "gateway/http/event_loop.h"
#include "gateway/upstream/http_client.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/upstream_socket.h"

using namespace infergate;
using namespace infergate::gateway;
using upstream::HttpUpstreamCallbacks;
using upstream::HttpUpstreamClient;
using upstream::HttpUpstreamRequest;
using upstream::HttpUpstreamResponse;

namespace {

// What one exchange came to, written out for comparison.
struct Outcome {
  bool done = false;
  std::string text;        // "error <code> <message>" or "<status>\n<headers>\n\n<body>"
  std::string head;        // streamed: what on_head saw
  std::string pieces;      // streamed: the pieces joined
  bool streamed_ok = false;
};

std::string headersText(int status, const http::HeaderList& headers) {
  std::string out = std::to_string(status) + "\n";
  for (const auto& [name, value] : headers) out.append(name).append(": ").append(value).append("\n");
  return out;
}

// One request answered with `answer` written in pieces of the given sizes (cycled), then
// the end of the stream.
Outcome exchange(uint8_t method, std::string_view answer, const std::vector<size_t>& pieces,
                 bool stream) {
  upstream::HttpClientOptions options;
  options.upstream_name = "fuzz";
  auto client = std::make_unique<HttpUpstreamClient>(fuzz::upstreamLoop(), options);

  HttpUpstreamRequest request;
  request.method = method % 3 == 0 ? "GET" : method % 3 == 1 ? "HEAD" : "POST";
  request.target = "/v2/models/fuzz/infer";
  if (request.method == "POST") request.body.append(codecs::Buffer::fromString("{\"inputs\":[]}"));

  Outcome outcome;
  HttpUpstreamCallbacks callbacks;
  if (stream) {
    callbacks.on_head = [&outcome](int status, const http::HeaderList& headers) {
      FUZZ_CHECK(outcome.head.empty());  // once
      outcome.head = headersText(status, headers);
    };
    callbacks.on_data = [&outcome](codecs::Buffer piece) {
      FUZZ_CHECK(!outcome.head.empty());  // after the head
      outcome.pieces.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    };
  }
  callbacks.on_complete = [&outcome, stream](codecs::StatusOr<HttpUpstreamResponse> r) {
    FUZZ_CHECK(!outcome.done);  // once
    outcome.done = true;
    if (!r.ok()) {
      const codecs::Status& s = r.status();
      FUZZ_CHECK(s.code() == absl::StatusCode::kUnavailable ||
                 (s.code() == absl::StatusCode::kInvalidArgument &&
                  codecs::originOf(s) == codecs::ErrorOrigin::kUpstream));
      FUZZ_CHECK(codecs::messageOf(s).find("upstream 'fuzz'") != std::string_view::npos);
      outcome.text = "error " + std::to_string(static_cast<int>(s.code())) + " " +
                     std::string(codecs::messageOf(s));
      return;
    }
    outcome.text = headersText(r->status, r->headers) + "\n";
    if (stream) {
      FUZZ_CHECK(r->body.empty());
      outcome.streamed_ok = true;
    } else {
      outcome.text.append(reinterpret_cast<const char*>(r->body.data()), r->body.size());
    }
  };
  auto handle = client->send(fuzz::unixUpstream("http-client").endpoint, std::move(request), std::move(callbacks));

  std::string request_bytes;
  fuzz::settle(-1, request_bytes);
  int upstream_fd = ::accept4(fuzz::unixUpstream("http-client").fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  FUZZ_CHECK(upstream_fd >= 0);
  fuzz::settle(upstream_fd, request_bytes);
  FUZZ_CHECK(request_bytes.find("\r\n\r\n") != std::string::npos);  // the request went whole

  fuzz::sendInPieces(upstream_fd, answer, pieces, request_bytes);
  ::shutdown(upstream_fd, SHUT_WR);
  fuzz::settle(upstream_fd, request_bytes);
  FUZZ_CHECK(outcome.done);  // the end of the stream ends every exchange
  handle.reset();
  client.reset();
  fuzz::settle(upstream_fd, request_bytes);
  ::close(upstream_fd);
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t method = data[0];
  const uint8_t plan = data[1];
  std::string_view answer(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::vector<size_t> pieces = splitPlan(plan, answer.size());
  Outcome whole = exchange(method, answer, {answer.size() + 1}, /*stream=*/false);
  Outcome cut = exchange(method, answer, pieces, /*stream=*/false);
  FUZZ_CHECK(whole.text == cut.text);
  Outcome streamed = exchange(method, answer, pieces, /*stream=*/true);
  // Streamed or buffered, the same answer fails the same way.
  FUZZ_CHECK(streamed.text.starts_with("error ") == whole.text.starts_with("error "));
  if (!streamed.streamed_ok) FUZZ_CHECK(streamed.text == whole.text);
  if (streamed.streamed_ok) {
    // A streamed answer that ended well is the buffered one, piece by piece.
    FUZZ_CHECK(!whole.text.starts_with("error "));
    FUZZ_CHECK(streamed.head + "\n" + streamed.pieces == whole.text);
  }
  return 0;
}
