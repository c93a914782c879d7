#include "gateway/upstream/fleet.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <random>
#include <thread>

#include "config/listen_address.h"

namespace infergate::gateway::upstream {
namespace {

// How often the housekeeper drops idle sequence bindings.
constexpr std::chrono::seconds kAffinitySweep{5};
// Endpoints a placement tries at most when the one it picked filled up meanwhile.
constexpr int kPlaceAttempts = 4;
// Waiters a freed slot is offered to at most (a waiter bound to a full endpoint is skipped).
constexpr int kWaitersScanned = 8;

// A per-thread generator: picks draw from it without a lock.
uint64_t randomDraw() {
  thread_local std::mt19937_64 generator{std::random_device{}() ^
                                         std::hash<std::thread::id>{}(std::this_thread::get_id())};
  return generator();
}

std::string affinityKey(std::string_view model, const codecs::SequenceRef& sequence) {
  return codecs::strCat(model, "\n", sequence.key());
}

std::string sequenceName(const codecs::SequenceRef& sequence) {
  return sequence.kind == codecs::SequenceRef::Kind::kString
             ? codecs::strCat("\"", sequence.string_id, "\"")
             : codecs::strCat(sequence.int_id);
}

std::shared_ptr<Endpoint> findIn(const UpstreamFleet::EndpointList& list, std::string_view key) {
  for (const auto& e : list) {
    if (e->key() == key) return e;
  }
  return nullptr;
}

// A concrete address for one resolved IP of a "dns:" entry.
config::ListenAddress resolvedAddress(const config::ListenAddress& entry, const std::string& ip) {
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kTcp;
  a.host = ip;
  a.port = entry.port;
  a.text = config::formatHostPort(ip, entry.port);
  a.where = entry.where;
  return a;
}

}  // namespace

// ---- Housekeeper ----

struct Housekeeper::State {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::multimap<Clock::time_point, std::pair<uint64_t, std::function<void()>>> tasks;
  uint64_t next_id = 1;
  bool running_task = false;
  bool stopping = false;
  std::thread thread;

  void run() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      const bool due = !tasks.empty() && tasks.begin()->first <= Clock::now();
      if (!due) {
        idle.notify_all();
        if (stopping) {
          // Tasks not yet due (timeouts, sweeps that reschedule themselves) die unrun:
          // nothing is left to time out at exit.
          auto dropped = std::move(tasks);
          tasks.clear();
          lock.unlock();
          return;
        }
        if (tasks.empty()) {
          wake.wait(lock);
        } else {
          // A copy: wait_until reads its time point again after waking, and the task it
          // belongs to may have been cancelled (erased) meanwhile.
          const Clock::time_point until = tasks.begin()->first;
          wake.wait_until(lock, until);
        }
        continue;
      }
      auto first = tasks.begin();
      std::function<void()> task = std::move(first->second.second);
      tasks.erase(first);
      running_task = true;
      lock.unlock();
      task();
      task = nullptr;  // its captures die outside the lock too
      lock.lock();
      running_task = false;
    }
  }
};

Housekeeper& Housekeeper::instance() {
  static Housekeeper housekeeper;
  return housekeeper;
}

Housekeeper::Housekeeper() : state_(std::make_unique<State>()) {
  state_->thread = std::thread([s = state_.get()] { s->run(); });
}

Housekeeper::~Housekeeper() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

uint64_t Housekeeper::at(Clock::time_point when, std::function<void()> task) {
  std::lock_guard<std::mutex> lock(state_->mu);
  uint64_t id = state_->next_id++;
  state_->tasks.emplace(when, std::make_pair(id, std::move(task)));
  state_->wake.notify_all();
  return id;
}

void Housekeeper::cancel(uint64_t id) {
  std::function<void()> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto it = state_->tasks.begin(); it != state_->tasks.end(); ++it) {
    if (it->second.first == id) {
      dropped = std::move(it->second.second);
      state_->tasks.erase(it);
      return;
    }
  }
}

