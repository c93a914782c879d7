// Property: the HTTP/1.1 connection layer answers a byte stream the same however the
// stream is cut into reads. One connection (gateway/http/http_connection) on one end of
// a socket pair gets the fuzzer's bytes twice: once written whole, once in pieces (one
// byte at a time, or sizes drawn from the input); the bytes it writes back must be equal
// (a refusal too: a request breaking two rules must get the same 4xx however it is
// split; found by this fuzzer, 431 read byte by byte and 400 whole), must be HTTP/1.1
// responses, and a client that ends its side must see the connection
// close. The handler echoes each request (method, target, headers, body) so that every
// parsed field reaches the comparison; some targets are answered later, out of order
// (responses must still leave in request order), some are streamed, and a headers gate
// refuses others before their body or gives their body a place of its own. The first
// input byte picks tight or default limits.

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http/event_loop.h"
#include "gateway/http/http_connection.h"
#include "gateway/http/request_text_testing.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate;
using namespace infergate::gateway::http;

namespace {

EventLoop& loop() {
  static EventLoop* instance = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return new EventLoop();
  }();
  return *instance;
}

HttpLimits limitsFor(uint8_t choice) {
  HttpLimits limits;
  if (choice & 1) limits.max_header_bytes = 160;
  if (choice & 2) limits.max_header_count = 3;
  if (choice & 4) limits.max_body_bytes = 100;
  if (choice & 8) limits.max_chunks = 2;
  if (choice & 16) limits.max_pipelined = 2;
  return limits;
}

// Echoes the request; "/later..." targets are answered by the driver between rounds
// (newest first), "/stream..." targets as a streamed response.
struct Echo {
  std::vector<std::shared_ptr<HttpExchange>> later;

  void handle(const std::shared_ptr<HttpExchange>& exchange) {
    const HttpRequest& request = exchange->request();
    if (request.target.starts_with("/later")) {
      later.push_back(exchange);
      return;
    }
    if (request.target.starts_with("/stream")) {
      HttpResponse head;
      head.header("Content-Type", "text/plain");
      exchange->beginStream(std::move(head));
      exchange->sendChunk(codecs::Buffer::fromString(request.method));
      exchange->sendChunk(codecs::Buffer::fromString(requestText(request)));
      exchange->endStream();
      return;
    }
    answer(*exchange);
  }

  static void answer(HttpExchange& exchange) {
    HttpResponse response;
    response.header("Content-Type", "text/plain");
    response.body.append(codecs::Buffer::fromString(requestText(exchange.request())));
    exchange.respond(std::move(response));
  }

  // True if any was waiting.
  bool answerLater() {
    if (later.empty()) return false;
    auto waiting = std::move(later);
    later.clear();
    for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) answer(**it);
    return true;
  }
};

// Refuses targets under /deny; gives the body of targets under /place memory of its own
// (a BodyPlace, as the handoff does), one byte short of what it needs under /place-short
// (never taken then). Read there or not, the answer must be the same.
std::optional<HttpResponse> gate(HttpRequest& request, tls::ServerSession*) {
  if (request.target.starts_with("/place") && request.content_length &&
      *request.content_length <= (1u << 20)) {
    const size_t need = static_cast<size_t>(*request.content_length) + kRequestBodyPadding;
    const size_t capacity = request.target.starts_with("/place-short") ? need - 1 : need;
    auto memory = std::make_shared<std::vector<uint8_t>>(capacity);
    request.body_place = BodyPlace{memory, memory->data(), capacity};
  }
  if (!request.target.starts_with("/deny")) return std::nullopt;
  return HttpResponse::jsonError(403, "denied by the gate");
}

// Reads what the connection wrote so far; true if anything came.
bool drain(int fd, std::string& out) {
  bool any = false;
  char buffer[65536];
  while (true) {
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
      any = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return any;
  }
}

// Runs the loop until nothing moves: no bytes out, no handler waiting.
void settle(int client, std::string& out, Echo& echo) {
  for (int quiet = 0; quiet < 3;) {
    event_base_loop(loop().base(), EVLOOP_NONBLOCK);
    bool moved = drain(client, out);
    moved = echo.answerLater() || moved;
    quiet = moved ? 0 : quiet + 1;
  }
}

// One connection fed `stream` in pieces of the given sizes (cycled); the bytes it wrote.
std::string serve(std::string_view stream, const std::vector<size_t>& pieces,
                  const HttpLimits& limits) {
  int fds[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
  int client = fds[0];
  Echo echo;
  HttpHandler handler = [&echo](std::shared_ptr<HttpExchange> exchange) { echo.handle(exchange); };
  HeadersGate headers_gate = &gate;
  bool closed = false;
  auto connection = std::make_shared<HttpConnection>(
      loop(), fds[1], limits, handler, [&closed](HttpConnection*) { closed = true; }, nullptr,
      "fuzz", nullptr, &headers_gate);
  connection->start();

  std::string out;
  size_t sent = 0;
  size_t piece = 0;
  int stuck = 0;
  while (sent < stream.size() && stuck < 3) {
    size_t size = std::min(pieces[piece++ % pieces.size()], stream.size() - sent);
    ssize_t n = ::send(client, stream.data() + sent, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    // The connection may stop reading (closing, or its pipeline full): the rest then
    // stays unsent, the same way in every run.
    stuck = n > 0 ? 0 : stuck + 1;
    if (n > 0) sent += static_cast<size_t>(n);
    settle(client, out, echo);
  }
  ::shutdown(client, SHUT_WR);
  settle(client, out, echo);
  FUZZ_CHECK(closed);  // the client's end of stream ends the connection
  connection.reset();
  ::close(client);
  return out;
}

// A 100 Continue goes out only while no earlier response is pending, which depends on
// how far the earlier handlers got: not part of the comparison.
std::string withoutContinues(std::string text) {
  constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  for (size_t at; (at = text.find(kContinue)) != std::string::npos;) text.erase(at, kContinue.size());
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  HttpLimits limits = limitsFor(data[0]);
  uint8_t plan = data[1];
  std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::vector<size_t> pieces = splitPlan(plan, stream.size());
  std::string whole = withoutContinues(serve(stream, {stream.size() + 1}, limits));
  std::string cut = withoutContinues(serve(stream, pieces, limits));
  FUZZ_CHECK(whole == cut);
  FUZZ_CHECK(whole.empty() || whole.starts_with("HTTP/1.1 "));
  return 0;
}
