// Whole-job scenarios that end the runtime, each run as its own mpirun by CTest, which
// checks the output: kolo-test-scenario <name>.
//   bad-env           a malformed KOLO_* value stops init() with a clear message
//   shutdown-pending  rank 1 shuts down while rank 0 waits on a tensor only it submitted
//   stall-shutdown    ranks submit different names; KOLO_STALL_SHUTDOWN_TIME_SECONDS ends it
//   *-board           shutdown-pending and stall-shutdown with names every rank ran twice
//                     before: on one host the waiting tensor sits on the fast path's board
//   set-stall         np 3, KOLO_PROCESS_SETS=1,2: rank 1 submits on the set, rank 2 never
//                     does (ranks 0 and 2 wait on a global name rank 1 never submits, a
//                     second later); the stall shutdown names the set and the missing rank
//   exception         rank 1 dies of an uncaught exception while rank 0 waits on it
//   sigterm           rank 1 receives SIGTERM while rank 0 waits on it
//   sigkill           rank 1 is killed (SIGKILL) mid-run; the job must end, naming it
//   train-loop        steps of 8 x 256 KiB allreduces for KOLOTEST_LOOP_SECONDS (default 15),
//                     each rank printing its host and progress; ends LOOP-DONE, or
//                     LOOP-FAILED naming kolo's error (faults between hosts, test/hosts)
//   autotune          300 steps of 20 tensors with KOLO_AUTOTUNE=1: results stay exact while
//                     the settings switch, and the KOLO_AUTOTUNE_LOG CSV is complete
//   coordinator-fault with KOLO_TEST_FAULT_RANK=f: rank f's coordinator stops on an injected
//                     internal error while every rank waits on "kolo.test.fault"; every rank's
//                     handle, and a later one, must fail within 15 s naming rank f and the
//                     cause (FAULT-OK, or FAULT-WRONG saying what)
//   shutdown-race     threads submit while the main thread calls kolo::shutdown(), and on
//                     until a submission is refused: each handle completes (exact, or failed
//                     "shut down"), nothing hangs or crashes; one more thread queries
//                     rank()/size()/local_rank()/process_sets() through it (right answers, then
//                     "shut down"), and one adds a process set, runs an allreduce on it and
//                     removes it, over and over (each call completes, or fails "shut down")
//                     (RACE-OK, or RACE-WRONG saying what)
//   shutdown-waiters  three threads per rank wait on collectives only their rank submitted
//                     (two in one wait_for(30 s), which helps with passes, one polling
//                     wait_for(5 ms)) while the main thread runs 100 allreduces, then shuts
//                     down: every wait returns within 10 s, its handle failed "shut down"
//                     (WAITERS-OK, or WAITERS-WRONG saying what)
//   user-mpi-single   the program calls MPI_Init itself (MPI_THREAD_SINGLE), then kolo::init:
//                     refused with a message naming the level and the fix (USER-MPI-REFUSED)
//   user-mpi-multiple the program calls MPI_Init_thread(MPI_THREAD_MULTIPLE) itself: kolo
//                     runs on it, and leaves MPI for the program to finalise (USER-MPI-OK)
//   user-mpi-serialized the program calls MPI_Init_thread(MPI_THREAD_SERIALIZED) itself: kolo
//                     runs on it, and a process set is made on the coordinator thread (no
//                     helper thread at this level, ops/mpi_set_comms.h); exact results on the
//                     set and the global set; rank 0 alone prints USER-MPI-SERIALIZED-OK
//   misuse            the runtime's life cycle used wrongly: collectives before init() and
//                     after shutdown(), init() and shutdown() twice, init() after shutdown(),
//                     a handle of the finished runtime waited on twice; each a clear error or
//                     a no-op, never a hang or a crash (MISUSE-OK, or MISUSE-WRONG naming it)
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <algorithm>
#include <vector>

#include "kolo/kolo.h"

