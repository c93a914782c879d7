#include "routing/route_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "routing/routing_test_util.h"  // counts allocations, to prove match() makes none

namespace infergate::routing {
namespace {

using config::GatewayConfig;
using config::HeaderValue;
using config::RouteConfig;
using config::RouteMatch;
using config::RouteTarget;
using Model = RouteMatch::Model;

class MapHeaders : public RequestHeaders {
 public:
  MapHeaders(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}
  std::optional<std::string_view> find(std::string_view name) const override {
    auto it = values_.find(std::string(name));
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, std::string> values_;
};

RouteMatch exact(std::string model) { return {Model::kExact, std::move(model), "", {}}; }
RouteMatch prefix(std::string p) { return {Model::kPrefix, std::move(p), "", {}}; }
RouteMatch any() { return {Model::kAny, "", "", {}}; }

RouteConfig route(RouteMatch match, std::string upstream) {
  RouteConfig r;
  r.match = std::move(match);
  r.targets.push_back(RouteTarget{std::move(upstream), 100, {}});
  return r;
}

GatewayConfig withUpstreams(std::initializer_list<const char*> names) {
  GatewayConfig config;
  for (const char* name : names) {
    config::UpstreamConfig u;
    u.name = name;
    config.upstreams.push_back(u);
  }
  return config;
}

std::shared_ptr<const RouteTable> build(const GatewayConfig& config) {
  auto table = RouteTable::build(config);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *table : nullptr;
}

// The index of the route `model` (with `version`, `headers`) goes to; -1 for none.
int routeFor(const RouteTable& table, std::string_view model, std::string_view version = "",
             const RequestHeaders* headers = nullptr) {
  const Route* r = table.match(RouteRequest{model, version, headers});
  return r ? static_cast<int>(r->index) : -1;
}

TEST(RouteTable, MatchesExactPrefixAndAnyModel) {
  GatewayConfig c = withUpstreams({"a", "b", "c"});
  c.routes = {route(exact("resnet50"), "a"), route(prefix("llm-"), "b"), route(any(), "c")};
  auto table = build(c);
  ASSERT_TRUE(table);
  EXPECT_EQ(routeFor(*table, "resnet50"), 0);
  EXPECT_EQ(routeFor(*table, "llm-7b"), 1);
  EXPECT_EQ(routeFor(*table, "llm-"), 1);  // the prefix alone is a match
  EXPECT_EQ(routeFor(*table, "llm"), 2);
  EXPECT_EQ(routeFor(*table, "resnet50x"), 2);
  EXPECT_EQ(routeFor(*table, ""), 2);
  const Route* r = table->match({"llm-7b", "", nullptr});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->targets[0].upstream, 1u);
  EXPECT_EQ(table->upstreams()[r->targets[0].upstream], "b");
}

TEST(RouteTable, NoRouteMatchesWithoutACatchAll) {
  GatewayConfig c = withUpstreams({"a"});
  c.routes = {route(exact("resnet50"), "a"), route(prefix("llm-"), "a")};
  auto table = build(c);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->match({"bert", "", nullptr}), nullptr);
  EXPECT_EQ(table->match({"resnet", "", nullptr}), nullptr);
}

TEST(RouteTable, VersionConditionNeedsThatVersion) {
  GatewayConfig c = withUpstreams({"a", "b"});
  RouteMatch v2 = exact("m");
  v2.version = "2";
  c.routes = {route(v2, "a"), route(exact("m"), "b")};
  auto table = build(c);
  ASSERT_TRUE(table);
  EXPECT_EQ(routeFor(*table, "m", "2"), 0);
  EXPECT_EQ(routeFor(*table, "m", ""), 1);   // no version named: not version 2
  EXPECT_EQ(routeFor(*table, "m", "3"), 1);
  EXPECT_EQ(routeFor(*table, "m", "20"), 1);
}

TEST(RouteTable, HeaderConditionsNeedEveryHeaderWithItsValue) {
  GatewayConfig c = withUpstreams({"a", "b"});
  RouteMatch beta = prefix("llm-");
  beta.headers = {HeaderValue{"x-tenant", "beta", {}}, HeaderValue{"x-tier", "gold", {}}};
  c.routes = {route(beta, "a"), route(any(), "b")};
  auto table = build(c);
  ASSERT_TRUE(table);
  MapHeaders both{{"x-tenant", "beta"}, {"x-tier", "gold"}, {"other", "1"}};
  MapHeaders one{{"x-tenant", "beta"}};
  MapHeaders wrong{{"x-tenant", "Beta"}, {"x-tier", "gold"}};
  MapHeaders none{};
  EXPECT_EQ(routeFor(*table, "llm-a", "", &both), 0);
  EXPECT_EQ(routeFor(*table, "llm-a", "", &one), 1);
  EXPECT_EQ(routeFor(*table, "llm-a", "", &wrong), 1);  // values are compared exactly
  EXPECT_EQ(routeFor(*table, "llm-a", "", &none), 1);
  EXPECT_EQ(routeFor(*table, "llm-a", "", nullptr), 1);  // no headers at all
  EXPECT_EQ(routeFor(*table, "bert", "", &both), 1);     // headers alone are not enough
}

TEST(RouteTable, ACatchAllBeforeAnExactRouteWins) {
  GatewayConfig c = withUpstreams({"a", "b"});
  c.routes = {route(any(), "a"), route(exact("resnet50"), "b")};
  auto table = build(c);
  ASSERT_TRUE(table);
  EXPECT_EQ(routeFor(*table, "resnet50"), 0);
}

TEST(RouteTable, FirstMatchWinsAcrossExactAndGeneralRoutes) {
  GatewayConfig c = withUpstreams({"a"});
  RouteMatch tenant_prefix = prefix("llm-");
  tenant_prefix.headers = {HeaderValue{"x-tenant", "beta", {}}};
  RouteMatch v1 = exact("llm-a");
  v1.version = "1";
  c.routes = {
      route(tenant_prefix, "a"),   // 0: llm-* for tenant beta
      route(v1, "a"),              // 1: llm-a version 1
      route(prefix("llm-a"), "a"), // 2: llm-a*
      route(exact("llm-a"), "a"),  // 3: llm-a, any version (after 2: never chosen)
      route(exact("llm-b"), "a"),  // 4
      route(prefix("llm-"), "a"),  // 5
  };
  auto table = build(c);
  ASSERT_TRUE(table);
  MapHeaders beta{{"x-tenant", "beta"}};
  EXPECT_EQ(routeFor(*table, "llm-a", "1", &beta), 0);  // general before exact
  EXPECT_EQ(routeFor(*table, "llm-a", "1"), 1);         // exact before general
  EXPECT_EQ(routeFor(*table, "llm-a", "2"), 2);         // exact misses: next general
  EXPECT_EQ(routeFor(*table, "llm-b"), 4);              // exact before a later general
  EXPECT_EQ(routeFor(*table, "llm-c"), 5);
  EXPECT_EQ(routeFor(*table, "llm-b", "", &beta), 0);
}

TEST(RouteTable, SeveralExactRoutesForOneNameAreTriedInOrder) {
  GatewayConfig c = withUpstreams({"a"});
  RouteMatch v1 = exact("m"), v2 = exact("m");
  v1.version = "1";
  v2.version = "2";
  c.routes = {route(v1, "a"), route(exact("other"), "a"), route(v2, "a"), route(exact("m"), "a")};
  auto table = build(c);
  ASSERT_TRUE(table);
  EXPECT_EQ(routeFor(*table, "m", "1"), 0);
  EXPECT_EQ(routeFor(*table, "m", "2"), 2);
  EXPECT_EQ(routeFor(*table, "m", "9"), 3);
  EXPECT_EQ(routeFor(*table, "m"), 3);
}

TEST(RouteTable, TenThousandRoutesStillMatchCorrectly) {
  GatewayConfig c = withUpstreams({"even", "odd", "rest"});
  constexpr int kRoutes = 10000;
  for (int i = 0; i < kRoutes; ++i) {
    // A prefix route every 1000 routes, so general and exact routes interleave.
    if (i % 1000 == 500) {
      c.routes.push_back(route(prefix("group" + std::to_string(i) + "-"), "rest"));
    } else {
      c.routes.push_back(route(exact("model-" + std::to_string(i)), i % 2 ? "odd" : "even"));
    }
  }
  c.routes.push_back(route(any(), "rest"));
  auto table = build(c);
  ASSERT_TRUE(table);
  ASSERT_EQ(table->routes().size(), kRoutes + 1u);
  for (int i = 0; i < kRoutes; ++i) {
    if (i % 1000 == 500) {
      ASSERT_EQ(routeFor(*table, "group" + std::to_string(i) + "-x"), i);
      continue;
    }
    const Route* r = table->match({"model-" + std::to_string(i), "", nullptr});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->index, static_cast<size_t>(i));
    ASSERT_EQ(table->upstreams()[r->targets[0].upstream], i % 2 ? "odd" : "even");
  }
  EXPECT_EQ(routeFor(*table, "model-10000"), kRoutes);
  EXPECT_EQ(routeFor(*table, "model-"), kRoutes);
}

