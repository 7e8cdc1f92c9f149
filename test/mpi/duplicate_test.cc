// Duplicate names under concurrency: several threads per rank submit one name at random
// moments, round after round. The rule under test (include/kolo/collectives.h): a submission
// of a name whose collective is still in flight on this rank fails at once on this rank only;
// the collective in flight is untouched; a name is free again once its handle completed.
// After every round a normal use of the name must succeed on every rank with exact values,
// and no round may ever reduce one round's data with another's.
//
// How a round is kept deterministic across ranks: one rank (the "holder", rotating) submits
// only after every other rank has finished submitting (a gate collective), so on the other
// ranks every duplicate certainly meets the name in flight. The holder's own threads race
// the completion: a late one may find the name free and start a second round on the holder
// alone. Every rank learns that through an allreduce and matches it, and the second round's
// values are checked like the first's (the data differs per round, so a pairing across
// rounds could not go unnoticed).
#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 200;
const std::string kName = "dup.x";

// Rank r's element i in sub-round s of round k: small integers, so float sums are exact.
float value(int k, int s, int r, size_t i) {
  return static_cast<float>(static_cast<int>((k * 7 + s * 13 + r * 3 + i) % 17) - 8);
}

float expected_sum(int k, int s, size_t i) {
  float acc = 0;
  for (int r = 0; r < size(); ++r) acc += value(k, s, r, i);
  return acc;
}

size_t count_wrong(const std::vector<float>& buf, int k, int s) {
  size_t wrong = 0;
  for (size_t i = 0; i < buf.size(); ++i) wrong += buf[i] != expected_sum(k, s, i);
  return wrong;
}

// One rank's submissions of kName in one round: the threads, their buffers and handles.
struct Round {
  int k;
  size_t count;
  std::mutex mu;                            // serialises submissions (fill + push)
  int accepted = 0;                         // guarded by mu: submissions not refused
  std::vector<std::vector<float>> bufs;     // one per accepted submission, by sub-round
  std::vector<Handle> handles;              // guarded by mu: the accepted ones, by sub-round
  std::atomic<int> refused{0}, misreported{0};

  Round(int round, size_t n) : k(round), count(n) { bufs.reserve(kThreads); }

  // A thread's submission: the data is that of the sub-round it would start if accepted.
  void submit() {
    std::lock_guard<std::mutex> lock(mu);
    const int s = accepted;
    std::vector<float> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = value(k, s, rank(), i);
    Handle h = allreduce_async(TensorView::of(buf), kName, {ReduceOp::kSum});
    if (h.done() && !h.status().is_ok()) {
      // Refused at once, on this rank, with the duplicate message.
      if (h.status().message().find("submitted again on rank " + std::to_string(rank())) == std::string::npos)
        ++misreported;
      ++refused;
      return;
    }
    bufs.push_back(std::move(buf));
    handles.push_back(h);
    ++accepted;
  }

  void run_threads(std::mt19937_64& rng, int max_delay_us) {
    std::vector<int> delays(kThreads);
    for (int& d : delays) d = static_cast<int>(rng() % static_cast<uint64_t>(max_delay_us + 1));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([this, d = delays[t]] {
        std::this_thread::sleep_for(std::chrono::microseconds(d));
        submit();
      });
    for (auto& t : threads) t.join();
  }
};

int allreduce_max(int v, const std::string& name) {
  int32_t x = v;
  allreduce(TensorView::of(&x, {1}), name, {ReduceOp::kMax});
  return x;
}

}  // namespace