namespace {

int report_failure(const kolo::Handle& h, const char* label) {
  if (!h.wait_for(std::chrono::seconds(30))) {
    std::printf("rank %d: %s: still waiting after 30 s\n", kolo::rank(), label);
    return 1;
  }
  const kolo::Status& s = h.status();
  std::printf("rank %d: %s: %s\n", kolo::rank(), label, s.is_ok() ? "UNEXPECTED SUCCESS" : s.message().c_str());
  return s.is_ok() ? 1 : 0;
}

int autotune_steps() {
  const int tensors = 20;
  std::vector<std::vector<float>> grads(tensors);
  for (int step = 0; step < 300; ++step) {
    std::vector<kolo::Handle> hs;
    for (int t = 0; t < tensors; ++t) {
      grads[t].assign(static_cast<size_t>(1000 + 5000 * t), static_cast<float>(kolo::rank() + step % 3));
      hs.push_back(kolo::allreduce_async(kolo::TensorView::of(grads[t]), "g" + std::to_string(t),
                                         {kolo::ReduceOp::kSum}));
    }
    const float want = static_cast<float>(kolo::size() * (kolo::size() - 1) / 2 + kolo::size() * (step % 3));
    for (int t = 0; t < tensors; ++t) {
      kolo::synchronize(hs[static_cast<size_t>(t)]);
      for (float x : grads[static_cast<size_t>(t)])
        if (x != want) {
          std::printf("rank %d: WRONG at step %d tensor %d: %f != %f\n", kolo::rank(), step, t, x, want);
          return 1;
        }
    }
  }
  if (kolo::rank() == 0) {
    const char* path = std::getenv("KOLO_AUTOTUNE_LOG");
    FILE* f = path ? std::fopen(path, "r") : nullptr;
    int rows = 0, best = 0;
    char line[512];
    while (f && std::fgets(line, sizeof line, f)) {
      ++rows;
      best += std::strstr(line, ",1\n") != nullptr;
    }
    if (f) std::fclose(f);
    std::printf("AUTOTUNE-LOG rows=%d best=%d\n", rows, best);
  }
  return 0;
}

// Gradient-like traffic until the deadline; every wait bounded (a hang would be a failure).
int train_loop() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const char* secs = std::getenv("KOLOTEST_LOOP_SECONDS");
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::seconds(secs ? std::atoi(secs) : 15);
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<std::vector<float>> grads(8, std::vector<float>(64 * 1024));
  auto last_report = start;
  long step = 0;
  // Every rank runs the same number of steps: rank 0's clock decides when to stop.
  for (int32_t go = 1; go != 0; ++step) {
    std::vector<kolo::Handle> hs;
    for (size_t t = 0; t < grads.size(); ++t) {
      std::fill(grads[t].begin(), grads[t].end(), 1.0f);
      hs.push_back(kolo::allreduce_async(kolo::TensorView::of(grads[t]), "g" + std::to_string(t), {kolo::ReduceOp::kSum}));
    }
    go = kolo::rank() == 0 && std::chrono::steady_clock::now() < end ? 1 : 0;
    hs.push_back(kolo::broadcast_async(kolo::TensorView::of(&go, {1}), 0, "go"));
    for (auto& h : hs) {
      if (!h.wait_for(std::chrono::seconds(60))) {
        std::printf("rank %d on %s: LOOP-HUNG at step %ld: no result after 60 s\n", kolo::rank(), host, step);
        std::fflush(stdout);
        return 1;
      }
      if (!h.status().is_ok()) {
        std::printf("rank %d on %s: LOOP-FAILED after %.1f s at step %ld: %s\n", kolo::rank(), host, elapsed(), step,
                    h.status().message().c_str());
        std::fflush(stdout);
        return 1;
      }
    }
    if (grads[0][0] != static_cast<float>(kolo::size())) {
      std::printf("rank %d on %s: WRONG at step %ld\n", kolo::rank(), host, step);
      return 1;
    }
    if (std::chrono::steady_clock::now() - last_report > std::chrono::seconds(1)) {
      last_report = std::chrono::steady_clock::now();
      std::printf("rank %d on %s: step %ld at %.1f s\n", kolo::rank(), host, step, elapsed());
      std::fflush(stdout);
    }
  }
  std::printf("rank %d on %s: LOOP-DONE steps=%ld in %.1f s\n", kolo::rank(), host, step, elapsed());
  std::fflush(stdout);
  return 0;
}

