#pragma once

// The event-loop threads: one EventLoop per worker, each run by its own thread. HTTP
// connections live on them; other frontends post their completions to them.

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gateway/http/event_loop.h"

namespace infergate::gateway::http {

class WorkerPool {
 public:
  // `count` 0 = the CPUs this process may use (availableCpus(): affinity and cgroup quota).
  // `busy_poll`: each loop's EventLoop::setBusyPoll (0: loops sleep as soon as idle).
  explicit WorkerPool(size_t count, std::chrono::microseconds busy_poll = {});
  ~WorkerPool();

  size_t size() const { return loops_.size(); }
  EventLoop& loop(size_t i) { return *loops_[i]; }

  void start();
  // Stops every loop and joins the threads. Tasks posted before stop() still run.
  void stop();

 private:
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
};

}  // namespace infergate::gateway::http
