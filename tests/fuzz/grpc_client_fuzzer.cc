// Property: the gateway's own gRPC client (gateway/upstream/grpc_client_native, HTTP/2
// through nghttp2 on the worker's loop) reads an upstream's answer the same however it is
// cut into reads. The fuzzer's bytes are what an upstream sends back on a unix socket, its
// server preface first, to one ModelInfer call (stream 1); the client gets them twice:
//
//   whole   written at once
//   cut     written in pieces (one byte at a time, or sizes drawn from the input)
//
// and then the end of the stream. The outcomes must agree: the same status (code and
// message) and the same answer bytes. `done` runs exactly once, never inside unary(); an
// error the gateway made (an unreachable, reset or broken upstream) names the upstream;
// nothing may crash, leak or wait. A call sent again on a new connection (refused unread)
// finds that connection closed at once. The first input byte is the plan of the pieces.

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/grpc_byte_buffer.h"
#include "config/listen_address.h"
#include "gateway/http/event_loop.h"
#include "gateway/upstream/grpc_client_native.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate;
using namespace infergate::gateway;

namespace {

http::EventLoop& loop() {
  static http::EventLoop* instance = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return new http::EventLoop();
  }();
  return *instance;
}

struct Listener {
  int fd = -1;
  config::ListenAddress endpoint;
};

std::string socketPath() { return "/tmp/infergate-grpc-client-fuzz." + std::to_string(::getpid()); }

const Listener& listener() {
  static Listener* instance = [] {
    auto* l = new Listener();
    const std::string path = socketPath();
    ::unlink(path.c_str());
    l->fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path.copy(a.sun_path, sizeof(a.sun_path) - 1);
    FUZZ_CHECK(::bind(l->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    FUZZ_CHECK(::listen(l->fd, 16) == 0);
    std::atexit([] { ::unlink(socketPath().c_str()); });
    auto parsed = config::parseEndpointAddress("unix:" + path);
    FUZZ_CHECK(parsed.ok());
    l->endpoint = *parsed;
    return l;
  }();
  return *instance;
}

// Runs the loop until neither it nor the upstream's socket moves for three turns.
void settle(int upstream_fd, std::string& request_bytes) {
  for (int quiet = 0; quiet < 3;) {
    event_base_loop(loop().base(), EVLOOP_NONBLOCK);
    bool moved = false;
    if (upstream_fd >= 0) {
      char buffer[4096];
      ssize_t n;
      while ((n = ::recv(upstream_fd, buffer, sizeof(buffer), MSG_DONTWAIT)) > 0) {
        request_bytes.append(buffer, static_cast<size_t>(n));
        moved = true;
      }
    }
    quiet = moved ? 0 : quiet + 1;
  }
}

// One call answered with `answer` written in pieces of the given sizes (cycled), then the
// end of the stream. Returns the outcome as text.
std::string answerCall(std::string_view answer, const std::vector<size_t>& pieces) {
  upstream::GrpcLoopClientOptions options;
  options.upstream_name = "fuzz";
  auto client = std::make_unique<upstream::GrpcLoopClient>(loop(), options);

  bool inside_unary = true;
  bool done = false;
  std::string outcome;
  const std::string message = "\x0a\x04" "fuzz";  // ModelInferRequest{model_name: "fuzz"}
  grpc::Slice slice(message.data(), message.size());
  grpc::ByteBuffer request(&slice, 1);
  auto handle = client->unary(
      listener().endpoint, "/inference.GRPCInferenceService/ModelInfer", request, {},
      [&](codecs::Status status, grpc::ByteBuffer response) {
        FUZZ_CHECK(!inside_unary);
        FUZZ_CHECK(!done);  // once
        done = true;
        if (!status.ok()) {
          if (codecs::originOf(status) == codecs::ErrorOrigin::kUpstream) {
            FUZZ_CHECK(codecs::messageOf(status).find("upstream 'fuzz'") != std::string_view::npos);
          }
          outcome = "error " + std::to_string(static_cast<int>(status.code())) + " " +
                    std::string(codecs::messageOf(status));
          return;
        }
        if (!response.Valid()) {
          outcome = "ok, no message";
          return;
        }
        codecs::StatusOr<codecs::Buffer> flat = codecs::fromByteBuffer(response);
        FUZZ_CHECK(flat.ok());
        outcome = "ok " + std::string(flat->view());
      });
  inside_unary = false;

  std::string request_bytes;
  settle(-1, request_bytes);
  int upstream_fd = ::accept4(listener().fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  FUZZ_CHECK(upstream_fd >= 0);
  settle(upstream_fd, request_bytes);
  FUZZ_CHECK(request_bytes.starts_with("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));

  size_t sent = 0, piece = 0;
  int stuck = 0;
  while (sent < answer.size() && stuck < 3) {
    const size_t size = std::min(pieces[piece++ % pieces.size()], answer.size() - sent);
    const ssize_t n = ::send(upstream_fd, answer.data() + sent, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    // The client may have closed the connection (the call over, or the session broken):
    // the rest stays unsent, the same way in every run.
    stuck = n > 0 ? 0 : stuck + 1;
    if (n > 0) sent += static_cast<size_t>(n);
    settle(upstream_fd, request_bytes);
    if (done) break;  // what follows the call's end cannot change it
  }
  ::shutdown(upstream_fd, SHUT_WR);
  settle(upstream_fd, request_bytes);
  // A call refused unread (a GOAWAY that does not cover it, REFUSED_STREAM) is sent once
  // more on a new connection: the upstream closes those at once.
  for (int more; (more = ::accept4(listener().fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
    ::close(more);
    settle(-1, request_bytes);
  }
  FUZZ_CHECK(done);  // the end of the stream ends every call
  handle.reset();
  client.reset();
  settle(upstream_fd, request_bytes);
  ::close(upstream_fd);
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t plan = data[0];
  std::string_view answer(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string whole = answerCall(answer, {answer.size() + 1});
  const std::string cut = answerCall(answer, splitPlan(plan, answer.size()));
  if (whole != cut) std::fprintf(stderr, "whole: %s\ncut:   %s\n", whole.c_str(), cut.c_str());
  FUZZ_CHECK(whole == cut);
  return 0;
}