TEST(RouteTable, MatchDoesNotAllocate) {
  GatewayConfig c = withUpstreams({"a"});
  std::string long_name(64, 'm');  // past any small-string buffer
  RouteMatch with_header = prefix("llm-");
  with_header.headers = {HeaderValue{"x-tenant", "beta", {}}};
  c.routes = {route(with_header, "a"), route(exact(long_name), "a"), route(any(), "a")};
  auto table = build(c);
  ASSERT_TRUE(table);
  MapHeaders headers{{"x-tenant", "beta"}};
  std::string unknown(64, 'u');
  const Route* hit = nullptr;
  const Route* fallback = nullptr;
  size_t allocations = testing::allocationsDuring([&] {
    hit = table->match({long_name, "1", nullptr});
    fallback = table->match({unknown, "", nullptr});
  });
  EXPECT_EQ(allocations, 0u);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->index, 1u);
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(fallback->index, 2u);
}

// ---- splits ---------------------------------------------------------------------------

RouteConfig split(RouteMatch match, std::vector<std::pair<std::string, uint32_t>> shares) {
  RouteConfig r;
  r.match = std::move(match);
  for (auto& [upstream, weight] : shares) r.targets.push_back({upstream, weight, {}});
  return r;
}

TEST(RouteTable, PickFollowsTheWeightsOverManyDraws) {
  GatewayConfig c = withUpstreams({"a", "b", "c"});
  c.routes = {split(any(), {{"a", 90}, {"b", 10}}),
              split(exact("x"), {{"c", 50}, {"a", 30}, {"b", 20}})};
  auto table = build(c);
  ASSERT_TRUE(table);
  std::mt19937_64 prng(20240611);
  constexpr int kDraws = 100000;
  // Within 1,000 of the expectation: more than 10 standard deviations for 90/10
  // (sqrt(100000 * 0.9 * 0.1) = 95), so a correct pick never fails, a skewed one does.
  int counts[3] = {};
  for (int i = 0; i < kDraws; ++i) ++counts[table->routes()[0].pick(prng())];
  EXPECT_NEAR(counts[0], 90000, 1000);
  EXPECT_NEAR(counts[1], 10000, 1000);
  EXPECT_EQ(counts[2], 0);
  int three[3] = {};
  for (int i = 0; i < kDraws; ++i) ++three[table->routes()[1].pick(prng())];
  EXPECT_NEAR(three[2], 50000, 1000);  // c is upstream 2
  EXPECT_NEAR(three[0], 30000, 1000);
  EXPECT_NEAR(three[1], 20000, 1000);
}