TEST_CASE("duplicates from many threads affect only themselves, round after round", "[duplicates]") {
  std::mt19937_64 rng(977u + static_cast<uint64_t>(rank()));
  int extra_rounds = 0, failures = 0;
  for (int k = 0; k < kRounds; ++k) {
    const int holder = k % size();
    // Every 10th round a 4 MB tensor, so that late duplicates also land while it executes.
    const bool big = k % 10 == 9;
    Round round(k, big ? (1u << 20) : 1u + static_cast<size_t>(k % 37));
    const int max_delay_us = big ? 3000 : 300;
    int32_t gate = 0;
    if (rank() != holder) {
      round.run_threads(rng, max_delay_us);
      allreduce(TensorView::of(&gate, {1}), "dup.gate", {ReduceOp::kSum});
    } else {
      allreduce(TensorView::of(&gate, {1}), "dup.gate", {ReduceOp::kSum});
      round.run_threads(rng, max_delay_us);
    }
    // Only the holder can have started a second round (its threads race the first's end).
    const int extra = allreduce_max(round.accepted - 1, "dup.extra");
    if (rank() != holder) {
      REQUIRE(round.accepted == 1);  // every duplicate met the name in flight
      for (int s = 1; s <= extra; ++s) round.submit();
    }
    REQUIRE(round.accepted == 1 + extra);
    REQUIRE(round.refused + round.accepted == kThreads + (rank() != holder ? extra : 0));
    CHECK(round.misreported == 0);
    extra_rounds += extra;
    for (int s = 0; s < round.accepted; ++s) {
      const Handle& h = round.handles[static_cast<size_t>(s)];
      REQUIRE(h.wait_for(std::chrono::seconds(60)));
      if (!h.status().is_ok()) {
        FAIL_CHECK("round " << k << "." << s << " failed: " << h.status().message());
        ++failures;
        continue;
      }
      const size_t wrong = count_wrong(round.bufs[static_cast<size_t>(s)], k, s);
      if (wrong) FAIL_CHECK("round " << k << "." << s << ": " << wrong << " wrong elements");
    }
    // A normal use of the name right after: succeeds everywhere with this round's values.
    std::vector<float> after(5);
    for (size_t i = 0; i < after.size(); ++i) after[i] = value(k, 9, rank(), i);
    wait_ok(allreduce_async(TensorView::of(after), kName, {ReduceOp::kSum}));
    CHECK(count_wrong(after, k, 9) == 0);
    if (failures > 3) break;
  }
  if (rank() == 0) WARN("holder's late threads started " << extra_rounds << " matched extra rounds");
}

TEST_CASE("a resubmission while a big collective is in flight is refused and the round is intact", "[duplicates]") {
  // Single-threaded, as a training loop would misuse it: every rank but the last submits a
  // 16 MB tensor and resubmits its name three times while the last rank has not submitted
  // yet (so the first is certainly in flight); then the last rank submits.
  const size_t n = 1u << 22;
  const int last = size() - 1;
  for (int k = 0; k < 4; ++k) {
    std::vector<float> a(n), b(n, 1e6f);
    for (size_t i = 0; i < n; ++i) a[i] = value(k, 0, rank(), i);
    int32_t gate = 0;
    Handle first;
    if (rank() != last) {
      first = allreduce_async(TensorView::of(a), "dup.big", {ReduceOp::kSum});
      for (int t = 0; t < 3; ++t) {
        Handle again = allreduce_async(TensorView::of(b), "dup.big", {ReduceOp::kSum});
        REQUIRE(again.done());  // refused at once, not queued
        CHECK(again.status().message().find("submitted again on rank") != std::string::npos);
        std::this_thread::sleep_for(std::chrono::milliseconds(t));
      }
      CHECK_FALSE(first.done());
      allreduce(TensorView::of(&gate, {1}), "dup.big.gate", {ReduceOp::kSum});
    } else {
      allreduce(TensorView::of(&gate, {1}), "dup.big.gate", {ReduceOp::kSum});
      first = allreduce_async(TensorView::of(a), "dup.big", {ReduceOp::kSum});
    }
    wait_ok(first);
    CHECK(count_wrong(a, k, 0) == 0);
    std::vector<float> after(3);
    for (size_t i = 0; i < after.size(); ++i) after[i] = value(k, 1, rank(), i);
    wait_ok(allreduce_async(TensorView::of(after), "dup.big", {ReduceOp::kSum}));
    CHECK(count_wrong(after, k, 1) == 0);
  }
}
