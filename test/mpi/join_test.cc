// kolo::join() for uneven data: ranks run out of data at different steps; the ranks still
// training get exact results over the ranks that contributed; join() returns the last rank.
#include <mpi.h>

#include <algorithm>
#include <thread>

#include "mpi_signal.h"
#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

// Rank r trains this many steps in round `round`: all different, so the rank with the most
// steps is the last to join, and each rank is last in one round.
int steps_of(int r, int round) { return (r + round) % size() + 1; }
int last_of(int round) {
  int best = 0;
  for (int r = 1; r < size(); ++r)
    if (steps_of(r, round) > steps_of(best, round)) best = r;
  return best;
}

struct Case {
  DType dtype;
  ReduceOp op;
  double prescale, postscale;
  size_t n;
  std::string name;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType t : all_dtypes())
    for (ReduceOp op : all_reduce_ops())
      for (auto [pre, post] : {std::pair{1.0, 1.0}, std::pair{2.0, 0.5}})
        for (size_t n : {size_t{1}, size_t{37}, size_t{3000}}) {
          // With joined ranks a prescale is refused for min/max/product (core/negotiation.cc).
          if (pre != 1.0 && op != ReduceOp::kSum && op != ReduceOp::kAverage) continue;
          out.push_back({t, op, pre, post, n,
                         "join." + std::string(dtype_name(t)) + "." + std::string(reduce_op_name(op)) + "." +
                             std::to_string(static_cast<int>(pre)) + "." + std::to_string(n)});
        }
  return out;
}

}  // namespace

TEST_CASE("join: allreduce over the ranks that still have data, every dtype and op", "[join]") {
  const std::vector<Case> all = cases();
  for (int round = 0; round < size(); ++round) {
    const int mine = steps_of(rank(), round);
    for (int step = 0; step < mine; ++step) {
      std::vector<int> contributors;
      for (int r = 0; r < size(); ++r)
        if (steps_of(r, round) > step) contributors.push_back(r);
      const uint64_t seed = static_cast<uint64_t>(round * 100 + step);
      std::vector<Buffer> bufs;
      std::vector<Handle> hs;
      bufs.reserve(all.size());
      for (const Case& c : all) {
        bufs.emplace_back(c.dtype, c.n);
        for (size_t i = 0; i < c.n; ++i) bufs.back().put(i, input_value(seed, rank(), i, c.dtype, c.op));
        hs.push_back(allreduce_async(bufs.back().view(), c.name, AllreduceOptions{c.op, c.prescale, c.postscale}));
      }
      size_t wrong = 0;
      std::string first_wrong;
      for (size_t k = 0; k < all.size(); ++k) {
        wait_ok(hs[k]);
        const Case& c = all[k];
        for (size_t i = 0; i < c.n; ++i) {
          const double want = expected_over(contributors, seed, i, c.dtype, c.op, c.prescale, c.postscale);
          if (std::abs(bufs[k].at(i) - want) > tolerance(c.dtype, want)) {
            if (wrong++ == 0)
              first_wrong = c.name + "[" + std::to_string(i) + "] = " + std::to_string(bufs[k].at(i)) +
                            ", expected " + std::to_string(want);
          }
        }
      }
      INFO("round " << round << " step " << step << " contributors " << contributors.size() << ": " << first_wrong);
      CHECK(wrong == 0);
    }
    CHECK(join() == last_of(round));
  }
  // Out of the joined state: an ordinary allreduce over every rank.
  int32_t v = rank() + 1;
  allreduce(TensorView::of(&v, {1}), "join.after", AllreduceOptions{ReduceOp::kSum});
  CHECK(v == size() * (size() + 1) / 2);
}

TEST_CASE("join: allgather gets no rows from joined ranks; broadcast reaches them", "[join]") {
  for (int round = 0; round < size(); ++round) {
    const int mine = steps_of(rank(), round);
    const int root = last_of(round);  // never joined while others run
    for (int step = 0; step < mine; ++step) {
      auto rows_of = [&](int r) { return static_cast<int64_t>(r % 3 + 1); };
      Buffer g(DType::kInt32, static_cast<size_t>(rows_of(rank()) * 4));
      for (size_t i = 0; i < g.count(); ++i) g.put(i, input_value(step, rank(), i, DType::kInt32, ReduceOp::kMax));
      Handle hg = allgather_async(g.view({rows_of(rank()), 4}), "join.gather");
      Buffer b(DType::kFloat64, 100);
      for (size_t i = 0; i < 100; ++i) b.put(i, rank() == root ? input_value(step, root, i, DType::kFloat64, ReduceOp::kSum) : -1);
      Handle hb = broadcast_async(b.view(), root, "join.bcast");
      wait_ok(hg);
      wait_ok(hb);
      const Tensor& out = hg.gathered();
      int64_t rows = 0;
      for (int r = 0; r < size(); ++r)
        if (steps_of(r, round) > step) rows += rows_of(r);
      REQUIRE(out.shape == Shape{rows, 4});
      size_t at = 0, wrong = 0;
      for (int r = 0; r < size(); ++r) {
        if (steps_of(r, round) <= step) continue;
        for (size_t i = 0; i < static_cast<size_t>(rows_of(r) * 4); ++i, ++at)
          wrong += get(out.bytes.data(), DType::kInt32, at) != input_value(step, r, i, DType::kInt32, ReduceOp::kMax);
      }
      for (size_t i = 0; i < 100; ++i) wrong += b.at(i) != input_value(step, root, i, DType::kFloat64, ReduceOp::kSum);
      INFO("round " << round << " step " << step);
      CHECK(wrong == 0);
    }
    CHECK(join() == last_of(round));
  }
}

