#pragma once

// Tests only: an EventLoop run by its own thread, and a way to run code on it and wait.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <thread>

#include "gateway/http/event_loop.h"

namespace infergate::gateway::http {

class LoopThread {
 public:
  // `busy_poll`: EventLoop::setBusyPoll, set on the loop's thread before it runs.
  explicit LoopThread(std::chrono::microseconds busy_poll = {})
      : thread_([this, busy_poll] {
          loop_.setBusyPoll(busy_poll);
          loop_.run();
        }) {}
  ~LoopThread() {
    loop_.stop();
    thread_.join();
  }
  EventLoop& loop() { return loop_; }
  // Runs `fn` on the loop and waits for it (30 s at most: a bound for the slowest machine).
  void run(std::function<void()> fn) {
    std::promise<void> done;
    loop_.post([&] {
      fn();
      done.set_value();
    });
    if (done.get_future().wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      ADD_FAILURE() << "the loop did not run a task within 30 s";
      std::abort();  // the task refers to this frame
    }
  }

 private:
  EventLoop loop_;
  std::thread thread_;
};

}  // namespace infergate::gateway::http
