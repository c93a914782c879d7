#include "gateway/http/worker_pool.h"

#include "gateway/http/cpu_count.h"

namespace infergate::gateway::http {

WorkerPool::WorkerPool(size_t count, std::chrono::microseconds busy_poll) {
  if (count == 0) count = availableCpus();
  for (size_t i = 0; i < count; ++i) {
    loops_.push_back(std::make_unique<EventLoop>());
    loops_.back()->setBusyPoll(busy_poll);
  }
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::start() {
  for (auto& loop : loops_) {
    EventLoop* l = loop.get();
    threads_.emplace_back([l] { l->run(); });
  }
}

void WorkerPool::stop() {
  for (auto& loop : loops_) loop->stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace infergate::gateway::http
