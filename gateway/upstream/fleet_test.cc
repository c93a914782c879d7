// The fleet (fleet.h; the Endpoint state machine and the Housekeeper are in
// endpoint_test.cc, the calls over a fleet in fleet_call_test.cc, all built into the same
// target): placement, overload and dns endpoints on fleets of addresses no request is
// sent to (kHttp: no gRPC channel is made).
//
// No mocks and no sleeps as synchronisation: answers come through futures bounded by
// kWait; the only polls wait for an ejection's time to pass.

#include "gateway/upstream/fleet.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "codecs/grpc_byte_buffer.h"
#include "config/listen_address.h"
#include "gateway/http/http_server.h"
#include "gateway/upstream/fleet_call.h"
#include "gateway/upstream/fleet_test_util.h"
#include "gateway/upstream/upstream_test_servers.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::upstream {
namespace {

using namespace std::chrono_literals;
using Policy = config::LoadBalancingConfig::Policy;
using testing::Clock;
using testing::freePort;
using testing::GrpcTestUpstream;
using testing::HttpTestUpstream;
using testing::kA;
using testing::kB;
using testing::kC;
using testing::kWait;
using testing::LoopThread;
using testing::outlier;
using testing::serialized;
using testing::tcp;
using testing::threeEndpoints;
using testing::contains;


// ---- configs ----------------------------------------------------------------------------

config::ListenAddress dnsEntry() {
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kDns;
  a.host = "svc";
  a.port = 9000;
  a.text = "dns:svc:9000";
  return a;
}


// ---- acquiring ---------------------------------------------------------------------------

// What acquire() answered, whenever and from whichever thread it does.
class Acquired {
 public:
  UpstreamFleet::AcquireDone done() {
    return [state = state_](codecs::StatusOr<EndpointLease> result) {
      std::lock_guard<std::mutex> lock(state->mu);
      ++state->calls;
      state->result.emplace(std::move(result));
      state->changed.notify_all();
    };
  }
  bool ready() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->result.has_value();
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->calls;
  }
  // The answer, waiting for it (bounded).
  codecs::StatusOr<EndpointLease> take() {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (!state_->changed.wait_for(lock, kWait, [&] { return state_->result.has_value(); })) {
      ADD_FAILURE() << "acquire() did not answer within 30 s";
      return absl::InternalError("test: no answer");
    }
    codecs::StatusOr<EndpointLease> out = std::move(*state_->result);
    state_->result.reset();
    return out;
  }

 private:
  struct State {
    mutable std::mutex mu;
    std::condition_variable changed;
    std::optional<codecs::StatusOr<EndpointLease>> result;
    int calls = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// acquire(), which must answer before it returns (a free slot, or a refusal).
codecs::StatusOr<EndpointLease> acquireNow(UpstreamFleet& fleet, const PickContext& context = {}) {
  Acquired acquired;
  fleet.acquire(context, acquired.done());
  if (!acquired.ready()) {
    ADD_FAILURE() << "acquire() did not answer at once";
    return absl::InternalError("test: queued");
  }
  return acquired.take();
}

// A lease acquired at once, on whichever endpoint.
EndpointLease lease(UpstreamFleet& fleet, const PickContext& context = {}) {
  codecs::StatusOr<EndpointLease> l = acquireNow(fleet, context);
  EXPECT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l.ok() && l->valid());
  return l.ok() ? std::move(*l) : EndpointLease();
}

std::string keyOf(const EndpointLease& l) { return l.valid() ? l.endpoint().key() : "(none)"; }

// The first of `attempts` leases that lands on `key` (the others are released at once);
// invalid if none did.
EndpointLease leaseOn(UpstreamFleet& fleet, const std::string& key, int attempts) {
  for (int i = 0; i < attempts; ++i) {
    EndpointLease l = lease(fleet);
    if (keyOf(l) == key) return l;
  }
  return EndpointLease();
}

PickContext sequenceContext(uint64_t id, bool start, bool end = false) {
  PickContext context;
  context.model = "m";
  codecs::SequenceRef s;
  s.kind = codecs::SequenceRef::Kind::kInt;
  s.int_id = id;
  s.start = start;
  s.end = end;
  context.sequence = s;
  return context;
}

// Until `when` has passed (bounded): an ejection's time running out.
void waitUntil(Clock::time_point when) {
  const auto give_up = Clock::now() + kWait;
  while (Clock::now() < when && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
  ASSERT_GE(Clock::now(), when);
}

// =========================================================================================
// UpstreamFleet: placement
// =========================================================================================

TEST(UpstreamFleet, HttpEndpointsComeFromTheConfigInOrder) {
  auto fleet = UpstreamFleet::create(threeEndpoints(), nullptr);
  auto list = fleet->endpoints();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0]->key(), kA);
  EXPECT_EQ((*list)[1]->key(), kB);
  EXPECT_EQ((*list)[2]->key(), kC);
  for (const auto& e : *list) {
    EXPECT_EQ(e->grpc(), nullptr);
    EXPECT_EQ(e->tier(), 0);
  }
  EXPECT_EQ(fleet->findEndpoint(kB), (*list)[1]);
  EXPECT_EQ(fleet->findEndpoint("127.0.0.1:4"), nullptr);
  EXPECT_TRUE(fleet->affinityMatters());
}