// `what` must throw kolo::Error whose message contains `want`; counts what went wrong.
template <class F>
void expect_error(const char* what, const std::string& want, F&& f, int* wrong) {
  try {
    f();
    std::printf("MISUSE-WRONG: %s: no kolo::Error\n", what);
  } catch (const kolo::Error& e) {
    if (std::string(e.what()).find(want) != std::string::npos) return;
    std::printf("MISUSE-WRONG: %s: \"%s\" lacks \"%s\"\n", what, e.what(), want.c_str());
  } catch (...) {
    std::printf("MISUSE-WRONG: %s: not a kolo::Error\n", what);
  }
  ++*wrong;
}

int misuse(int* argc, char*** argv) {
  int wrong = 0;
  std::vector<float> v(4, 1.0f);
  const std::string not_init = "kolo is not initialised: call kolo::init() first";
  // Before init: every call that needs the runtime says so; nothing hangs.
  expect_error("allreduce before init", not_init, [&] { kolo::allreduce(kolo::TensorView::of(v), "early"); }, &wrong);
  expect_error("rank before init", not_init, [] { (void)kolo::rank(); }, &wrong);
  expect_error("join before init", not_init, [] { (void)kolo::join(); }, &wrong);
  expect_error("add_process_set before init", not_init, [] { (void)kolo::add_process_set({0}); }, &wrong);
  kolo::init(argc, argv);
  kolo::init(argc, argv);  // a second init is a no-op
  const int rank = kolo::rank();
  kolo::allreduce(kolo::TensorView::of(v), "works", {kolo::ReduceOp::kSum});
  if (v[0] != static_cast<float>(kolo::size())) ++wrong, std::printf("MISUSE-WRONG: allreduce after init twice\n");
  kolo::Handle done = kolo::allreduce_async(kolo::TensorView::of(v), "done");
  kolo::synchronize(done);
  kolo::synchronize(done);  // waiting twice on a completed handle returns again
  const kolo::ProcessSet set = kolo::add_process_set({0});
  kolo::remove_process_set(set);
  expect_error("remove a removed set", "registered", [&] { kolo::remove_process_set(set); }, &wrong);
  // A collective still pending at shutdown fails (the peers never submit it).
  kolo::Handle pending = kolo::allreduce_async(kolo::TensorView::of(v), "pending." + std::to_string(rank));
  kolo::barrier("misuse.before-shutdown");
  kolo::shutdown();
  kolo::shutdown();  // a second shutdown is a no-op
  for (int i = 0; i < 2; ++i)
    expect_error("pending handle at shutdown", "shut down", [&] { kolo::synchronize(pending); }, &wrong);
  kolo::synchronize(done);  // a completed handle outlives the runtime
  expect_error("allreduce after shutdown", "shut down", [&] { kolo::allreduce(kolo::TensorView::of(v), "late"); },
               &wrong);
  expect_error("broadcast after shutdown", "shut down", [&] { kolo::broadcast(kolo::TensorView::of(v), 0, "late.b"); },
               &wrong);
  expect_error("rank after shutdown", "shut down", [] { (void)kolo::rank(); }, &wrong);
  expect_error("init after shutdown", "MPI cannot be initialised twice", [&] { kolo::init(argc, argv); }, &wrong);
  std::printf("rank %d: %s\n", rank, wrong ? "MISUSE-WRONG" : "MISUSE-OK");
  return wrong ? 1 : 0;
}

// Waits up to 15 s on `h`; ok if it failed naming `want` (printed as FAULT-OK / FAULT-WRONG).
bool fault_seen(const kolo::Handle& h, const std::string& want, const char* what, int rank) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!h.wait_for(std::chrono::seconds(15))) {
    std::printf("rank %d: FAULT-WRONG: %s still pending after 15 s\n", rank, what);
    return false;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string& m = h.status().message();
  const bool ok = !h.status().is_ok() && m.find(want) != std::string::npos;
  std::printf("rank %d: %s: %s after %.2f s: %s\n", rank, ok ? "FAULT-OK" : "FAULT-WRONG", what, secs,
              h.status().is_ok() ? "succeeded" : m.c_str());
  return ok;
}

