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

#include <sys/socket.h>
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
#include "tests/fuzz/upstream_socket.h"

using namespace infergate;
using namespace infergate::gateway;

namespace {

// One call answered with `answer` written in pieces of the given sizes (cycled), then the
// end of the stream. Returns the outcome as text.
std::string answerCall(std::string_view answer, const std::vector<size_t>& pieces) {
  upstream::GrpcLoopClientOptions options;
  options.upstream_name = "fuzz";
  auto client = std::make_unique<upstream::GrpcLoopClient>(fuzz::upstreamLoop(), options);

  bool inside_unary = true;
  bool done = false;
  std::string outcome;
  const std::string message = "\x0a\x04" "fuzz";  // ModelInferRequest{model_name: "fuzz"}
  const codecs::MovableByteBuffer request(codecs::BufferChain(codecs::Buffer::fromString(message)));
  auto handle = client->unary(
      fuzz::unixUpstream("grpc-client").endpoint, "/inference.GRPCInferenceService/ModelInfer", request, {},
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
  fuzz::settle(-1, request_bytes);
  int upstream_fd = ::accept4(fuzz::unixUpstream("grpc-client").fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  FUZZ_CHECK(upstream_fd >= 0);
  fuzz::settle(upstream_fd, request_bytes);
  FUZZ_CHECK(request_bytes.starts_with("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));

  // What follows the call's end cannot change it.
  fuzz::sendInPieces(upstream_fd, answer, pieces, request_bytes, [&done] { return done; });
  ::shutdown(upstream_fd, SHUT_WR);
  fuzz::settle(upstream_fd, request_bytes);
  // A call refused unread (a GOAWAY that does not cover it, REFUSED_STREAM) is sent once
  // more on a new connection: the upstream closes those at once.
  for (int more; (more = ::accept4(fuzz::unixUpstream("grpc-client").fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
    ::close(more);
    fuzz::settle(-1, request_bytes);
  }
  FUZZ_CHECK(done);  // the end of the stream ends every call
  handle.reset();
  client.reset();
  fuzz::settle(upstream_fd, request_bytes);
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
