// Disagreements across ranks fail the collective on EVERY rank, quickly, with a message that
// names the tensor, the ranks and the values; the runtime keeps working afterwards.
#include <chrono>
#include <cmath>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Ranks "0,2,3"-style list of every rank except `odd`.
std::string others(int odd) {
  std::string s;
  for (int r = 0; r < size(); ++r)
    if (r != odd) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}
std::string ranks_word() { return size() > 2 ? "ranks " : "rank "; }

void still_works(const std::string& name) {
  std::vector<float> v(10, 1.0f);
  wait_ok(allreduce_async(TensorView::of(v), name, {ReduceOp::kSum}));
  CHECK(v[3] == static_cast<float>(size()));
}

}  // namespace

TEST_CASE("shape mismatch fails on every rank within seconds", "[errors]") {
  std::vector<float> v(rank() == 1 ? 20 : 16, 1.0f);
  const Shape shape = rank() == 1 ? Shape{4, 5} : Shape{4, 4};
  auto t0 = std::chrono::steady_clock::now();
  Handle h = allreduce_async(TensorView::of(v.data(), shape), "err.shape", {ReduceOp::kSum});
  std::string msg = wait_error(h, 45);
  // A hang catcher, not a timing check: well under the stall inspector's 60 s, well over any
  // scheduling gap of a loaded CI machine.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK(msg == "allreduce \"err.shape\": shape [4,4] on " + ranks_word() + others(1) + " but [4,5] on rank 1");
  CHECK(h.status().code() == Status::Code::kMismatch);
  CHECK_THROWS_AS(synchronize(h), Error);
  still_works("err.after.shape");
}

TEST_CASE("dtype mismatch", "[errors]") {
  std::vector<double> d(8, 1.0);
  std::vector<float> f(8, 1.0f);
  Handle h = rank() == 0 ? allreduce_async(TensorView::of(d), "err.dtype") : allreduce_async(TensorView::of(f), "err.dtype");
  std::string msg = wait_error(h);
  CHECK(msg == "allreduce \"err.dtype\": dtype float64 on rank 0 but float32 on " + ranks_word() + others(0));
}

TEST_CASE("reduce op mismatch", "[errors]") {
  std::vector<float> f(8, 1.0f);
  Handle h = allreduce_async(TensorView::of(f), "err.op", {rank() == size() - 1 ? ReduceOp::kMax : ReduceOp::kSum});
  CHECK(wait_error(h) == "allreduce \"err.op\": reduce op sum on " + ranks_word() + others(size() - 1) +
                             " but max on rank " + std::to_string(size() - 1));
}

TEST_CASE("broadcast root mismatch", "[errors]") {
  std::vector<int32_t> v(3, 0);
  Handle h = broadcast_async(TensorView::of(v), rank() == 1 ? 1 : 0, "err.root");
  CHECK(wait_error(h) == "broadcast \"err.root\": root 0 on " + ranks_word() + others(1) + " but 1 on rank 1");
}

TEST_CASE("different collectives under one name", "[errors]") {
  std::vector<float> v(4, 0.0f);
  Handle h = rank() == 0 ? broadcast_async(TensorView::of(v), 0, "err.kind") : allreduce_async(TensorView::of(v), "err.kind");
  CHECK(wait_error(h) == "\"err.kind\": collective broadcast on rank 0 but allreduce on " + ranks_word() + others(0));
}

TEST_CASE("allgather with differing trailing dimensions", "[errors]") {
  std::vector<float> v(12, 0.0f);
  Handle h = allgather_async(TensorView::of(v.data(), rank() == 0 ? Shape{2, 6} : Shape{3, 4}), "err.gather");
  CHECK(wait_error(h) == "allgather \"err.gather\": shape beyond the first dimension [6] on rank 0 but [4] on " +
                             ranks_word() + others(0));
}

TEST_CASE("a name submitted again while in flight is refused there; the first goes on", "[errors]") {
  std::vector<float> a(4, 1.0f), b(4, 100.0f);
  // The others submit "err.dup" only after rank 1 has resubmitted it (the gate), so rank 1's
  // first is surely still in flight then; without the gate a fast run (ASan, MPI executor)
  // completed it first, and the "second" paired with the peers' next round.
  Handle first;
  if (rank() == 1) {
    first = allreduce_async(TensorView::of(a), "err.dup", {ReduceOp::kSum});
    Handle second = allreduce_async(TensorView::of(b), "err.dup", {ReduceOp::kSum});
    REQUIRE(second.done());  // at once, on this rank only
    CHECK(second.status().code() == Status::Code::kInvalidArgument);
    CHECK(second.status().message() ==
          "allreduce \"err.dup\": submitted again on rank 1 while a collective under this name is still in "
          "flight; this submission is refused and the one in flight goes on (a name may be reused once its "
          "handle has completed)");
    barrier("err.dup.gate");
  } else {
    barrier("err.dup.gate");
    first = allreduce_async(TensorView::of(a), "err.dup", {ReduceOp::kSum});
  }
  wait_ok(first);
  CHECK(a[0] == static_cast<float>(size()));
  CHECK(b[0] == 100.0f);  // the refused buffer is never touched
  still_works("err.dup");  // the name is free again
}

TEST_CASE("bad arguments fail at once, locally", "[errors]") {
  std::vector<float> v(4);
  CHECK_THROWS_WITH(allreduce(TensorView::of(v), ""), "allreduce: the tensor name is empty");
  CHECK_THROWS_WITH(allreduce(TensorView::of(v.data(), {2, -2}), "neg"),
                    "allreduce \"neg\": shape [2,-2] has a negative dimension");
  CHECK_THROWS_WITH(broadcast(TensorView{nullptr, DType::kFloat32, {3}}, 0, "null"),
                    "broadcast \"null\": data pointer is null");
  // Scale factors must be finite, whichever executor would run the collective.
  const double nan = std::nan("");
  CHECK_THROWS_WITH(allreduce(TensorView::of(v), "nan", {ReduceOp::kSum, nan}),
                    "allreduce \"nan\": scale factors must be finite (prescale nan, postscale 1.000000)");
  CHECK_THROWS_WITH(allreduce(TensorView::of(v), "inf", {ReduceOp::kSum, 1.0, HUGE_VAL}),
                    "allreduce \"inf\": scale factors must be finite (prescale 1.000000, postscale inf)");
  // A root that is not a rank is this rank's mistake, not a disagreement between ranks.
  CHECK_THROWS_WITH(broadcast(TensorView::of(v), size(), "root.high"),
                    "broadcast \"root.high\": root " + std::to_string(size()) + " is not a rank (ranks are 0.." +
                        std::to_string(size() - 1) + ")");
  CHECK_THROWS_WITH(broadcast(TensorView::of(v), -1, "root.low"),
                    "broadcast \"root.low\": root -1 is not a rank (ranks are 0.." + std::to_string(size() - 1) + ")");
  // gathered() belongs to allgather handles; asking an allreduce for it is misuse.
  Handle h = allreduce_async(TensorView::of(v), "not.gather", {ReduceOp::kSum});
  CHECK_THROWS_WITH(h.gathered(), "kolo::Handle::gathered() on \"not.gather\": only allgather handles hold a "
                                  "gathered tensor; this one is allreduce");
  wait_ok(h);
}