TEST(UpstreamFleet, RoundRobinSpreadsExactly) {
  auto fleet = UpstreamFleet::create(threeEndpoints(Policy::kRoundRobin), nullptr);
  std::map<std::string, int> released, held;
  for (int i = 0; i < 300; ++i) ++released[keyOf(lease(*fleet))];  // each finished at once
  EXPECT_EQ(released, (std::map<std::string, int>{{kA, 100}, {kB, 100}, {kC, 100}}));
  std::vector<EndpointLease> leases;
  for (int i = 0; i < 30; ++i) {
    leases.push_back(lease(*fleet));
    ++held[keyOf(leases.back())];
  }
  EXPECT_EQ(held, (std::map<std::string, int>{{kA, 10}, {kB, 10}, {kC, 10}}));
  EXPECT_EQ(fleet->counters().in_flight, 30u);
  for (const auto& e : *fleet->endpoints()) EXPECT_EQ(e->outstanding(), 10u);
  leases.clear();
  EXPECT_EQ(fleet->counters().in_flight, 0u);
  for (const auto& e : *fleet->endpoints()) {
    EXPECT_EQ(e->outstanding(), 0u);
    EXPECT_EQ(e->counters().requests, 110u);  // released leases count as finished requests
  }
}

TEST(UpstreamFleet, LeastRequestAvoidsAnEndpointWithManyLeasesHeld) {
  // Ten leases held on A through a round-robin fleet over the same endpoints.
  auto round_robin = UpstreamFleet::create(threeEndpoints(Policy::kRoundRobin), nullptr);
  std::vector<EndpointLease> on_a;
  while (on_a.size() < 10) {
    EndpointLease l = lease(*round_robin);
    if (!l.valid()) break;
    if (keyOf(l) == kA) on_a.push_back(std::move(l));
  }
  ASSERT_EQ(round_robin->findEndpoint(kA)->outstanding(), 10u);
  auto least = UpstreamFleet::create(threeEndpoints(Policy::kLeastRequest), nullptr,
                                     round_robin->endpoints().get());
  ASSERT_EQ(least->findEndpoint(kA), round_robin->findEndpoint(kA));
  std::map<std::string, int> picks;
  for (int i = 0; i < 300; ++i) ++picks[keyOf(lease(*least))];
  EXPECT_EQ(picks[kA], 0);
  EXPECT_GT(picks[kB], 0);
  EXPECT_GT(picks[kC], 0);
  EXPECT_EQ(picks[kB] + picks[kC], 300);
  // Held leases on B and C: they fill up to A's ten, then A gets its share again.
  std::vector<EndpointLease> held;
  for (int i = 0; i < 60; ++i) held.push_back(lease(*least));
  std::map<std::string, size_t> outstanding;
  for (const auto& e : *least->endpoints()) outstanding[e->key()] = e->outstanding();
  EXPECT_GT(outstanding[kA], 10u);
  EXPECT_EQ(outstanding[kA] + outstanding[kB] + outstanding[kC], 70u);
}