int coordinator_fault() {
  const char* f = std::getenv("KOLO_TEST_FAULT_RANK");
  const int rank = kolo::rank();
  const std::string want = "rank " + std::string(f ? f : "?") + " (pid ";
  const std::string cause = "stopped: its coordinator failed: internal error: injected fault";
  std::vector<float> v(1024, 1.0f);
  for (int i = 0; i < 3; ++i) kolo::allreduce(kolo::TensorView::of(v), "warm", {kolo::ReduceOp::kSum});
  kolo::Handle h = kolo::allreduce_async(kolo::TensorView::of(v), "kolo.test.fault");
  bool ok = fault_seen(h, want, "pending", rank);
  if (ok && h.status().message().find(cause) == std::string::npos) {
    std::printf("rank %d: FAULT-WRONG: the message lacks \"%s\"\n", rank, cause.c_str());
    ok = false;
  }
  ok = fault_seen(kolo::allreduce_async(kolo::TensorView::of(v), "after"), want, "later", rank) && ok;
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// Four threads submit allreduces (names of their own) while the main thread shuts down.
int shutdown_race() {
  const int rank = kolo::rank();
  std::atomic<int> wrong{0}, done{0}, refused{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> v(64);
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 100000; ++i) {
        std::fill(v.begin(), v.end(), 1.0f);
        kolo::Handle h = kolo::allreduce_async(kolo::TensorView::of(v), "race." + std::to_string(t),
                                               {kolo::ReduceOp::kSum});
        if (!h.wait_for(std::chrono::seconds(20))) {
          std::printf("rank %d: RACE-WRONG: thread %d: a handle still pending after 20 s\n", rank, t);
          ++wrong;
          return;
        }
        if (h.status().is_ok()) {
          ++done;
          continue;
        }
        if (h.status().message().find("shut down") == std::string::npos) {
          std::printf("rank %d: RACE-WRONG: thread %d: %s\n", rank, t, h.status().message().c_str());
          ++wrong;
        }
        // Pending ones fail as the runtime goes; the thread submits on through the teardown
        // until a submission itself is refused.
        if (h.status().message().find("kolo::shutdown() was called") != std::string::npos) {
          ++refused;
          return;
        }
      }
    });
  // And a thread asking for the topology through the teardown: the right answer, or the
  // shutdown message once it has begun (under ASan a read of the freed runtime would report).
  std::atomic<long> queries{0};
  threads.emplace_back([&] {
    while (!go.load()) std::this_thread::yield();
    for (;;) {
      try {
        if (kolo::rank() != rank || kolo::size() < 1 || kolo::local_rank() < 0 || kolo::process_sets().empty()) {
          std::printf("rank %d: RACE-WRONG: a topology query answered wrong\n", rank);
          ++wrong;
          return;
        }
        ++queries;
        std::this_thread::yield();  // leave the submitters some CPU
      } catch (const kolo::Error& e) {
        if (std::string(e.what()).find("shut down") == std::string::npos) {
          std::printf("rank %d: RACE-WRONG: topology query: %s\n", rank, e.what());
          ++wrong;
        }
        return;
      }
    }
  });
  // And a thread making a process set of ranks {0, last}, running one allreduce on it and
  // removing it, over and over through the teardown: each call completes or fails "shut
  // down" (under ASan a touch of the freed registry would report; finding 20).
  std::atomic<int> sets{0};
  threads.emplace_back([&] {
    const int size = kolo::size();
    const std::vector<int> members{0, size - 1};
    const bool member = rank == 0 || rank == size - 1;
    while (!go.load()) std::this_thread::yield();
    for (;;) {
      try {
        const kolo::ProcessSet set = kolo::add_process_set(members);
        if (member) {
          float x = 1.0f;
          kolo::allreduce(kolo::TensorView::of(&x, {1}), "race.set",
                          kolo::AllreduceOptions{kolo::ReduceOp::kSum, 1.0, 1.0, set});
          if (x != 2.0f) {
            std::printf("rank %d: RACE-WRONG: the allreduce on set %d gave %g\n", rank, set.id(), x);
            ++wrong;
            return;
          }
        }
        if (kolo::process_sets().size() < 2) {
          std::printf("rank %d: RACE-WRONG: process_sets() lacks set %d\n", rank, set.id());
          ++wrong;
          return;
        }
        kolo::remove_process_set(set);
        ++sets;
      } catch (const kolo::Error& e) {
        if (std::string(e.what()).find("shut down") == std::string::npos) {
          std::printf("rank %d: RACE-WRONG: process set: %s\n", rank, e.what());
          ++wrong;
        }
        return;
      }
    }
  });
  go = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kolo::shutdown();
  for (auto& th : threads) th.join();
  std::printf("rank %d: %s (%d completed, %d threads refused, %ld topology queries, %d sets made and removed)\n",
              rank, wrong ? "RACE-WRONG" : "RACE-OK", done.load(), refused.load(), queries.load(), sets.load());
  return wrong ? 1 : 0;
}

