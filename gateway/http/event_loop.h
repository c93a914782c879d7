#pragma once

// One libevent event_base driven by one thread. Everything that touches a connection runs
// on its loop; work finished on other threads (grpc callbacks, upstream completions) comes
// back with post(), which is the only member that is safe to call from any thread.

#include <event2/event.h>
#include <sys/time.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace infergate::gateway::http {

class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  event_base* base() { return base_; }

  // Runs until stop(); call on the thread that owns the loop.
  void run();
  // Before run(): after a turn that ran callbacks, keep polling (epoll with no wait) for
  // `window` before sleeping in epoll, the window restarting with each turn that runs
  // callbacks. On a virtual machine a sleeping vCPU takes tens of microseconds to be woken
  // (a halt exit, an interrupt through the hypervisor); a request chain whose next event
  // comes within the window is served without that wake-up, for a core kept busy meanwhile.
  // At most `window` of polling follows the last event, and a stretch of polling ends
  // after 64 windows (20 ms at least) even under load, for one waiting turn (which does
  // not sleep when work is there); 0 (the default): sleep at once.
  void setBusyPoll(std::chrono::microseconds window) { busy_poll_ = window; }
  // Asks run() to return once pending callbacks ran; any thread.
  void stop();
  // Runs `fn` on the loop thread soon; any thread. Tasks run in the order posted. A task
  // posted after the loop stopped never runs: it is destroyed, with what it captured,
  // when the loop is, before the event base goes.
  void post(std::function<void()> fn);
  // Runs `fn` now when called on the loop thread (a completion that is already there: no
  // wake-up, no extra turn of the loop), else post()s it. Callers must hold no lock `fn`
  // may take.
  void runInLoop(std::function<void()> fn) {
    if (inLoopThread()) return fn();
    post(std::move(fn));
  }
  bool inLoopThread() const;

 private:
  static void onWake(evutil_socket_t fd, short what, void* arg);
  static void onSelfPost(evutil_socket_t fd, short what, void* arg);
  void drain();
  void runPolling();  // run() with a busy-poll window

  event_base* base_ = nullptr;
  std::chrono::microseconds busy_poll_{0};
  int wake_fd_ = -1;  // eventfd: other threads wake the loop through it
  event* wake_event_ = nullptr;
  // Made active (no system call) by a post from the loop's own thread: the tasks run later
  // in the same turn.
  event* self_post_event_ = nullptr;
  std::mutex mutex_;
  std::vector<std::function<void()>> tasks_;
  // Set by run() while other threads may already post (a pool's loops start serving as
  // their threads come up): atomic, so that inLoopThread() reads it whole.
  std::atomic<std::thread::id> owner_;
};

// A duration as libevent's timeout (a negative one as zero).
inline timeval toTimeval(std::chrono::microseconds after) {
  if (after.count() < 0) after = std::chrono::microseconds(0);
  return timeval{static_cast<time_t>(after.count() / 1000000),
                 static_cast<suseconds_t>(after.count() % 1000000)};
}

// A one-shot or re-armable timer on a loop; disarmed when destroyed. Loop thread only.
//
// Re-arming is cheap, as a connection's timeouts are re-armed on every request: arm() and
// disarm() only note when `fn` is due. libevent's timer is moved only when the new time is
// earlier than the one it is set for; when it fires early (the time was pushed back, or
// the timer disarmed), it is set again for what is left, or left idle.
class LoopTimer {
 public:
  LoopTimer(EventLoop& loop, std::function<void()> fn);
  ~LoopTimer();
  LoopTimer(const LoopTimer&) = delete;
  LoopTimer& operator=(const LoopTimer&) = delete;

  void arm(std::chrono::milliseconds after);
  // The same for a timeout of seconds that may run a few milliseconds off: it reads
  // CLOCK_MONOTONIC_COARSE, a word the kernel updates each tick (4 ms at 250 Hz), instead
  // of the precise clock, and a connection re-arms its timeout on every request. The
  // coarse clock lags by up to a tick, and by more when ticks come late (13 ms seen on a
  // busy VM): the deadline is pushed on by one tick, so it is about on time, late by up to
  // a tick or early by what a late tick adds.
  void armLoosely(std::chrono::milliseconds after);
  void disarm() { armed_ = false; }

 private:
  using Clock = std::chrono::steady_clock;
  static void onFire(evutil_socket_t, short, void* arg);
  void armAt(Clock::time_point now, Clock::time_point due);
  void schedule(Clock::time_point now, Clock::time_point at);

  event* event_ = nullptr;
  std::function<void()> fn_;
  bool armed_ = false;      // fn_ runs at due_
  Clock::time_point due_;
  bool scheduled_ = false;  // event_ is pending, for fires_at_
  Clock::time_point fires_at_;
};

}  // namespace infergate::gateway::http