// `failures` failures of the endpoint `key`, finished through leases of `fleet`.
std::shared_ptr<Endpoint> ejectThroughLeases(UpstreamFleet& fleet, const std::string& key,
                                             uint32_t failures) {
  std::vector<EndpointLease> on_key, others;
  for (int i = 0; i < 100 && on_key.size() < failures; ++i) {
    EndpointLease l = lease(fleet);
    if (!l.valid()) break;
    (keyOf(l) == key ? on_key : others).push_back(std::move(l));
  }
  EXPECT_EQ(on_key.size(), failures);
  others.clear();
  for (auto& l : on_key) l.finish(Outcome::kFailure);
  return fleet.findEndpoint(key);
}

TEST(UpstreamFleet, EjectedEndpointGetsNothingUntilItsEjectionPassesThenOneTrial) {
  config::UpstreamConfig config = threeEndpoints(Policy::kRoundRobin);
  config.outlier = outlier(3, 50, 1000);
  auto fleet = UpstreamFleet::create(config, nullptr);
  std::shared_ptr<Endpoint> a = ejectThroughLeases(*fleet, kA, 3);
  ASSERT_TRUE(a->ejectedUntil().has_value());
  const Clock::time_point until = *a->ejectedUntil();
  EXPECT_EQ(a->counters().ejections, 1u);

  // While ejected: nothing. (A pick of A is only allowed once the time has passed.)
  int early_picks = 0;
  for (int i = 0; i < 30; ++i) {
    EndpointLease l = lease(*fleet);
    const Clock::time_point after = Clock::now();
    if (keyOf(l) == kA && after < until) ++early_picks;
  }
  EXPECT_EQ(early_picks, 0);

  // Half open: exactly one request gets through while the trial is out.
  waitUntil(until);
  EXPECT_TRUE(a->routable(Clock::now()));
  std::vector<EndpointLease> held;
  EndpointLease trial;
  int on_a = 0;
  for (int i = 0; i < 30; ++i) {
    EndpointLease l = lease(*fleet);
    if (keyOf(l) == kA) {
      ++on_a;
      trial = std::move(l);
    } else {
      held.push_back(std::move(l));
    }
  }
  EXPECT_EQ(on_a, 1);
  ASSERT_TRUE(trial.valid());
  EXPECT_FALSE(a->routable(Clock::now()));
  held.clear();

  // Its success readmits the endpoint: A gets its turns again.
  trial.finish(Outcome::kSuccess);
  EXPECT_FALSE(a->ejectedUntil().has_value());
  EXPECT_EQ(a->counters().readmissions, 1u);
  std::map<std::string, int> picks;
  for (int i = 0; i < 30; ++i) ++picks[keyOf(lease(*fleet))];
  EXPECT_EQ(picks[kA], 10);
}

TEST(UpstreamFleet, FailedTrialEjectsAgainForTwiceAsLong) {
  config::UpstreamConfig config = threeEndpoints(Policy::kRoundRobin);
  config.outlier = outlier(3, 50, 60000);
  auto fleet = UpstreamFleet::create(config, nullptr);
  std::shared_ptr<Endpoint> a = ejectThroughLeases(*fleet, kA, 3);
  ASSERT_TRUE(a->ejectedUntil().has_value());
  waitUntil(*a->ejectedUntil());
  EndpointLease trial = leaseOn(*fleet, kA, 3);
  ASSERT_TRUE(trial.valid());
  const Clock::time_point before = Clock::now();
  trial.finish(Outcome::kFailure);
  const Clock::time_point after = Clock::now();
  ASSERT_TRUE(a->ejectedUntil().has_value());
  EXPECT_GE(*a->ejectedUntil(), before + 100ms);
  EXPECT_LE(*a->ejectedUntil(), after + 100ms);
  EXPECT_EQ(a->counters().ejections, 2u);
}

TEST(UpstreamFleet, EveryEndpointEjectedIsUnavailableNamingWhy) {
  config::UpstreamConfig config = threeEndpoints(Policy::kRoundRobin);
  config.outlier = outlier(1, 60000, 60000);
  auto fleet = UpstreamFleet::create(config, nullptr);
  for (int i = 0; i < 3; ++i) lease(*fleet).finish(Outcome::kFailure);
  config::HealthCheckConfig check;
  // One of them unhealthy besides.
  fleet->findEndpoint(kC)->recordProbe(false, check);
  codecs::StatusOr<EndpointLease> refused = acquireNow(*fleet);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(contains(codecs::messageOf(refused.status()),
                     "upstream 'up' has no healthy endpoint (3 endpoints: 1 unhealthy, 2 ejected"),
            "");
  EXPECT_FALSE(retryAfterOf(refused.status()).has_value());  // not an overload
  EXPECT_EQ(fleet->counters().in_flight, 0u);
  EXPECT_EQ(fleet->counters().shed, 0u);
}

