#include "gateway/http/event_loop.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>

namespace infergate::gateway::http {

EventLoop::EventLoop() {
  event_config* cfg = event_config_new();
  // One thread per base: no locking inside libevent.
  event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
  base_ = event_base_new_with_config(cfg);
  event_config_free(cfg);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!base_ || wake_fd_ < 0) {
    // Construction happens at start-up, outside any request path; without a loop the
    // process cannot serve, so this is fatal there.
    throw std::runtime_error("cannot create an event loop (libevent or eventfd failed)");
  }
  wake_event_ = event_new(base_, wake_fd_, EV_READ | EV_PERSIST, &EventLoop::onWake, this);
  event_add(wake_event_, nullptr);
  self_post_event_ = event_new(base_, -1, 0, &EventLoop::onSelfPost, this);
}

EventLoop::~EventLoop() {
  // Tasks that never ran are dropped while the base still exists: what they own (an
  // upstream client handed here to be destroyed on its loop) may still use it.
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(tasks_);
  }
  dropped.clear();
  if (self_post_event_) event_free(self_post_event_);
  if (wake_event_) event_free(wake_event_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (base_) event_base_free(base_);
}

void EventLoop::run() {
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  if (busy_poll_.count() > 0) {
    runPolling();
  } else {
    event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY);
  }
  drain();  // tasks posted while stopping still run, so nothing waits forever on them
}

// libevent tells nothing of what a turn did; a turn that ran callbacks is told by its
// length. An empty turn is one epoll_wait with no timeout and libevent's bookkeeping,
// about a microsecond; reading or writing a socket, or any handler, takes longer. So can
// an empty turn the thread was preempted in (or the VM paused): mistaken for work, it
// would keep an idle loop polling, so a stretch of polling ends after kMaxWindows windows
// (20 ms at least) whatever happens, and the loop goes back to a waiting turn, which
// returns at once when work is there (no sleep under load) and sleeps when there is none.
void EventLoop::runPolling() {
  using Clock = std::chrono::steady_clock;
  constexpr auto kEmptyTurn = std::chrono::microseconds(4);
  constexpr int kMaxWindows = 64;
  auto stopped = [this] { return event_base_got_exit(base_) || event_base_got_break(base_); };
  for (;;) {
    // Waits until work comes (-1: libevent failed, as the plain loop would return).
    if (event_base_loop(base_, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY) < 0 || stopped()) return;
    Clock::time_point now = Clock::now();
    const Clock::time_point limit =
        now + std::max<std::chrono::microseconds>(kMaxWindows * busy_poll_, std::chrono::milliseconds(20));
    for (Clock::time_point until = now + busy_poll_; now < until && now < limit;) {
      if (event_base_loop(base_, EVLOOP_NONBLOCK | EVLOOP_NO_EXIT_ON_EMPTY) < 0 || stopped()) return;
      const Clock::time_point after = Clock::now();
      if (after - now > kEmptyTurn) until = after + busy_poll_;
      now = after;
    }
  }
}

void EventLoop::stop() {
  post([this] { event_base_loopexit(base_, nullptr); });
}

void EventLoop::post(std::function<void()> fn) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    was_empty = tasks_.empty();
    tasks_.push_back(std::move(fn));
  }
  if (was_empty && inLoopThread()) {
    // A task the loop gives itself (a call deleting itself once it is done, say): two
    // system calls on the eventfd and a turn of epoll saved per request.
    event_active(self_post_event_, EV_READ, 0);
  } else if (was_empty) {
    uint64_t one = 1;
    ssize_t n = write(wake_fd_, &one, sizeof(one));
    (void)n;  // EAGAIN means the counter is already non-zero: the loop will wake anyway
  }
}

bool EventLoop::inLoopThread() const {
  // Relaxed: only the loop's own thread can find its id there, and it stored it itself.
  return std::this_thread::get_id() == owner_.load(std::memory_order_relaxed);
}

void EventLoop::onWake(evutil_socket_t fd, short, void* arg) {
  uint64_t count;
  ssize_t n = read(fd, &count, sizeof(count));
  (void)n;
  static_cast<EventLoop*>(arg)->drain();
}

void EventLoop::onSelfPost(evutil_socket_t, short, void* arg) { static_cast<EventLoop*>(arg)->drain(); }

void EventLoop::drain() {
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
}

LoopTimer::LoopTimer(EventLoop& loop, std::function<void()> fn) : fn_(std::move(fn)) {
  event_ = evtimer_new(loop.base(), &LoopTimer::onFire, this);
}

LoopTimer::~LoopTimer() {
  if (event_) event_free(event_);
}

void LoopTimer::arm(std::chrono::milliseconds after) {
  const Clock::time_point now = Clock::now();
  armAt(now, now + std::max(after, std::chrono::milliseconds(0)));
}

namespace {

// The coarse clock is steady_clock's (CLOCK_MONOTONIC) as of the kernel's last timekeeping
// update: behind it by about its resolution, more when a tick comes late.
std::chrono::steady_clock::time_point coarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                               std::chrono::nanoseconds(ts.tv_nsec));
}

std::chrono::nanoseconds coarseTick() {
  static const std::chrono::nanoseconds tick = [] {
    timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) {
      return std::chrono::nanoseconds(std::chrono::milliseconds(10));
    }
    return std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
  }();
  return tick;
}

}  // namespace

void LoopTimer::armLoosely(std::chrono::milliseconds after) {
  // Pushed on by one tick: the coarse clock's usual lag.
  const Clock::time_point now = coarseNow();
  armAt(now, now + std::max(after, std::chrono::milliseconds(0)) +
                 std::chrono::duration_cast<Clock::duration>(coarseTick()));
}

void LoopTimer::armAt(Clock::time_point now, Clock::time_point due) {
  armed_ = true;
  due_ = due;
  if (scheduled_ && fires_at_ <= due_) return;  // it fires first and looks again then
  schedule(now, due_);
}

void LoopTimer::schedule(Clock::time_point now, Clock::time_point at) {
  timeval tv = toTimeval(std::chrono::duration_cast<std::chrono::microseconds>(at - now));
  evtimer_add(event_, &tv);
  scheduled_ = true;
  fires_at_ = at;
}

void LoopTimer::onFire(evutil_socket_t, short, void* arg) {
  auto& timer = *static_cast<LoopTimer*>(arg);
  timer.scheduled_ = false;
  if (!timer.armed_) return;
  const Clock::time_point now = Clock::now();
  if (now < timer.due_) return timer.schedule(now, timer.due_);  // pushed back meanwhile
  timer.armed_ = false;
  timer.fn_();
}

}  // namespace infergate::gateway::http