TEST(RouteTable, PickSplitsTheDrawRangeAtTheWeights) {
  GatewayConfig c = withUpstreams({"a", "b"});
  c.routes = {split(any(), {{"a", 90}, {"b", 10}})};
  auto table = build(c);
  ASSERT_TRUE(table);
  const Route& r = table->routes()[0];
  EXPECT_EQ(r.pick(0), 0u);
  EXPECT_EQ(r.pick(UINT64_MAX), 1u);
  // The high 32 bits decide: the first value whose point is 90 starts b's range.
  uint64_t first_b = (uint64_t{90} << 32) / 100 + 1;  // ceil(0.9 * 2^32)
  EXPECT_EQ(r.pick(first_b << 32), 1u);
  EXPECT_EQ(r.pick(((first_b - 1) << 32) | 0xffffffffu), 0u);
}

TEST(RouteTable, OneTargetIsAlwaysPicked) {
  GatewayConfig c = withUpstreams({"a", "b"});
  c.routes = {route(any(), "b")};
  auto table = build(c);
  ASSERT_TRUE(table);
  std::mt19937_64 prng(7);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(table->routes()[0].pick(prng()), 1u);
}

// ---- what build() copies, and refuses -------------------------------------------------

TEST(RouteTable, BuildKeepsTheRoutesSettings) {
  GatewayConfig c = withUpstreams({"a", "b", "shadow"});
  RouteMatch m = prefix("llm-");
  m.version = "2";
  RouteConfig r = split(m, {{"a", 90}, {"b", 10}});
  r.rewrite_model = "llm-v2";
  r.timeout_ms = 5000;
  r.mirror = "shadow";
  r.name = "llm-canary";
  c.routes = {route(exact("resnet50"), "a"), route(any(), "b"), r};
  auto table = build(c);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->upstreams(), (std::vector<std::string>{"a", "b", "shadow"}));
  const Route& first = table->routes()[0];
  EXPECT_EQ(first.description, "routes[0] (model resnet50)");
  EXPECT_EQ(first.name, "routes[0]");  // no name configured
  EXPECT_EQ(first.timeout.count(), 0);
  EXPECT_FALSE(first.mirror.has_value());
  EXPECT_EQ(table->routes()[1].description, "routes[1] (model *)");
  const Route& third = table->routes()[2];
  EXPECT_EQ(third.index, 2u);
  EXPECT_EQ(third.description, "routes[2] (model_prefix llm- version 2)");
  EXPECT_EQ(third.name, "llm-canary");
  EXPECT_EQ(third.timeout, std::chrono::milliseconds(5000));
  ASSERT_TRUE(third.mirror.has_value());
  EXPECT_EQ(*third.mirror, 2u);
  ASSERT_EQ(third.targets.size(), 2u);
  EXPECT_EQ(third.targets[0].upstream, 0u);
  EXPECT_EQ(third.targets[0].weight, 90u);
  EXPECT_EQ(third.targets[1].upstream, 1u);
  EXPECT_EQ(third.targets[1].weight, 10u);
  EXPECT_EQ(third.match.version, "2");
}