TEST(UpstreamFleet, ColocatedEndpointTakesEverythingWhileRoutableAndUnderItsCap) {
  config::UpstreamConfig config = threeEndpoints(Policy::kLeastRequest);
  config.colocated = true;
  config.overload.max_in_flight_per_endpoint = 2;
  config.outlier = outlier(3, 60000, 60000);
  auto fleet = UpstreamFleet::create(config, nullptr);
  EXPECT_EQ(fleet->findEndpoint(kA)->tier(), 0);
  EXPECT_EQ(fleet->findEndpoint(kB)->tier(), 1);
  EXPECT_EQ(fleet->findEndpoint(kC)->tier(), 1);

  for (int i = 0; i < 20; ++i) EXPECT_EQ(keyOf(lease(*fleet)), kA);

  // At its cap: the spill-over endpoints, each up to its own cap.
  std::vector<EndpointLease> first;
  first.push_back(lease(*fleet));
  first.push_back(lease(*fleet));
  EXPECT_EQ(keyOf(first[0]), kA);
  EXPECT_EQ(keyOf(first[1]), kA);
  std::map<std::string, int> spilled;
  std::vector<EndpointLease> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(lease(*fleet));
    ++spilled[keyOf(held.back())];
  }
  EXPECT_EQ(spilled, (std::map<std::string, int>{{kB, 2}, {kC, 2}}));
  // Everyone at the cap: tryAcquire does not wait.
  codecs::StatusOr<EndpointLease> full = fleet->tryAcquire({}, nullptr);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(retryAfterOf(full.status()).has_value());
  // A slot back on the colocated endpoint: it is preferred again.
  first[0].finish(Outcome::kSuccess);
  held[0].finish(Outcome::kSuccess);
  EXPECT_EQ(keyOf(lease(*fleet)), kA);
  first.clear();
  held.clear();

  // Ejected: the spill-over endpoints take everything.
  for (int i = 0; i < 3; ++i) {
    EndpointLease l = lease(*fleet);
    ASSERT_EQ(keyOf(l), kA);
    l.finish(Outcome::kFailure);
  }
  ASSERT_TRUE(fleet->findEndpoint(kA)->ejectedUntil().has_value());
  std::map<std::string, int> picks;
  for (int i = 0; i < 30; ++i) ++picks[keyOf(lease(*fleet))];
  EXPECT_EQ(picks[kA], 0);
  EXPECT_EQ(picks[kB] + picks[kC], 30);
}

TEST(UpstreamFleet, HashHeaderValueAlwaysLandsOnTheSameEndpoint) {
  config::UpstreamConfig config = threeEndpoints(Policy::kLeastRequest);
  config.load_balancing.hash_header = "x-session";
  auto fleet = UpstreamFleet::create(config, nullptr);
  PickContext context;
  context.hash_value = "user-7";
  // Held leases: least_request alone would move away from the loaded endpoint.
  std::vector<EndpointLease> held;
  for (int i = 0; i < 30; ++i) held.push_back(lease(*fleet, context));
  const std::string home = keyOf(held[0]);
  for (const auto& l : held) EXPECT_EQ(keyOf(l), home);
  EXPECT_EQ(fleet->findEndpoint(home)->outstanding(), 30u);
  held.clear();

  std::map<std::string, std::string> first;
  std::set<std::string> used;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 60; ++i) {
      PickContext c;
      c.hash_value = "user-" + std::to_string(i);
      const std::string key = keyOf(lease(*fleet, c));
      if (round == 0) {
        first[*c.hash_value] = key;
        used.insert(key);
      } else {
        EXPECT_EQ(key, first[*c.hash_value]) << *c.hash_value;
      }
    }
  }
  EXPECT_EQ(used.size(), 3u);

  // Without hash_header configured the value is ignored: round robin spreads it.
  auto plain = UpstreamFleet::create(threeEndpoints(Policy::kRoundRobin), nullptr);
  std::set<std::string> spread;
  for (int i = 0; i < 3; ++i) spread.insert(keyOf(lease(*plain, context)));
  EXPECT_EQ(spread.size(), 3u);
}