void Housekeeper::drain() {
  // A marker due now runs after every task that was due before it.
  std::mutex mu;
  std::condition_variable ran;
  bool done = false;
  at(Clock::now(), [&] {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    ran.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  ran.wait(lock, [&] { return done; });
}

// ---- EndpointLease ----

EndpointLease& EndpointLease::operator=(EndpointLease&& other) noexcept {
  if (this != &other) {
    finish(Outcome::kNeutral);
    fleet_ = std::move(other.fleet_);
    endpoint_ = std::move(other.endpoint_);
    trial_ = other.trial_;
    other.trial_ = false;
  }
  return *this;
}

void EndpointLease::finish(Outcome outcome, std::chrono::steady_clock::time_point now) {
  if (!endpoint_) return;
  std::shared_ptr<UpstreamFleet> fleet = std::move(fleet_);
  std::shared_ptr<Endpoint> endpoint = std::move(endpoint_);
  endpoint->unreserve();
  fleet->in_flight_.fetch_sub(1, std::memory_order_relaxed);
  endpoint->recordOutcome(outcome, trial_, now, fleet->config_.outlier);
  trial_ = false;
  fleet->onSlotFreed();
}

// ---- UpstreamFleet ----

struct UpstreamFleet::Waiter {
  uint64_t id = 0;
  PickContext context;
  AcquireDone done;
  uint64_t timer = 0;
  std::list<std::shared_ptr<Waiter>>::iterator position;
};

UpstreamFleet::UpstreamFleet(const config::UpstreamConfig& config)
    : config_(config),
      balancer_(config.load_balancing.policy),
      retry_budget_(config.retry.budget_percent, config.retry.min_retries_per_second) {}

UpstreamFleet::~UpstreamFleet() = default;

std::shared_ptr<UpstreamFleet> UpstreamFleet::create(
    const config::UpstreamConfig& config, std::shared_ptr<routing::AffinityTable> affinity,
    const EndpointList* previous) {
  std::shared_ptr<UpstreamFleet> fleet(new UpstreamFleet(config));
  fleet->affinity_ = affinity ? std::move(affinity)
                              : std::make_shared<routing::AffinityTable>(
                                    std::chrono::milliseconds(config.affinity.idle_timeout_ms));
  fleet->affinity_->setIdleTimeout(std::chrono::milliseconds(config.affinity.idle_timeout_ms));
  std::lock_guard<std::mutex> lock(fleet->sources_mu_);
  fleet->sources_.resize(config.endpoints.size());
  for (size_t i = 0; i < config.endpoints.size(); ++i) {
    const config::ListenAddress& entry = config.endpoints[i];
    if (entry.kind == config::ListenAddress::Kind::kDns) continue;
    const uint8_t tier = config.colocated && i > 0 ? 1 : 0;
    std::shared_ptr<Endpoint> reused;
    if (previous) {
      for (const auto& e : *previous) {
        if (e->key() == entry.text && e->tier() == tier) reused = e;
      }
    }
    fleet->sources_[i].push_back(reused ? reused : makeEndpoint(config, entry, tier));
  }
  fleet->rebuild();
  if (config.isRemote() && config.affinity.sequences) {
    // Idle sequence bindings are dropped in the background; the task holds the table only.
    std::weak_ptr<routing::AffinityTable> table = fleet->affinity_;
    auto schedule = std::make_shared<std::function<void()>>();
    *schedule = [table, weak_schedule = std::weak_ptr<std::function<void()>>(schedule)] {
      auto t = table.lock();
      auto again = weak_schedule.lock();
      if (!t || !again) return;
      t->sweep(routing::AffinityTable::Clock::now());
      Housekeeper::instance().at(Housekeeper::Clock::now() + kAffinitySweep, *again);
    };
    fleet->sweeper_ = schedule;
    Housekeeper::instance().at(Housekeeper::Clock::now() + kAffinitySweep, *schedule);
  }
  return fleet;
}

std::shared_ptr<Endpoint> UpstreamFleet::makeEndpoint(const config::UpstreamConfig& config,
                                                      const config::ListenAddress& address,
                                                      uint8_t tier) {
  // An endpoint with gRPC channels is destroyed on the housekeeper's thread: its last
  // reference may well be dropped inside a grpc callback.
  return std::shared_ptr<Endpoint>(new Endpoint(config, address, tier), [](Endpoint* e) {
    if (e->grpc() == nullptr) {
      delete e;
    } else {
      Housekeeper::instance().post([e] { delete e; });
    }
  });
}

void UpstreamFleet::rebuild() {
  auto list = std::make_shared<EndpointList>();
  for (const auto& source : sources_) list->insert(list->end(), source.begin(), source.end());
  endpoints_.store(std::shared_ptr<const EndpointList>(std::move(list)));
}

std::shared_ptr<Endpoint> UpstreamFleet::findEndpoint(std::string_view key) const {
  return findIn(*endpoints(), key);
}

void UpstreamFleet::setResolved(const config::ListenAddress& entry,
                                const std::vector<std::string>& addresses) {
  std::lock_guard<std::mutex> lock(sources_mu_);
  for (size_t i = 0; i < config_.endpoints.size(); ++i) {
    const config::ListenAddress& configured = config_.endpoints[i];
    if (configured.kind != config::ListenAddress::Kind::kDns || configured.text != entry.text) continue;
    const uint8_t tier = config_.colocated && i > 0 ? 1 : 0;
    std::vector<std::shared_ptr<Endpoint>> next;
    for (const std::string& ip : addresses) {
      config::ListenAddress address = resolvedAddress(configured, ip);
      std::shared_ptr<Endpoint> kept = findIn(sources_[i], address.text);
      next.push_back(kept ? kept : makeEndpoint(config_, address, tier));
    }
    sources_[i] = std::move(next);
  }
  rebuild();
  // New endpoints have room: requests waiting for a slot may take it now.
  onSlotFreed();
}

codecs::Status UpstreamFleet::overloaded(std::string_view why) {
  shed_.fetch_add(1, std::memory_order_relaxed);
  return withRetryAfter(
      codecs::withOrigin(absl::UnavailableError(codecs::strCat(
                             "upstream '", name(), "' is overloaded: ", why, "; retry after ",
                             config_.overload.retry_after_s, " s")),
                         codecs::ErrorOrigin::kUpstream),
      config_.overload.retry_after_s);
}

EndpointLease UpstreamFleet::place(const PickContext& context, const Endpoint* exclude, Miss* miss,
                                   codecs::Status* error, Clock::time_point now) {
  *miss = Miss::kNone;
  std::shared_ptr<const EndpointList> list = endpoints();
  const uint32_t endpoint_cap = config_.overload.max_in_flight_per_endpoint;
  auto lease = [&](const std::shared_ptr<Endpoint>& e, bool trial) {
    EndpointLease l;
    l.fleet_ = shared_from_this();
    l.endpoint_ = e;
    l.trial_ = trial;
    return l;
  };
  // The whole upstream's cap first.
  const uint32_t cap = config_.overload.max_in_flight;
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= cap && cap != 0) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    *miss = Miss::kAtCap;
    return {};
  }
  auto giveBack = [&] { in_flight_.fetch_sub(1, std::memory_order_relaxed); };

  // A sequence goes where it began.
  const bool sticky = context.sequence && context.sequence->present() && config_.affinity.sequences;
  std::string sequence_key;
  if (sticky) {
    sequence_key = affinityKey(context.model, *context.sequence);
    if (std::optional<std::string> bound = affinity_->find(sequence_key, now)) {
      std::shared_ptr<Endpoint> e = findIn(*list, *bound);
      if (e && e->routable(now)) {
        if (!e->tryReserve(endpoint_cap)) {
          giveBack();
          *miss = Miss::kAtCap;
          return {};
        }
        bool trial = false;
        if (!e->claimTrial(now, &trial)) {
          e->unreserve();
          giveBack();
          *miss = Miss::kAtCap;  // the trial is out; the endpoint may be back soon
          return {};
        }
        if (context.sequence->end) affinity_->erase(sequence_key);
        return lease(e, trial);
      }
      if (!context.sequence->start) {
        affinity_->erase(sequence_key);
        affinity_lost_.fetch_add(1, std::memory_order_relaxed);
        giveBack();
        const char* state = !e ? "no longer one of its endpoints"
                            : e->activeHealth() == ActiveHealth::kUnhealthy ? "unhealthy"
                                                                             : "ejected after failures";
        *miss = Miss::kError;
        *error = codecs::withOrigin(
            absl::UnavailableError(codecs::strCat(
                "sequence ", sequenceName(*context.sequence), " of model '", context.model,
                "' was bound to endpoint ", *bound, " of upstream '", name(), "', which is ",
                state, ": the sequence's state is lost; start it again with sequence_start")),
            codecs::ErrorOrigin::kUpstream);
        return {};
      }
      // A new start of the same id: placed afresh below.
    }
  }

  // Each endpoint's standing, on the stack for the usual handful.
  thread_local std::vector<routing::EndpointLoad> loads;
  thread_local std::vector<std::string_view> keys;
  loads.resize(list->size());
  bool any_routable = false;
  for (size_t i = 0; i < list->size(); ++i) {
    const Endpoint& e = *(*list)[i];
    const bool routable = e.routable(now) && &e != exclude;
    any_routable = any_routable || routable;
    const uint32_t outstanding = e.outstanding();
    loads[i].available = routable && (endpoint_cap == 0 || outstanding < endpoint_cap);
    loads[i].tier = e.tier();
    loads[i].outstanding = outstanding;
    loads[i].queue = e.queueSignal();
  }
  const bool hashed = context.hash_value.has_value() && !config_.load_balancing.hash_header.empty();
  if (hashed) {
    keys.resize(list->size());
    for (size_t i = 0; i < list->size(); ++i) keys[i] = (*list)[i]->key();
  }
  for (int attempt = 0; attempt < kPlaceAttempts; ++attempt) {
    size_t index = routing::kNoEndpoint;
    if (hashed && attempt == 0) index = routing::pickByHash(loads, keys, *context.hash_value);
    if (index == routing::kNoEndpoint) index = balancer_.pick(loads, randomDraw());
    if (index == routing::kNoEndpoint) break;
    const std::shared_ptr<Endpoint>& e = (*list)[index];
    loads[index].available = false;  // not again in this placement
    if (!e->tryReserve(endpoint_cap)) continue;
    bool trial = false;
    if (!e->claimTrial(now, &trial)) {
      e->unreserve();
      continue;
    }
    if (sticky) {
      if (context.sequence->end) {
        affinity_->erase(sequence_key);
      } else {
        affinity_->bind(sequence_key, e->key(), now);
      }
    }
    return lease(e, trial);
  }
  giveBack();
  if (any_routable) {
    *miss = Miss::kAtCap;
    return {};
  }
  *miss = Miss::kError;
  size_t unhealthy = 0, ejected = 0;
  for (const auto& e : *list) {
    if (e->activeHealth() == ActiveHealth::kUnhealthy) {
      ++unhealthy;
    } else if (e->ejected(now)) {
      ++ejected;
    }
  }
  if (list->empty()) {
    *error = codecs::withOrigin(
        absl::UnavailableError(codecs::strCat("upstream '", name(),
                                              "' has no endpoints (its dns: names resolved to "
                                              "no address yet)")),
        codecs::ErrorOrigin::kUpstream);
  } else {
    *error = codecs::withOrigin(
        absl::UnavailableError(codecs::strCat(
            "upstream '", name(), "' has no healthy endpoint (", list->size(), " endpoints: ",
            unhealthy, " unhealthy, ", ejected, " ejected after failures",
            exclude ? ", 1 already tried" : "", ")")),
        codecs::ErrorOrigin::kUpstream);
  }
  return {};
}