// Threads waiting with wait_for (helping, and polling) while the main thread shuts down.
int shutdown_waiters() {
  using Clock = std::chrono::steady_clock;
  const int rank = kolo::rank();
  std::vector<float> lonely(3 * 8, 1.0f), busy(256, 1.0f);
  std::atomic<int> wrong{0};
  std::atomic<int64_t> last_return_ns{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      const std::string name = "waiter." + std::to_string(rank) + "." + std::to_string(t);
      kolo::Handle h = kolo::allreduce_async(kolo::TensorView::of(lonely.data() + 8 * t, {8}), name);
      const auto start = Clock::now();
      bool done = false;
      if (t < 2) {
        done = h.wait_for(std::chrono::seconds(30));
      } else {
        while (!done && Clock::now() - start < std::chrono::seconds(30)) done = h.wait_for(std::chrono::milliseconds(5));
      }
      const int64_t at = Clock::now().time_since_epoch().count();
      int64_t seen = last_return_ns.load();
      while (at > seen && !last_return_ns.compare_exchange_weak(seen, at)) {
      }
      if (!done) {
        std::printf("rank %d: WAITERS-WRONG: thread %d still waiting after 30 s\n", rank, t);
        ++wrong;
      } else if (h.status().is_ok() || h.status().message().find("shut down") == std::string::npos) {
        std::printf("rank %d: WAITERS-WRONG: thread %d: %s\n", rank, t,
                    h.status().is_ok() ? "succeeded" : h.status().message().c_str());
        ++wrong;
      }
    });
  for (int i = 0; i < 100; ++i) kolo::allreduce(kolo::TensorView::of(busy), "busy", {kolo::ReduceOp::kSum});
  const auto shutdown_at = Clock::now();
  kolo::shutdown();
  const double shutdown_s = std::chrono::duration<double>(Clock::now() - shutdown_at).count();
  for (auto& th : threads) th.join();
  const double last_s =
      std::chrono::duration<double>(Clock::time_point(Clock::duration(last_return_ns.load())) - shutdown_at).count();
  if (last_s > 10.0) {
    std::printf("rank %d: WAITERS-WRONG: the last wait returned %.2f s after shutdown began\n", rank, last_s);
    ++wrong;
  }
  std::printf("rank %d: %s (shutdown %.2f s, last wait returned %.2f s after it began)\n", rank,
              wrong ? "WAITERS-WRONG" : "WAITERS-OK", shutdown_s, last_s);
  std::fflush(stdout);
  return wrong ? 1 : 0;
}

}  // namespace

// The program owns MPI: kolo must check the thread level it was given.
int user_mpi(int* argc, char*** argv, bool multiple) {
  int provided = 0;
  if (multiple) MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Init(argc, argv);
  int rank = 0, rc = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    kolo::init(argc, argv);
    std::vector<float> v(1000, 1.0f);
    kolo::allreduce(kolo::TensorView::of(v), "user-mpi", {kolo::ReduceOp::kSum});
    const bool exact = v[0] == static_cast<float>(kolo::size()) && v[999] == static_cast<float>(kolo::size());
    kolo::shutdown();
    // MPI is still the program's: one more collective of its own, then its MPI_Finalize.
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    std::printf("rank %d: %s\n", rank, multiple && exact && sum > 1 ? "USER-MPI-OK" : "USER-MPI-WRONG");
    rc = multiple && exact ? 0 : 1;
  } catch (const kolo::Error& e) {
    std::printf("rank %d: %s: %s\n", rank, multiple ? "USER-MPI-WRONG" : "USER-MPI-REFUSED", e.what());
    rc = multiple ? 1 : 0;
  }
  MPI_Finalize();
  return rc;
}