TEST(UpstreamFleet, SequenceSticksToItsEndpointUntilSequenceEnd) {
  auto fleet = UpstreamFleet::create(threeEndpoints(Policy::kLeastRequest), nullptr);
  std::map<uint64_t, std::string> bound;
  for (int request = 0; request < 5; ++request) {
    std::vector<EndpointLease> held;  // load moves about; the sequences must not
    for (uint64_t id = 1; id <= 100; ++id) {
      held.push_back(lease(*fleet, sequenceContext(id, request == 0, request == 4)));
      const std::string key = keyOf(held.back());
      if (request == 0) {
        bound[id] = key;
      } else {
        EXPECT_EQ(key, bound[id]) << "sequence " << id << ", request " << request;
      }
    }
    if (request < 4) {
      EXPECT_EQ(fleet->affinity().size(), 100u);
    }
  }
  std::set<std::string> endpoints;
  for (const auto& [id, key] : bound) endpoints.insert(key);
  EXPECT_EQ(endpoints.size(), 3u);
  // sequence_end unbound every one.
  EXPECT_EQ(fleet->affinity().size(), 0u);
  EXPECT_EQ(fleet->counters().affinity_lost, 0u);
  // A sequence id that is not present is placed as any request.
  PickContext none;
  none.model = "m";
  none.sequence = codecs::SequenceRef{};
  EXPECT_TRUE(lease(*fleet, none).valid());
  EXPECT_EQ(fleet->affinity().size(), 0u);
}

TEST(UpstreamFleet, SequenceWhoseEndpointWasEjectedFailsUntilStartedAgain) {
  config::UpstreamConfig config = threeEndpoints(Policy::kLeastRequest);
  config.outlier = outlier(3, 60000, 60000);
  auto fleet = UpstreamFleet::create(config, nullptr);
  const std::string home = keyOf(lease(*fleet, sequenceContext(7, true)));
  // Its next requests go to the same endpoint, and fail there until it is ejected.
  for (int i = 0; i < 3; ++i) {
    EndpointLease l = lease(*fleet, sequenceContext(7, false));
    ASSERT_EQ(keyOf(l), home);
    l.finish(Outcome::kFailure);
  }
  ASSERT_TRUE(fleet->findEndpoint(home)->ejectedUntil().has_value());

  codecs::StatusOr<EndpointLease> lost = acquireNow(*fleet, sequenceContext(7, false));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable);
  const std::string_view message = codecs::messageOf(lost.status());
  EXPECT_EQ(contains(message, "state is lost"), "");
  EXPECT_EQ(contains(message, "sequence 7 of model 'm'"), "");
  EXPECT_EQ(contains(message, home), "");
  EXPECT_EQ(contains(message, "ejected after failures"), "");
  EXPECT_EQ(codecs::originOf(lost.status()), codecs::ErrorOrigin::kUpstream);
  EXPECT_EQ(fleet->counters().affinity_lost, 1u);
  EXPECT_EQ(fleet->counters().in_flight, 0u);

  // Started again: placed afresh, elsewhere, and bound there.
  const std::string again = keyOf(lease(*fleet, sequenceContext(7, true)));
  EXPECT_NE(again, home);
  EXPECT_NE(again, "(none)");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(keyOf(lease(*fleet, sequenceContext(7, false))), again);
  EXPECT_EQ(fleet->counters().affinity_lost, 1u);
}

TEST(UpstreamFleet, SequenceOnAnUnhealthyEndpointLosesItsState) {
  auto fleet = UpstreamFleet::create(threeEndpoints(Policy::kLeastRequest), nullptr);
  const std::string home = keyOf(lease(*fleet, sequenceContext(9, true)));
  config::HealthCheckConfig check;
  ASSERT_TRUE(fleet->findEndpoint(home)->recordProbe(false, check));
  codecs::StatusOr<EndpointLease> lost = acquireNow(*fleet, sequenceContext(9, false, true));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(contains(codecs::messageOf(lost.status()), "which is unhealthy"), "");
  EXPECT_EQ(fleet->counters().affinity_lost, 1u);
}

