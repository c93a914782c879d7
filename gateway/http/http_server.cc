#include "gateway/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <thread>

namespace infergate::gateway::http {
namespace {

constexpr int kAcceptsPerWake = 64;

}  // namespace

HttpServer::HttpServer(WorkerPool& pool, HttpLimits limits, size_t max_connections,
                       HttpHandler handler)
    : pool_(pool), limits_(limits), caps_(max_connections), handler_(std::move(handler)) {
  for (size_t i = 0; i < pool_.size(); ++i) {
    auto worker = std::make_unique<Worker>();
    worker->loop = &pool_.loop(i);
    workers_.push_back(std::move(worker));
  }
}

HttpServer::~HttpServer() {
  for (int fd : listen_fds_) ::close(fd);
}

codecs::StatusOr<BoundSockets> HttpServer::listen(const ListenSpec& spec) {
  INFERGATE_ASSIGN_OR_RETURN(BoundSockets bound, bindListener(spec, workers_.size()));
  bool is_unix = spec.kind == ListenSpec::Kind::kUnix;
  for (size_t i = 0; i < workers_.size(); ++i) {
    int fd = is_unix ? bound.fds[0] : bound.fds[i];
    workers_[i]->acceptors.push_back(
        std::make_unique<Acceptor>(Acceptor{this, workers_[i].get(), fd, is_unix}));
  }
  listen_fds_.insert(listen_fds_.end(), bound.fds.begin(), bound.fds.end());
  return bound;
}

void HttpServer::runOnEveryLoop(const std::function<void(Worker&)>& fn) {
  std::vector<std::future<void>> done;
  for (auto& worker : workers_) {
    auto promise = std::make_shared<std::promise<void>>();
    done.push_back(promise->get_future());
    Worker* w = worker.get();
    w->loop->post([w, promise, &fn] {
      fn(*w);
      promise->set_value();
    });
  }
  for (auto& f : done) f.wait();
}

void HttpServer::start() {
  started_ = true;
  runOnEveryLoop([](Worker& w) {
    for (auto& acceptor : w.acceptors) {
      acceptor->ev = event_new(w.loop->base(), acceptor->fd, EV_READ | EV_PERSIST,
                               &HttpServer::onAccept, acceptor.get());
      event_add(acceptor->ev, nullptr);
    }
  });
}

void HttpServer::onAccept(evutil_socket_t, short, void* arg) {
  auto* acceptor = static_cast<Acceptor*>(arg);
  acceptor->server->accept(*acceptor);
}

void HttpServer::accept(Acceptor& acceptor) {
  Worker& worker = *acceptor.worker;
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = ::accept4(acceptor.fd, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // EAGAIN: drained (another loop may have taken it on a shared Unix socket).
      // EMFILE/ENFILE: out of descriptors; the connection stays queued until one frees.
      return;
    }
    // Over a cap: refuse rather than starve the connections we have.
    std::string client;  // empty: not counted per client
    if (!caps_.admit(acceptor.is_unix ? nullptr : &peer, &client)) {
      ::close(fd);
      continue;
    }
    if (!acceptor.is_unix) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    auto connection = std::make_shared<HttpConnection>(
        *worker.loop, fd, limits_, handler_,
        [this, &worker, client = std::move(client)](HttpConnection* c) {
          if (c->sendTimedOut()) caps_.countSendTimeout();
          // Deferred: the connection may be deep in its own call stack right now.
          worker.loop->post([this, &worker, c, client] {
            if (!worker.connections.erase(c)) return;
            caps_.release(client);
          });
        },
        &observer_, acceptor.is_unix ? std::string("unix") : socketAddressText(peer),
        tls_ ? std::make_unique<tls::ServerSession>(tls_->current(), fd) : nullptr, &gate_);
    worker.connections.emplace(connection.get(), connection);
    connection->start();
  }
}

void HttpServer::stopAccepting() {
  if (!started_ || listen_fds_.empty()) return;
  runOnEveryLoop([](Worker& w) {
    for (auto& acceptor : w.acceptors) {
      if (acceptor->ev) {
        event_free(acceptor->ev);
        acceptor->ev = nullptr;
      }
    }
    std::vector<std::shared_ptr<HttpConnection>> all;
    for (auto& [ptr, c] : w.connections) all.push_back(c);
    for (auto& c : all) c->closeWhenIdle();
  });
  // No loop watches them any more: closed, a connect is refused instead of waiting in a
  // backlog nobody reads.
  for (int fd : listen_fds_) ::close(fd);
  listen_fds_.clear();
}

void HttpServer::shutdown(std::chrono::milliseconds grace) {
  if (!started_) return;
  stopAccepting();
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (caps_.open() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  runOnEveryLoop([](Worker& w) {
    std::vector<std::shared_ptr<HttpConnection>> all;
    for (auto& [ptr, c] : w.connections) all.push_back(c);
    for (auto& c : all) c->close();
  });
  // The close callbacks post the map removals; one more round runs them.
  runOnEveryLoop([](Worker&) {});
  started_ = false;
}

}  // namespace infergate::gateway::http