TEST_CASE("join: a broadcast whose root has joined fails on every rank; the runtime goes on", "[join]") {
  const int root = size() - 1;
  if (rank() == root) {
    CHECK(join() == 0);
  } else {
    std::vector<float> x(10, 1.0f);
    const std::string msg = wait_error(broadcast_async(TensorView::of(x), root, "join.bad-root"));
    CHECK_THAT(msg, Catch::Contains("join.bad-root") && Catch::Contains("root, rank " + std::to_string(root)) &&
                        Catch::Contains("has joined"));
    if (rank() == 0) {
      // Completes once every other rank has joined (they take part with zeros): rank 0 is last.
      int32_t v = 5;
      allreduce(TensorView::of(&v, {1}), "join.wait", AllreduceOptions{ReduceOp::kSum});
      CHECK(v == 5);
    }
    CHECK(join() == 0);
  }
  barrier("join.after-bad-root");
}

TEST_CASE("join: collectives submitted while this rank is in join() are refused", "[join]") {
  if (rank() == 0) {
    Handle joined = join_async();  // this rank is in join() from here until every rank joined
    std::vector<float> x(4, 1.0f);
    const std::string msg = wait_error(allreduce_async(TensorView::of(x), "join.during"));
    if (size() > 1) signal_rank(1);  // rank 1 ends the join only after this refusal
    const int last = joined.last_joined_rank();
    CHECK(last == (size() > 1 ? 1 : 0));
    CHECK_THAT(msg, Catch::Contains("join.during") && Catch::Contains("kolo::join()"));
  } else if (rank() == 1) {
    await_signal(0);
    // Completes once ranks 0, 2, 3... have joined: rank 1 is the last to join.
    double v = 1.5;
    allreduce(TensorView::of(&v, {1}), "join.wait2", AllreduceOptions{ReduceOp::kAverage});
    CHECK(v == 1.5);
    CHECK(join() == 1);
  } else {
    CHECK(join() == 1);
  }
  barrier("join.after-refused");
}

TEST_CASE("join: grouped allreduce waits only for ranks that have not joined; alltoall fails", "[join]") {
  const int joined = size() - 1;
  int last = -1;
  if (rank() == joined) {
    last = join();
  } else {
    std::vector<std::vector<int32_t>> t = {{rank() + 1}, {rank() + 1, 2 * (rank() + 1)}, {}};
    std::vector<TensorView> views;
    for (auto& v : t) views.push_back(TensorView::of(v.data(), Shape{static_cast<int64_t>(v.size())}));
    grouped_allreduce(views, "join.group", AllreduceOptions{ReduceOp::kSum});
    const int sum = (size() - 1) * size() / 2;  // ranks 0..size-2, each rank+1
    CHECK(t[0][0] == sum);
    CHECK(t[1] == std::vector<int32_t>{sum, 2 * sum});
    std::vector<float> rows(static_cast<size_t>(size()) * 2, 1.0f);
    const std::string msg =
        wait_error(alltoall_async(TensorView::of(rows.data(), Shape{size(), 2}), std::string("join.a2a")));
    CHECK_THAT(msg, Catch::Contains("join.a2a") && Catch::Contains("have joined"));
    last = join();
  }
  CHECK(last >= 0);
  CHECK(last < joined);
  barrier("join.after-group");
}

TEST_CASE("join_async: the handle completes once every rank joined; a second join meanwhile is refused", "[join]") {
  // The last rank joins only after the others have tried to join twice (an MPI barrier on
  // this thread orders it); they poll their handle meanwhile, as a binding that checks for
  // Ctrl-C does.
  const int late = size() - 1;
  Handle h;
  if (rank() != late) {
    h = join_async();
    CHECK_THROWS_WITH(join_async(), Catch::Contains("already in join()"));  // as the header says: at the call
    CHECK_THROWS_WITH(join(), Catch::Contains("already in join()"));
    CHECK_FALSE(h.done());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == late) h = join_async();
  while (!h.wait_for(std::chrono::milliseconds(50))) {
  }
  // The last rank as the coordinator saw the joins arrive (not necessarily `late`: a join
  // travels on its rank's next cycle): the same on every rank.
  const int last = h.last_joined_rank();
  int lo = 0, hi = 0;
  MPI_Allreduce(&last, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&last, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  CHECK((last >= 0 && last < size()));
  std::vector<float> x(4, 1.0f);
  Handle other = allreduce_async(TensorView::of(x), "join_async.after", AllreduceOptions{ReduceOp::kSum});
  CHECK_THROWS_WITH(other.last_joined_rank(), Catch::Contains("only the handle of kolo::join_async()"));
  wait_ok(other);
  CHECK(x[0] == static_cast<float>(size()));
  barrier("join_async.done");
}