TEST(UpstreamFleet, AffinityTableAndEndpointsSurviveARecreate) {
  auto table = std::make_shared<routing::AffinityTable>(std::chrono::hours(1));
  auto before = UpstreamFleet::create(threeEndpoints(Policy::kLeastRequest), table);
  EXPECT_EQ(before->sharedAffinity(), table);
  std::map<uint64_t, std::string> bound;
  {
    std::vector<EndpointLease> held;
    for (uint64_t id = 1; id <= 30; ++id) {
      held.push_back(lease(*before, sequenceContext(id, true)));
      bound[id] = keyOf(held.back());
    }
  }
  ASSERT_EQ(table->size(), 30u);

  // The reload: the same table, the previous endpoints.
  auto after = UpstreamFleet::create(threeEndpoints(Policy::kRoundRobin), table,
                                     before->endpoints().get());
  EXPECT_EQ(after->sharedAffinity(), table);
  for (const std::string& key : {kA, kB, kC}) {
    ASSERT_NE(after->findEndpoint(key), nullptr);
    EXPECT_EQ(after->findEndpoint(key), before->findEndpoint(key)) << key;
  }
  EXPECT_EQ(table->size(), 30u);
  for (uint64_t id = 1; id <= 30; ++id) {
    EXPECT_EQ(keyOf(lease(*after, sequenceContext(id, false))), bound[id]) << "sequence " << id;
  }

  // Another reload drops B and adds D: A is the same object, D a new one; a sequence
  // bound to B has lost its state.
  config::UpstreamConfig next = threeEndpoints(Policy::kRoundRobin);
  next.endpoints = {tcp(1), tcp(4)};
  auto third = UpstreamFleet::create(next, table, after->endpoints().get());
  EXPECT_EQ(third->findEndpoint(kA), before->findEndpoint(kA));
  EXPECT_EQ(third->findEndpoint(kB), nullptr);
  ASSERT_NE(third->findEndpoint("127.0.0.1:4"), nullptr);
  uint64_t on_b = 0;
  for (const auto& [id, key] : bound) {
    if (key == kB) on_b = id;
  }
  ASSERT_NE(on_b, 0u);
  codecs::StatusOr<EndpointLease> lost = acquireNow(*third, sequenceContext(on_b, false));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(contains(codecs::messageOf(lost.status()), "no longer one of its endpoints"), "");

  // Without `previous`, new endpoints.
  auto fresh = UpstreamFleet::create(threeEndpoints(), table);
  EXPECT_NE(fresh->findEndpoint(kA), before->findEndpoint(kA));
}

// =========================================================================================
// UpstreamFleet: overload
// =========================================================================================

config::UpstreamConfig capped(uint32_t max_in_flight, uint32_t max_queue, uint64_t timeout_ms) {
  config::UpstreamConfig config = threeEndpoints(Policy::kRoundRobin);
  config.overload.max_in_flight = max_in_flight;
  config.overload.max_queue = max_queue;
  config.overload.queue_timeout_ms = timeout_ms;
  config.overload.retry_after_s = 7;
  return config;
}

TEST(UpstreamFleet, AtTheCapOneWaitsAndTheRestAreShedWithRetryAfter) {
  auto fleet = UpstreamFleet::create(capped(2, 1, 60000), nullptr);
  EndpointLease first = lease(*fleet);
  EndpointLease second = lease(*fleet);
  ASSERT_EQ(fleet->counters().in_flight, 2u);

  Acquired waiting;
  fleet->acquire({}, waiting.done());
  EXPECT_FALSE(waiting.ready());
  EXPECT_EQ(fleet->counters().queued, 1u);

  for (int i = 0; i < 5; ++i) {
    codecs::StatusOr<EndpointLease> refused = acquireNow(*fleet);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(retryAfterOf(refused.status()), std::optional<uint32_t>(7));
    EXPECT_EQ(contains(codecs::messageOf(refused.status()), "upstream 'up' is overloaded"), "");
    EXPECT_EQ(fleet->counters().queued, 1u);  // never more than max_queue
  }
  EXPECT_EQ(fleet->counters().shed, 5u);
  EXPECT_FALSE(waiting.ready());

  // A finished lease hands its slot to the waiter, on the finishing thread.
  first.finish(Outcome::kSuccess);
  ASSERT_TRUE(waiting.ready());
  codecs::StatusOr<EndpointLease> handed = waiting.take();
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_TRUE(handed->valid());
  EXPECT_EQ(fleet->counters().queued, 0u);
  EXPECT_EQ(fleet->counters().in_flight, 2u);
  second.finish(Outcome::kSuccess);
  EXPECT_EQ(fleet->counters().in_flight, 1u);
  *handed = EndpointLease();
  EXPECT_EQ(fleet->counters().in_flight, 0u);
  EXPECT_EQ(waiting.calls(), 1);
  EXPECT_EQ(fleet->counters().shed, 5u);
}

