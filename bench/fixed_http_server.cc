// A fixed-response server on the project's HTTP/1.1 layer (no inference work): the
// ceiling the HTTP frontend can reach, measured against nginx `return 200` with wrk.
//   fixed_http_server PORT [WORKERS] [BODY_BYTES]
// Prints "listening PORT" once accepting; runs until SIGINT/SIGTERM.

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "gateway/http/http_server.h"

using namespace infergate::gateway::http;

int main(int argc, char** argv) {
  uint16_t port = argc > 1 ? static_cast<uint16_t>(std::atoi(argv[1])) : 0;
  size_t workers = argc > 2 ? static_cast<size_t>(std::atoi(argv[2])) : 2;
  size_t body_bytes = argc > 3 ? static_cast<size_t>(std::atoi(argv[3])) : 130;
  std::string body = R"({"model_name":"fixed","model_version":"1","outputs":[)";
  while (body.size() + 2 < body_bytes) body.push_back(' ');
  body += "]}";
  infergate::codecs::Buffer fixed = infergate::codecs::Buffer::fromString(body);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  WorkerPool pool(workers);
  HttpServer server(pool, HttpLimits{}, 100000, [fixed](std::shared_ptr<HttpExchange> e) {
    HttpResponse r;
    r.status = 200;
    r.headers.emplace_back("Content-Type", "application/json");
    r.body.append(fixed);
    e->respond(std::move(r));
  });
  auto bound = server.listen(ListenSpec::tcp("127.0.0.1", port));
  if (!bound.ok()) {
    std::cerr << bound.status() << "\n";
    return 1;
  }
  pool.start();
  server.start();
  std::cout << "listening " << bound->port << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  server.shutdown(std::chrono::milliseconds(100));
  pool.stop();
  return 0;
}