codecs::StatusOr<EndpointLease> UpstreamFleet::tryAcquire(const PickContext& context,
                                                          const Endpoint* exclude) {
  Miss miss;
  codecs::Status error;
  EndpointLease lease = place(context, exclude, &miss, &error, Clock::now());
  if (miss == Miss::kNone) return lease;
  if (miss == Miss::kError) return error;
  return overloaded(codecs::strCat("every endpoint is at its in-flight cap"));
}

uint64_t UpstreamFleet::acquire(const PickContext& context, AcquireDone done, Clock::time_point now) {
  Miss miss;
  codecs::Status error;
  EndpointLease lease = place(context, nullptr, &miss, &error, now);
  if (miss == Miss::kNone) {
    done(std::move(lease));
    return 0;
  }
  if (miss == Miss::kError) {
    done(error);
    return 0;
  }
  const Clock::time_point deadline =
      std::min(context.deadline, now + std::chrono::milliseconds(config_.overload.queue_timeout_ms));
  {
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (queue_.size() < config_.overload.max_queue && deadline > now) {
      auto waiter = std::make_shared<Waiter>();
      waiter->id = next_waiter_++;
      waiter->context = context;
      waiter->done = std::move(done);
      waiter->position = queue_.insert(queue_.end(), waiter);
      queued_.fetch_add(1, std::memory_order_relaxed);
      waiter->timer = Housekeeper::instance().at(
          deadline, [weak = weak_from_this(), w = std::weak_ptr<Waiter>(waiter)] {
            auto fleet = weak.lock();
            auto waiter = w.lock();
            if (fleet && waiter) fleet->expire(waiter);
          });
      const uint64_t id = waiter->id;
      lock.unlock();
      // A slot may have been freed between place() and the insertion.
      onSlotFreed();
      return id;
    }
  }
  done(overloaded(codecs::strCat("every endpoint is at its in-flight cap and ",
                                 config_.overload.max_queue, " requests already wait")));
  return 0;
}