TEST(UpstreamFleet, PerEndpointCapQueuesUntilAnEndpointHasRoom) {
  config::UpstreamConfig config = capped(0, 4, 60000);
  config.overload.max_in_flight_per_endpoint = 1;
  auto fleet = UpstreamFleet::create(config, nullptr);
  std::vector<EndpointLease> held;
  for (int i = 0; i < 3; ++i) held.push_back(lease(*fleet));
  Acquired waiting;
  fleet->acquire({}, waiting.done());
  EXPECT_FALSE(waiting.ready());
  const std::string freed = keyOf(held[1]);
  held[1].finish(Outcome::kSuccess);
  codecs::StatusOr<EndpointLease> handed = waiting.take();
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_EQ(keyOf(*handed), freed);
}

// A freed slot offered to a waiter that can only fail (its sequence's endpoint went
// unhealthy while it waited) is still free: the next waiter gets it.
TEST(UpstreamFleet, SlotRefusedByAFailingWaiterGoesToTheNextOne) {
  auto fleet = UpstreamFleet::create(capped(1, 4, 60000), nullptr);
  const std::string home = keyOf(lease(*fleet, sequenceContext(5, true)));
  EndpointLease only = lease(*fleet);
  Acquired sequence, plain;
  fleet->acquire(sequenceContext(5, false), sequence.done());
  fleet->acquire({}, plain.done());
  ASSERT_EQ(fleet->counters().queued, 2u);
  config::HealthCheckConfig check;
  ASSERT_TRUE(fleet->findEndpoint(home)->recordProbe(false, check));
  only.finish(Outcome::kSuccess);
  ASSERT_TRUE(sequence.ready());
  codecs::StatusOr<EndpointLease> lost = sequence.take();
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(contains(codecs::messageOf(lost.status()), "state is lost"), "");
  ASSERT_TRUE(plain.ready()) << "the slot stayed free while a request waited";
  codecs::StatusOr<EndpointLease> handed = plain.take();
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_NE(keyOf(*handed), home);
  EXPECT_EQ(fleet->counters().queued, 0u);
  EXPECT_EQ(fleet->counters().in_flight, 1u);
}

TEST(UpstreamFleet, WaiterTimesOutWithRetryAfter) {
  auto fleet = UpstreamFleet::create(capped(1, 4, 50), nullptr);
  EndpointLease only = lease(*fleet);
  Acquired waiting;
  fleet->acquire({}, waiting.done());
  EXPECT_FALSE(waiting.ready());
  codecs::StatusOr<EndpointLease> expired = waiting.take();  // from the housekeeper's thread
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(retryAfterOf(expired.status()), std::optional<uint32_t>(7));
  EXPECT_EQ(contains(codecs::messageOf(expired.status()), "no slot came free within 50 ms"), "");
  EXPECT_EQ(fleet->counters().queued, 0u);
  EXPECT_EQ(fleet->counters().shed, 1u);
  // The slot freed later goes to nobody; the waiter was answered once.
  only.finish(Outcome::kSuccess);
  EXPECT_EQ(waiting.calls(), 1);
  EXPECT_EQ(fleet->counters().in_flight, 0u);
}

TEST(UpstreamFleet, RequestDeadlineBoundsTheWait) {
  auto fleet = UpstreamFleet::create(capped(1, 4, 60000), nullptr);
  EndpointLease only = lease(*fleet);
  PickContext context;
  context.deadline = Clock::now() + 30ms;
  Acquired waiting;
  fleet->acquire(context, waiting.done());
  codecs::StatusOr<EndpointLease> expired = waiting.take();
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kUnavailable);
  // A deadline already passed does not wait at all.
  context.deadline = Clock::now() - 1ms;
  codecs::StatusOr<EndpointLease> at_once = acquireNow(*fleet, context);
  ASSERT_FALSE(at_once.ok());
  EXPECT_TRUE(retryAfterOf(at_once.status()).has_value());
}

