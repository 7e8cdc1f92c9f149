// A name reused after the cross-set error (docs/correctness.md, finding 23): rank 1 submits a
// name on the set {0,1} while every other rank submits it on the global set; the error must
// reach every rank, and the name submitted again by every rank must then run as one
// collective. Before the fix, rank 0 failed the global set's round before it had heard from
// the ranks outside the pair; their requests, still on the way, were counted later as a
// round of their own, so the reuse failed ("sent two requests for one round") or ran a round
// that some ranks had not submitted, which stopped the job.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Shifts this rank's timing by a few milliseconds (never needed for correctness: the
// rounds below must pair whatever the order in which the requests reach rank 0).
void lag(bool on) {
  if (on) std::this_thread::sleep_for(std::chrono::milliseconds(25));
}

}  // namespace

TEST_CASE("cross-set conflict: every rank fails the round, and the name reused afterwards runs on every rank",
          "[cross-set-reuse]") {
  if (size() < 3) return;  // needs ranks outside the pair
  const ProcessSet pair = add_process_set({0, 1});
  const int n = size();
  constexpr int kRounds = 16;
  for (int round = 0; round < kRounds; ++round) {
    // Fresh names first, then one name again and again: cached, so the ranks outside the
    // pair hold it on the fast path's board (one host) and send response-cache ids.
    const std::string name = round < kRounds - 4 ? "xset." + std::to_string(round) : "xset.same";
    // 0: no lag; 1: the ranks outside the pair submit late; 2: they resubmit late; 3: rank 0 submits late.
    const int phase = round % 4;
    INFO("round " << round << ", name " << name << ", phase " << phase);
    std::vector<float> v(4, 1.0f);
    lag((phase == 1 && rank() >= 2) || (phase == 3 && rank() == 0));
    const Handle h = rank() == 1 ? allreduce_async(TensorView::of(v), name, {ReduceOp::kSum, 1, 1, pair})
                                 : allreduce_async(TensorView::of(v), name, {ReduceOp::kSum});
    const std::string e = wait_error(h, 45);
    CHECK_THAT(e, Catch::Contains("allreduce \"" + name + "\": submitted on"));
    CHECK(v == std::vector<float>(4, 1.0f));  // untouched
    lag(phase == 2 && rank() >= 2);
    std::vector<int32_t> x(3, rank() + 1);
    const Handle again = allreduce_async(TensorView::of(x), name, {ReduceOp::kSum});
    wait_ok(again, 45);
    CHECK(x == std::vector<int32_t>(3, n * (n + 1) / 2));
  }
  std::vector<int32_t> all(2, 1);
  allreduce(TensorView::of(all), "xset.after", {ReduceOp::kSum});
  CHECK(all == std::vector<int32_t>(2, n));
  remove_process_set(pair);
}

TEST_CASE("cross-set conflict: a rank outside the pair that submits only after the error still fails that round",
          "[cross-set-reuse]") {
  // The ranks outside the pair submit their first request for the name only once rank 0
  // has failed the round (a barrier on a second name orders it): that request belongs to the
  // failed round, so it fails at once, and the next round pairs everyone's second request.
  if (size() < 3) return;
  const ProcessSet pair = add_process_set({0, 1});
  const int n = size();
  for (int round = 0; round < 3; ++round) {
    const std::string name = "xset.late." + std::to_string(round);
    std::vector<float> v(4, 1.0f);
    if (rank() <= 1) {
      const Handle h = rank() == 1 ? allreduce_async(TensorView::of(v), name, {ReduceOp::kSum, 1, 1, pair})
                                   : allreduce_async(TensorView::of(v), name, {ReduceOp::kSum});
      CHECK_THAT(wait_error(h, 45), Catch::Contains("submitted on"));
    }
    barrier(name + ".failed");
    if (rank() >= 2)
      CHECK_THAT(wait_error(allreduce_async(TensorView::of(v), name, {ReduceOp::kSum}), 45),
                 Catch::Contains("submitted on"));
    std::vector<int32_t> x(3, rank() + 1);
    wait_ok(allreduce_async(TensorView::of(x), name, {ReduceOp::kSum}), 45);
    CHECK(x == std::vector<int32_t>(3, n * (n + 1) / 2));
  }
  remove_process_set(pair);
}