bool UpstreamFleet::abandon(uint64_t waiter) {
  std::shared_ptr<Waiter> gone;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if ((*it)->id != waiter) continue;
      gone = *it;
      queue_.erase(it);
      gone->position = queue_.end();
      queued_.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  }
  if (!gone) return false;
  Housekeeper::instance().cancel(gone->timer);
  return true;  // `gone` and its done() are dropped here, unrun
}

void UpstreamFleet::expire(const std::shared_ptr<Waiter>& waiter) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (waiter->position == queue_.end()) return;  // it got a slot meanwhile
    queue_.erase(waiter->position);
    waiter->position = queue_.end();
    queued_.fetch_sub(1, std::memory_order_relaxed);
  }
  waiter->done(overloaded(codecs::strCat("no slot came free within ",
                                         config_.overload.queue_timeout_ms, " ms")));
}

void UpstreamFleet::onSlotFreed() {
  // A waiter answered with an error (its sequence's endpoint is gone, no endpoint is
  // routable) took no slot: the one freed goes on to the next waiter, or it would stay
  // free while requests wait for it until they time out.
  while (queued_.load(std::memory_order_relaxed) != 0) {
    std::shared_ptr<Waiter> chosen;
    EndpointLease lease;
    codecs::Status error;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      int scanned = 0;
      for (auto it = queue_.begin(); it != queue_.end() && scanned < kWaitersScanned; ++scanned) {
        Miss miss;
        EndpointLease l = place((*it)->context, nullptr, &miss, &error, Clock::now());
        if (miss == Miss::kAtCap) {
          ++it;
          continue;
        }
        chosen = *it;
        if (miss == Miss::kNone) lease = std::move(l);
        queue_.erase(it);
        chosen->position = queue_.end();
        queued_.fetch_sub(1, std::memory_order_relaxed);
        break;
      }
    }
    if (!chosen) return;
    Housekeeper::instance().cancel(chosen->timer);
    if (lease.valid()) return chosen->done(std::move(lease));
    chosen->done(error);
  }
}