TEST(UpstreamFleet, NoQueueRefusesAtOnce) {
  auto fleet = UpstreamFleet::create(capped(1, 0, 60000), nullptr);
  EndpointLease only = lease(*fleet);
  codecs::StatusOr<EndpointLease> refused = acquireNow(*fleet);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(retryAfterOf(refused.status()), std::optional<uint32_t>(7));
  EXPECT_EQ(fleet->counters().queued, 0u);
  EXPECT_EQ(fleet->counters().shed, 1u);
  only.finish(Outcome::kSuccess);
  EXPECT_TRUE(lease(*fleet).valid());
}

// =========================================================================================
// UpstreamFleet: dns: entries
// =========================================================================================

TEST(UpstreamFleet, DnsEntryStartsWithNoEndpoints) {
  config::UpstreamConfig config = threeEndpoints();
  config.endpoints = {dnsEntry()};
  auto fleet = UpstreamFleet::create(config, nullptr);
  EXPECT_TRUE(fleet->endpoints()->empty());
  EXPECT_TRUE(fleet->affinityMatters());
  codecs::StatusOr<EndpointLease> none = acquireNow(*fleet);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(contains(codecs::messageOf(none.status()), "has no endpoints"), "");
  EXPECT_EQ(fleet->counters().in_flight, 0u);
}

TEST(UpstreamFleet, SetResolvedKeepsTheEndpointsThatStayAndDropsTheOthers) {
  config::UpstreamConfig config = threeEndpoints();
  config.endpoints = {dnsEntry()};
  auto fleet = UpstreamFleet::create(config, nullptr);
  fleet->setResolved(dnsEntry(), {"10.0.0.1", "10.0.0.2"});
  auto list = fleet->endpoints();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0]->key(), "10.0.0.1:9000");
  EXPECT_EQ((*list)[1]->key(), "10.0.0.2:9000");
  EXPECT_EQ((*list)[0]->address().kind, config::ListenAddress::Kind::kTcp);
  EXPECT_EQ((*list)[0]->address().host, "10.0.0.1");
  EXPECT_EQ((*list)[0]->address().port, 9000);
  const std::shared_ptr<Endpoint> kept = fleet->findEndpoint("10.0.0.1:9000");
  EXPECT_TRUE(lease(*fleet).valid());

  fleet->setResolved(dnsEntry(), {"10.0.0.1"});
  list = fleet->endpoints();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0], kept);
  EXPECT_EQ(fleet->findEndpoint("10.0.0.2:9000"), nullptr);

  // An entry this upstream does not have changes nothing.
  config::ListenAddress other = dnsEntry();
  other.text = "dns:other:9000";
  fleet->setResolved(other, {"10.0.0.9"});
  EXPECT_EQ(fleet->endpoints()->size(), 1u);

  fleet->setResolved(dnsEntry(), {"fd00::1"});
  list = fleet->endpoints();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0]->key(), "[fd00::1]:9000");
  EXPECT_EQ((*list)[0]->address().host, "fd00::1");

  fleet->setResolved(dnsEntry(), {});
  EXPECT_TRUE(fleet->endpoints()->empty());
}

TEST(UpstreamFleet, ResolvedEndpointKeepsALeaseInFlightAfterItIsDropped) {
  config::UpstreamConfig config = threeEndpoints();
  config.endpoints = {tcp(1), dnsEntry()};
  auto fleet = UpstreamFleet::create(config, nullptr);
  fleet->setResolved(dnsEntry(), {"10.0.0.1"});
  ASSERT_EQ(fleet->endpoints()->size(), 2u);
  EndpointLease on_resolved = leaseOn(*fleet, "10.0.0.1:9000", 2);
  ASSERT_TRUE(on_resolved.valid());
  fleet->setResolved(dnsEntry(), {});
  ASSERT_EQ(fleet->endpoints()->size(), 1u);
  EXPECT_EQ(on_resolved.endpoint().outstanding(), 1u);
  on_resolved.finish(Outcome::kSuccess);  // finishes on the dropped endpoint
  EXPECT_EQ(fleet->counters().in_flight, 0u);
}

}  // namespace
}  // namespace infergate::gateway::upstream