TEST(RouteTable, RewriteHelpersReplaceOnlyWhatIsGiven) {
  Route keep;
  EXPECT_FALSE(keep.rewrites());
  EXPECT_EQ(keep.upstreamModel("llm-a"), "llm-a");
  EXPECT_EQ(keep.upstreamVersion("3"), "3");
  EXPECT_EQ(keep.upstreamVersion(""), "");
  Route model;
  model.rewrite_model = "llm-v2";
  EXPECT_TRUE(model.rewrites());
  EXPECT_EQ(model.upstreamModel("llm-a"), "llm-v2");
  EXPECT_EQ(model.upstreamVersion("3"), "3");
  Route version;
  version.rewrite_version = "1";
  EXPECT_TRUE(version.rewrites());
  EXPECT_EQ(version.upstreamModel("llm-a"), "llm-a");
  EXPECT_EQ(version.upstreamVersion(""), "1");
  EXPECT_EQ(version.upstreamVersion("3"), "1");
}

void expectBuildError(const GatewayConfig& c, std::string_view message) {
  auto table = RouteTable::build(c);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(table.status()), message);
}

TEST(RouteTable, BuildRefusesAnUnknownUpstream) {
  GatewayConfig c = withUpstreams({"a"});
  c.routes = {route(exact("m"), "a"), route(prefix("llm-"), "triton")};
  expectBuildError(c, "routes[1] (model_prefix llm-): upstream \"triton\" is not defined");
  c.routes = {split(any(), {{"a", 50}, {"b", 50}})};
  expectBuildError(c, "routes[0] (model *): upstream \"b\" is not defined");
  c.routes = {route(any(), "a")};
  c.routes[0].mirror = "gone";
  expectBuildError(c, "routes[0] (model *): mirror upstream \"gone\" is not defined");
}

TEST(RouteTable, BuildRefusesBadWeightsAndDuplicateUpstreams) {
  GatewayConfig c = withUpstreams({"a", "b"});
  c.routes = {split(any(), {{"a", 50}, {"b", 40}})};
  expectBuildError(c, "routes[0] (model *): target weights add up to 90, not 100");
  c.routes = {RouteConfig{}};
  expectBuildError(c, "routes[0] (model *): target weights add up to 0, not 100");
  c.routes = {split(any(), {{"a", 0x80000000u}, {"b", 0x80000064u}})};  // wraps in 32 bits
  expectBuildError(c, "routes[0] (model *): target weights add up to 4294967396, not 100");
  GatewayConfig twice = withUpstreams({"a", "a"});
  twice.routes = {route(any(), "a")};
  expectBuildError(twice, "upstream \"a\" is defined twice");
}

}  // namespace
}  // namespace infergate::routing
