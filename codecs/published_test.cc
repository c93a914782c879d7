#include "codecs/published.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace infergate::codecs {
namespace {

TEST(Published, GetSeesEachStore) {
  Published<std::string> p;
  EXPECT_EQ(p.get(), nullptr);
  p.store(std::make_shared<const std::string>("one"));
  ASSERT_NE(p.get(), nullptr);
  EXPECT_EQ(*p.get(), "one");
  EXPECT_EQ(*p.get(), "one");
  p.store(std::make_shared<const std::string>("two"));
  EXPECT_EQ(*p.get(), "two");
  EXPECT_EQ(*p.load(), "two");
}

TEST(Published, AStoreOnAnotherThreadIsSeenHere) {
  Published<int> p(std::make_shared<const int>(1));
  EXPECT_EQ(*p.get(), 1);  // held by this thread now
  std::thread([&] { p.store(std::make_shared<const int>(2)); }).join();
  EXPECT_EQ(*p.get(), 2);
}

TEST(Published, EachThreadHoldsItsOwnValueUntilItsNextGet) {
  Published<int> p(std::make_shared<const int>(1));
  const int* mine = p.get();
  std::thread([&] {
    EXPECT_EQ(*p.get(), 1);
    p.store(std::make_shared<const int>(2));
    EXPECT_EQ(*p.get(), 2);
  }).join();
  EXPECT_EQ(*mine, 1);  // still held by this thread's table: no get() of p since
  EXPECT_EQ(*p.get(), 2);
}

TEST(Published, OtherInstancesDoNotDisturbAHeldValue) {
  std::vector<std::unique_ptr<Published<int>>> many;
  for (int i = 0; i < 40; ++i) many.push_back(std::make_unique<Published<int>>(std::make_shared<const int>(i)));
  std::vector<const int*> seen;
  for (auto& p : many) seen.push_back(p->get());
  for (int i = 0; i < 40; ++i) many[i]->store(std::make_shared<const int>(100 + i));
  // Every other instance read again: each takes its new value, and the values the
  // others returned stay held (ASan would catch a read of a freed one).
  for (int i = 0; i < 40; i += 2) EXPECT_EQ(*many[i]->get(), 100 + i);
  for (int i = 1; i < 40; i += 2) EXPECT_EQ(*seen[i], i);
  for (int i = 1; i < 40; i += 2) EXPECT_EQ(*many[i]->get(), 100 + i);
}

TEST(Published, AReplacedValueIsLetGoAtTheNextGet) {
  Published<int> p;
  auto first = std::make_shared<const int>(1);
  std::weak_ptr<const int> watch = first;
  p.store(std::move(first));
  (void)p.get();
  p.store(std::make_shared<const int>(2));
  EXPECT_FALSE(watch.expired());  // this thread's table holds it
  (void)p.get();
  EXPECT_TRUE(watch.expired());
}

TEST(Published, ANewInstanceInAReusedSlotStartsFromItsOwnValue) {
  std::weak_ptr<const int> watch;
  {
    Published<int> old(std::make_shared<const int>(7));
    watch = old.load();
    EXPECT_EQ(*old.get(), 7);
  }
  // The slot is reused by the next instance: its first get() takes its own value (and
  // lets the old instance's go), never the old one.
  Published<int> fresh;
  EXPECT_EQ(fresh.get(), nullptr);
  Published<int> another(std::make_shared<const int>(8));
  EXPECT_EQ(*another.get(), 8);
  EXPECT_EQ(fresh.get(), nullptr);
  EXPECT_TRUE(watch.expired());
}

TEST(Published, ReadersNeverGoBackAndSeeTheLastStore) {
  Published<int> p(std::make_shared<const int>(0));
  constexpr int kStores = 2000;
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      int last = 0;
      for (;;) {
        const bool finished = done.load(std::memory_order_acquire);
        const int now = *p.get();
        if (now < last) errors.fetch_add(1);
        last = now;
        if (finished) {
          if (now != kStores) errors.fetch_add(1);
          return;
        }
      }
    });
  }
  for (int i = 1; i <= kStores; ++i) p.store(std::make_shared<const int>(i));
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  EXPECT_EQ(errors.load(), 0);
}

}  // namespace
}  // namespace infergate::codecs
