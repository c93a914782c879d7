#include "gateway/execution_runner.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <vector>

namespace infergate::gateway {
namespace {

class Runner;

// The runners alive on this loop thread. A runner waiting on a timer is owned here, so
// that when the loop stops (shutdown) the thread's exit destroys it and its timer, rather
// than leaking a runner whose timer will never fire.
thread_local std::unordered_map<Runner*, std::shared_ptr<Runner>> live_runners;

// A long wait is taken in slices of this, so that a cancelled request (client gone,
// deadline passed) lets go of its runner within one slice instead of at the end of a
// model's delay (up to 60 s for the sleep model).
constexpr std::chrono::milliseconds kCancelCheck{50};

class Runner : public std::enable_shared_from_this<Runner> {
 public:
  Runner(http::EventLoop& loop, builtin::Execution execution,
         std::shared_ptr<std::atomic<bool>> cancelled, EmitFn emit)
      : execution_(std::move(execution)),
        cancelled_(std::move(cancelled)),
        emit_(std::move(emit)),
        timer_(loop, [this] { fire(); }) {}

  void start() {
    live_runners.emplace(this, shared_from_this());
    step();
  }

 private:
  // Emits every response that is due now, then arms the timer for the next one.
  void step() {
    if (isCancelled()) return finish();
    if (remaining_wait_.count() > 0) return wait(remaining_wait_);
    auto& responses = execution_.responses;
    while (next_ < responses.size()) {
      auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(responses[next_].delay);
      if (delay.count() > 0 && !waited_) {
        waited_ = true;
        return wait(delay);
      }
      waited_ = false;
      if (isCancelled()) return finish();
      builtin::TimedResponse& r = responses[next_++];
      bool last = next_ == responses.size() && execution_.complete_after.count() == 0;
      bool final = r.final || last || !r.response.ok();
      emit_(Emission{std::move(r.response), final, r.from_model, false});
      if (final) return finish();
    }
    auto tail = std::chrono::duration_cast<std::chrono::milliseconds>(execution_.complete_after);
    if (tail.count() > 0 && !waited_) {
      waited_ = true;
      return wait(tail);
    }
    if (!isCancelled()) {
      emit_(Emission{codecs::InferResponse{}, true, false, true});
    }
    finish();
  }

  // Waits `delay` in slices of kCancelCheck; step() resumes after the last slice.
  void wait(std::chrono::milliseconds delay) {
    std::chrono::milliseconds slice = std::min(delay, kCancelCheck);
    remaining_wait_ = delay - slice;
    timer_.arm(slice);
  }

  void fire() {
    auto it = live_runners.find(this);
    if (it == live_runners.end()) return;
    std::shared_ptr<Runner> keep = it->second;
    step();
  }

  bool isCancelled() const { return cancelled_ && cancelled_->load(); }

  void finish() {
    timer_.disarm();
    emit_ = nullptr;
    live_runners.erase(this);  // may destroy this: nothing touches members afterwards
  }

  builtin::Execution execution_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  EmitFn emit_;
  http::LoopTimer timer_;
  size_t next_ = 0;
  bool waited_ = false;
  std::chrono::milliseconds remaining_wait_{0};
};

}  // namespace

void runExecution(http::EventLoop& loop, builtin::Execution execution,
                  std::shared_ptr<std::atomic<bool>> cancelled, EmitFn emit) {
  auto runner = std::make_shared<Runner>(loop, std::move(execution), std::move(cancelled),
                                         std::move(emit));
  runner->start();
}

}  // namespace infergate::gateway