int user_mpi_serialized(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, ok = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string why = "provided thread level " + std::to_string(provided);
  try {
    kolo::init(argc, argv);
    std::vector<int> everyone(static_cast<size_t>(kolo::size()));
    for (int r = 0; r < kolo::size(); ++r) everyone[static_cast<size_t>(r)] = r;
    const kolo::ProcessSet set = kolo::add_process_set(everyone);
    std::vector<float> v(1000, 1.0f), w(10, 2.0f);
    kolo::allreduce(kolo::TensorView::of(v), "user-mpi-set", {kolo::ReduceOp::kSum, 1.0, 1.0, set});
    kolo::allreduce(kolo::TensorView::of(w), "user-mpi-global", {kolo::ReduceOp::kSum});
    const float n = static_cast<float>(kolo::size());
    ok = provided == MPI_THREAD_SERIALIZED && v[0] == n && v[999] == n && w[9] == 2 * n ? 1 : 0;
    why = "v[0]=" + std::to_string(v[0]) + " w[9]=" + std::to_string(w[9]);
    kolo::shutdown();
  } catch (const kolo::Error& e) {
    why = e.what();
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok) std::printf("rank %d: USER-MPI-SERIALIZED-WRONG: %s\n", rank, why.c_str());
  if (rank == 0 && all == 1) std::printf("USER-MPI-SERIALIZED-OK\n");
  std::fflush(stdout);
  MPI_Finalize();
  return all == 1 ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  if (which == "user-mpi-serialized") return user_mpi_serialized(&argc, &argv);
  if (which == "misuse") return misuse(&argc, &argv);
  if (which == "user-mpi-single" || which == "user-mpi-multiple") return user_mpi(&argc, &argv, which == "user-mpi-multiple");
  try {
    kolo::init(&argc, &argv);
  } catch (const kolo::Error& e) {
    std::printf("init refused: %s\n", e.what());
    return which == "bad-env" ? 0 : 1;
  }
  int rc = 1;
  std::vector<float> v(16, 1.0f);
  if (which == "shutdown-pending-board" || which == "stall-shutdown-board") {
    // Negotiated twice through rank 0 and cached: the next submission goes to the board.
    for (const char* name : {"orphan", "lonely", "elsewhere"})
      for (int i = 0; i < 2; ++i) kolo::allreduce(kolo::TensorView::of(v), name, {kolo::ReduceOp::kSum});
  }
  if (which == "shutdown-pending" || which == "shutdown-pending-board") {
    if (kolo::rank() == 0) {
      rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), "orphan"), "PENDING-FAILED");
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      rc = 0;
    }
    if (kolo::rank() == 1) kolo::shutdown();
  } else if (which == "stall-shutdown" || which == "stall-shutdown-board") {
    const std::string name = kolo::rank() == 0 ? "lonely" : "elsewhere";
    rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), name), "STALL-FAILED");
  } else if (which == "set-stall") {
    const auto sets = kolo::process_sets();
    if (kolo::rank() == 1) {
      rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), "lonely",
                                                {kolo::ReduceOp::kSum, 1.0, 1.0, sets.at(1)}),
                          "SET-STALL-FAILED");
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), "elsewhere"), "SET-STALL-FAILED");
    }
  } else if (which == "exception" || which == "sigterm" || which == "sigkill") {
    if (kolo::rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (which == "exception") throw std::runtime_error("boom");
      std::raise(which == "sigterm" ? SIGTERM : SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(20));  // "computing" until the signal ends us
      return 1;
    }
    rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), "waits-for-rank-1"), "PEER-LOST");
  } else if (which == "coordinator-fault") {
    rc = coordinator_fault();
  } else if (which == "shutdown-race") {
    rc = shutdown_race();
  } else if (which == "shutdown-waiters") {
    rc = shutdown_waiters();
  } else if (which == "train-loop") {
    rc = train_loop();
  } else if (which == "autotune") {
    rc = autotune_steps();
  } else {
    std::printf("unknown scenario '%s'\n", which.c_str());
  }
  kolo::shutdown();
  return rc;
}
