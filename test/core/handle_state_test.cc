// Handle states (core/handle_state.h): make_handle_state's per-thread cache of freed blocks
// hands a thread back the block it freed last, states freed on other threads or at a
// thread's exit are fine (ASan/LSan check the memory), and a completed state is read without
// its mutex (wait, done, status) with the outcome written before it completed.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/handle_state.h"

using namespace kolo;
using detail::HandleState;
using detail::make_handle_state;

TEST_CASE("a thread gets back the block of the state it freed last", "[handle]") {
  auto a = make_handle_state("a", OpKind::kAllreduce);
  auto b = make_handle_state("b", OpKind::kAllreduce);
  const HandleState* at_b = b.get();
  a.reset();
  b.reset();  // freed last: the cache hands it out first
  auto c = make_handle_state("c", OpKind::kBroadcast);
  CHECK(c.get() == at_b);
  CHECK(c->name == "c");
  CHECK(c->kind == OpKind::kBroadcast);
  CHECK_FALSE(c->finished.load());
  CHECK_FALSE(c->observed.load());
  CHECK(c->status.is_ok());
}

TEST_CASE("more states than the cache keeps, freed on other threads and at their exit", "[handle]") {
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::vector<std::shared_ptr<HandleState>>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto s = make_handle_state("t" + std::to_string(t) + ".tensor.with.a.long.name." + std::to_string(i),
                                   OpKind::kAllreduce);
        s->complete(Status::ok());
        if (i % 2 == 0) made[t].push_back(std::move(s));  // the next thread frees these
      }
    });
  for (auto& th : threads) th.join();
  threads.clear();
  // Catch2's assertions are not thread-safe: each thread counts what it saw wrong, and the
  // main thread checks the counts.
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto& mine = made[(t + 1) % kThreads];
      for (auto& s : mine) wrong[t] += !s->finished.load();
      mine.clear();  // freed here; then some are cached and freed again at this thread's exit
      auto fresh = make_handle_state("fresh", OpKind::kAllgather);
      wrong[t] += fresh->finished.load();
    });
  for (auto& th : threads) th.join();
  CHECK(wrong == std::vector<int>(kThreads, 0));
}

TEST_CASE("a waiter sees the outcome written before completion, without the mutex once done", "[handle]") {
  for (int round = 0; round < 50; ++round) {
    auto s = make_handle_state("w", OpKind::kAllgather);
    std::thread completer([s] {
      s->extra().received_splits = {1, 2, 3};
      s->complete(Status::invalid_argument("bad " + std::to_string(7)));
    });
    Handle h(s);
    s->wait();
    CHECK(h.done());
    CHECK(s->extra_->received_splits == std::vector<int64_t>{1, 2, 3});
    CHECK(h.status().message() == "bad 7");
    CHECK(s->observed.load());
    CHECK(s->wait_for(std::chrono::milliseconds(0)));
    completer.join();
  }
}

TEST_CASE("a sleeping waiter: wait_for times out, then wakes on completion", "[handle]") {
  auto s = make_handle_state("sleep", OpKind::kAllreduce);
  CHECK(sizeof(HandleState) <= 88);  // two cache lines with the shared_ptr's counts
  CHECK_FALSE(s->wait_for(std::chrono::milliseconds(5)));  // no runtime: nobody helps, it sleeps
  CHECK_FALSE(s->finished.load());
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i)
    waiters.emplace_back([&, i] {
      if (i == 0) s->wait();
      else if (!s->wait_for(std::chrono::minutes(10))) return;  // a hang catcher, not a timing
      woken.fetch_add(1);
    });
  // Completes once a waiter sleeps on the futex word (or is about to), while the others may
  // not have come that far yet.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s->sleep_word.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  REQUIRE(s->sleep_word.load() != 0);
  s->nudge();  // wakes sleepers without completing: they sleep again
  CHECK_FALSE(s->finished.load());
  s->complete(Status::aborted("stopped"));
  s->complete(Status::ok());  // ignored: the first call wins
  for (auto& t : waiters) t.join();
  CHECK(woken.load() == 3);
  CHECK(s->status.message() == "stopped");
  s->observed = true;
}