UpstreamFleet::Counters UpstreamFleet::counters() const {
  Counters c;
  c.in_flight = in_flight_.load(std::memory_order_relaxed);
  c.queued = queued_.load(std::memory_order_relaxed);
  c.shed = shed_.load(std::memory_order_relaxed);
  c.retries = retries_.load(std::memory_order_relaxed);
  c.retries_refused = retries_refused_.load(std::memory_order_relaxed);
  c.affinity_lost = affinity_lost_.load(std::memory_order_relaxed);
  return c;
}

void UpstreamFleet::countRetry(bool allowed) {
  (allowed ? retries_ : retries_refused_).fetch_add(1, std::memory_order_relaxed);
}

void UpstreamFleet::shutdownGrpc() {
  std::shared_ptr<const EndpointList> list = endpoints();
  for (const auto& e : *list) {
    if (e->grpc()) e->grpc()->shutdown();
  }
}

// ---- outcomes and stamps ----

Outcome outcomeOfGrpc(int grpc_code) {
  switch (static_cast<grpc::StatusCode>(grpc_code)) {
    case grpc::StatusCode::UNAVAILABLE:
      return Outcome::kFailure;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return Outcome::kNeutral;
    default:
      return Outcome::kSuccess;
  }
}

Outcome outcomeOfHttpStatus(int http_status) {
  return http_status >= 500 ? Outcome::kFailure : Outcome::kSuccess;
}

Outcome outcomeOfError(const codecs::Status& status) {
  if (status.code() == absl::StatusCode::kUnavailable) return Outcome::kFailure;
  if (status.code() == absl::StatusCode::kInvalidArgument &&
      codecs::originOf(status) == codecs::ErrorOrigin::kUpstream) {
    return Outcome::kFailure;
  }
  return Outcome::kNeutral;
}

}  // namespace infergate::gateway::upstream
