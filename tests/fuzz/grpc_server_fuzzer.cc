// Property: the gRPC frontend's own HTTP/2 server (gateway/frontends/grpc_native_server.h)
// survives whatever a client sends, and goes on serving. The fuzzer's bytes are what a
// client sends after HTTP/2's connection preface, on a unix socket, to a GrpcFrontend
// serving the builtin demo models (one worker loop; small limits, so that they are hit):
// written in pieces (sizes drawn from the first input byte), then the client's end of the
// connection. The server must then close the connection within a few seconds, and a
// well-formed ModelInfer on a fresh connection must be answered right. Nothing may crash or
// leak (the sanitizers watch the server in this process).

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/frontends/grpc_frontend.h"
#include "gateway/http/worker_pool.h"
#include "grpc_service.grpc.pb.h"
#include "tests/fuzz/fuzz_util.h"

using namespace infergate;
using namespace infergate::gateway;

namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct Server {
  std::unique_ptr<http::WorkerPool> pool;
  std::unique_ptr<frontends::GrpcFrontend> frontend;
  std::string path;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
};

Server& server() {
  static Server* instance = [] {
    ::signal(SIGPIPE, SIG_IGN);
    auto* s = new Server();
    s->pool = std::make_unique<http::WorkerPool>(1);
    s->pool->start();
    auto repository = builtin::ModelRepository::createDemo();
    auto settings = std::make_shared<SettingsStore>(repositoryModelCheck(repository));
    auto health = std::make_shared<ServerHealth>();
    health->ready = true;
    frontends::GrpcFrontendOptions options;
    options.max_receive_message_bytes = 1 << 20;
    options.max_metadata_bytes = 8192;
    options.handshake_timeout_ms = 2000;
    s->frontend = std::make_unique<frontends::GrpcFrontend>(Router::builtinOnly(repository, *s->pool), settings,
                                                            ServerInfo{}, health, *s->pool, options);
    s->path = "/tmp/infergate-grpc-server-fuzz." + std::to_string(::getpid());
    ::unlink(s->path.c_str());
    auto bound = s->frontend->start("unix:" + s->path);
    FUZZ_CHECK(bound.ok());
    std::atexit([] { ::unlink(server().path.c_str()); });
    s->stub = inference::GRPCInferenceService::NewStub(
        ::grpc::CreateChannel("unix:" + s->path, ::grpc::InsecureChannelCredentials()));
    return s;
  }();
  return *instance;
}

int connectServer() {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  server().path.copy(a.sun_path, sizeof(a.sun_path) - 1);
  FUZZ_CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// Reads (and drops) what the server sends until it closes; false when it has not within
// `wait`.
bool drainUntilClosed(int fd, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  char buffer[65536];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

void sendPieces(int fd, std::string_view bytes, const std::vector<size_t>& pieces) {
  size_t sent = 0, piece = 0;
  while (sent < bytes.size()) {
    const size_t size = std::min(pieces[piece++ % pieces.size()], bytes.size() - sent);
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 1000) <= 0) return;  // the server stopped reading: what is left is moot
    const ssize_t n = ::send(fd, bytes.data() + sent, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return;  // it closed
    if (n > 0) sent += static_cast<size_t>(n);
    // drop what came back meanwhile, so that the server is never blocked on a full socket
    char buffer[65536];
    while (::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) > 0) {
    }
  }
}

void checkServing() {
  inference::ModelInferRequest request;
  request.set_model_name("simple");
  request.set_id("check");
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(16);
    request.add_raw_input_contents(std::string(64, '\x01'));
  }
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  inference::ModelInferResponse response;
  ::grpc::Status s = server().stub->ModelInfer(&ctx, request, &response);
  if (!s.ok()) std::fprintf(stderr, "the server stopped serving: %s\n", s.error_message().c_str());
  FUZZ_CHECK(s.ok());
  FUZZ_CHECK(response.id() == "check");
  FUZZ_CHECK(response.raw_output_contents_size() == 2);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  server();
  const std::vector<size_t> pieces = splitPlan(data[0], size - 1);
  std::string bytes(kPreface);
  bytes.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int fd = connectServer();
  sendPieces(fd, bytes, pieces);
  // A moment for the calls to be answered before the client's end cancels what is left.
  (void)drainUntilClosed(fd, std::chrono::milliseconds(20));
  ::shutdown(fd, SHUT_WR);
  const bool closed = drainUntilClosed(fd, std::chrono::seconds(5));
  ::close(fd);
  if (!closed) std::fprintf(stderr, "the server kept the connection 5 s after the client's end\n");
  FUZZ_CHECK(closed);
  checkServing();
  return 0;
}
