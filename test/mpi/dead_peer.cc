// One rank dies (SIGKILL) or is stopped for a while; what the others see. Run under
// `mpirun --enable-recovery` (the job is not torn down) by test/mpi/dead_peer_driver.py,
// which checks the output: kolo-test-dead-peer <case> <victim rank>.
//   between  the victim dies between collectives; the others have one allreduce pending
//   inside   every rank runs 64 MB allreduces back to back; the victim dies once its own
//            buffer shows the collective under way (first element reduced, last not yet)
//   slow     rank 0 (or 1) stops the victim with SIGSTOP for 2.5 s, then SIGCONT; every
//            collective must succeed (a stopped rank is slow, not dead)
//   busy     the victim's coordinator stays out of every wait for 2.5x KOLO_PEER_TIMEOUT_SECONDS
//            before its collective (KOLO_TEST_STALL_SECONDS, set here on the victim only):
//            its heartbeat thread must keep it alive; the collective must succeed
//   set-setup a process set of every rank; the victim dies as its first collective on the set
//            begins (KOLO_TEST_DIE_IN_SET_SETUP, set here on the victim only), after its request
//            reached rank 0: the others must not wait for it in MPI_Comm_create_group forever
//   set-created as set-setup, but the victim dies right after the members' meeting, before its
//            own MPI_Comm_create_group (KOLO_TEST_DIE_IN_SET_SETUP=2): the others, already
//            inside the communicators' creation, must still name it (ops/mpi_set_comms.h)
//   stopped  rank 0 (or 1) stops the victim with SIGSTOP and leaves it stopped: a stopped
//            rank on another host is indistinguishable from a dead one, so the others must
//            fail naming it within the bound; the stopper then kills it (SIGKILL)
// Lines: "PID rank R pid P", "VICTIM rank R t=<s>", "SURVIVOR rank R t=<s> pending|later:
// <message>", "SLOW-OK rank R", all times CLOCK_MONOTONIC (one clock for the whole host).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "test/dead_peer_util.h"

namespace {

using kolo::test::die;
using kolo::test::now_s;

// A survivor's handle must fail (not hang: the driver's 10 s bound is checked against t).
int report(const kolo::Handle& h, const char* label) {
  if (!h.wait_for(std::chrono::seconds(30))) {
    std::printf("SURVIVOR rank %d HUNG %s\n", kolo::rank(), label);
    return 1;
  }
  const double t = now_s();
  const kolo::Status& s = h.status();
  std::printf("SURVIVOR rank %d t=%.6f %s: %s\n", kolo::rank(), t, label,
              s.is_ok() ? "UNEXPECTED SUCCESS" : s.message().c_str());
  std::fflush(stdout);
  return s.is_ok() ? 1 : 0;
}

int between(int victim) {
  std::vector<float> v(1024, 1.0f);
  kolo::allreduce(kolo::TensorView::of(v), "warm-up");
  if (kolo::rank() == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    die();
  }
  int rc = report(kolo::allreduce_async(kolo::TensorView::of(v), "pending"), "pending");
  rc |= report(kolo::allreduce_async(kolo::TensorView::of(v), "later"), "later");
  return rc;
}

int inside(int victim, size_t megabytes) {
  const size_t n = megabytes << 18;  // floats
  // Never freed: the victim's detached killer thread reads it until the process dies.
  static std::vector<float>& v = *new std::vector<float>(n);
  const float mine = static_cast<float>(kolo::rank() + 1);
  static std::atomic<bool> armed{false};
  std::thread killer;
  if (kolo::rank() == victim) {
    killer = std::thread([n, mine] {
      while (!armed.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      volatile float* first = v.data();
      volatile float* last = v.data() + n - 1;
      while (*first == mine) std::this_thread::sleep_for(std::chrono::microseconds(200));  // no spinning: 2 cores
      const bool under_way = *last == mine;
      std::printf("VICTIM rank %d dies %s\n", kolo::rank(),
                  under_way ? "inside the collective" : "AFTER the collective (too late)");
      die();
    });
    killer.detach();
  }
  for (int step = 0; step < 1000; ++step) {
    std::fill(v.begin(), v.end(), mine);
    if (kolo::rank() == victim && step == 1) armed = true;
    kolo::Handle h = kolo::allreduce_async(kolo::TensorView::of(v), "big");
    if (!h.wait_for(std::chrono::seconds(30))) {
      std::printf("SURVIVOR rank %d HUNG pending\n", kolo::rank());
      return 1;
    }
    if (!h.status().is_ok()) {
      std::printf("SURVIVOR rank %d t=%.6f pending: %s\n", kolo::rank(), now_s(), h.status().message().c_str());
      return report(kolo::allreduce_async(kolo::TensorView::of(v), "later"), "later");
    }
  }
  std::printf("SURVIVOR rank %d never saw the victim die\n", kolo::rank());
  return 1;
}

int slow(int victim) {
  int32_t pid = static_cast<int32_t>(getpid());
  kolo::Tensor pids = kolo::allgather(kolo::TensorView::of(&pid, {1}), "pids");
  const int stopper = victim == 0 ? 1 : 0;
  std::vector<float> v(1 << 20, 1.0f);
  kolo::allreduce(kolo::TensorView::of(v), "before", {kolo::ReduceOp::kSum});
  // "during" negotiated twice before the stop: on one host the steps below agree on it
  // through the fast path's board, whose rounds must wait for a stopped peer too.
  for (int i = 0; i < 2; ++i) kolo::allreduce(kolo::TensorView::of(v), "during", {kolo::ReduceOp::kSum});
  if (kolo::rank() == stopper) {
    int32_t vpid = 0;
    std::memcpy(&vpid, pids.bytes.data() + 4 * static_cast<size_t>(victim), 4);
    kill(vpid, SIGSTOP);
    std::printf("STOPPED rank %d for 2.5 s\n", victim);
    std::fflush(stdout);
    std::thread([vpid] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      kill(vpid, SIGCONT);
    }).detach();
  }
  for (int step = 0; step < 5; ++step) {
    std::fill(v.begin(), v.end(), 1.0f);
    kolo::allreduce(kolo::TensorView::of(v), "during", {kolo::ReduceOp::kSum});  // throws if the victim is declared dead
    if (v[0] != static_cast<float>(kolo::size()) || v.back() != static_cast<float>(kolo::size())) {
      std::printf("rank %d: WRONG %f\n", kolo::rank(), v[0]);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("SLOW-OK rank %d\n", kolo::rank());
  return 0;
}

double peer_timeout() {
  const char* t = std::getenv("KOLO_PEER_TIMEOUT_SECONDS");
  return t != nullptr ? std::atof(t) : 5.0;
}

// Before kolo::init (the knob is read there): the victim's coordinator will stall.
void arm_stall(int victim) {
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (r == nullptr || std::atoi(r) != victim) return;
  const std::string stall = std::to_string(2.5 * peer_timeout());
  setenv("KOLO_TEST_STALL_SECONDS", stall.c_str(), 1);
}

int busy() {
  std::vector<float> v(1 << 16, 1.0f);
  const double t0 = now_s();
  kolo::allreduce(kolo::TensorView::of(v), "busy", {kolo::ReduceOp::kSum});  // throws if declared dead
  if (v[0] != static_cast<float>(kolo::size()) || v.back() != static_cast<float>(kolo::size())) {
    std::printf("rank %d: WRONG %f\n", kolo::rank(), v[0]);
    return 1;
  }
  std::printf("BUSY rank %d: the collective took %.1f s (timeout %.1f s)\n", kolo::rank(), now_s() - t0,
              peer_timeout());
  std::printf("SLOW-OK rank %d\n", kolo::rank());
  return 0;
}

// Before kolo::init (the knob is read there): the victim dies setting up its first set.
// `when`: "1" as the set's first collective begins, "2" after the members' meeting.
void arm_set_setup(int victim, const char* when) {
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (r != nullptr && std::atoi(r) == victim) setenv("KOLO_TEST_DIE_IN_SET_SETUP", when, 1);
}

int set_setup() {
  std::vector<float> v(1024, 1.0f);
  kolo::allreduce(kolo::TensorView::of(v), "warm-up");
  std::vector<int> everyone(static_cast<size_t>(kolo::size()));
  for (int r = 0; r < kolo::size(); ++r) everyone[static_cast<size_t>(r)] = r;
  const kolo::ProcessSet set = kolo::add_process_set(everyone);
  int rc = report(kolo::allreduce_async(kolo::TensorView::of(v), "pending", {kolo::ReduceOp::kSum, 1.0, 1.0, set}),
                  "pending");
  rc |= report(kolo::allreduce_async(kolo::TensorView::of(v), "later"), "later");
  return rc;
}

int stopped(int victim) {
  int32_t pid = static_cast<int32_t>(getpid());
  kolo::Tensor pids = kolo::allgather(kolo::TensorView::of(&pid, {1}), "pids");
  int32_t vpid = 0;
  std::memcpy(&vpid, pids.bytes.data() + 4 * static_cast<size_t>(victim), 4);
  const int stopper = victim == 0 ? 1 : 0;
  std::vector<float> v(1 << 16, 1.0f);
  kolo::allreduce(kolo::TensorView::of(v), "before");
  if (kolo::rank() == victim) {
    for (;;) pause();  // stopped here; killed by the stopper
  }
  if (kolo::rank() == stopper) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the victim is in pause()
    kill(vpid, SIGSTOP);
    std::printf("VICTIM rank %d t=%.6f (stopped, not continued)\n", victim, now_s());
    std::fflush(stdout);
  }
  int rc = report(kolo::allreduce_async(kolo::TensorView::of(v), "pending"), "pending");
  rc |= report(kolo::allreduce_async(kolo::TensorView::of(v), "later"), "later");
  if (kolo::rank() == stopper) kill(vpid, SIGKILL);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  const int victim = argc > 2 ? std::atoi(argv[2]) : 1;
  if (which == "busy") arm_stall(victim);
  if (which == "set-setup") arm_set_setup(victim, "1");
  if (which == "set-created") arm_set_setup(victim, "2");
  kolo::init(&argc, &argv);
  const int kolo_rank = kolo::rank();
  std::printf("PID rank %d pid %d\n", kolo_rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  int rc = 1;
  try {
    if (which == "between") rc = between(victim);
    else if (which == "inside") rc = inside(victim, 64);
    else if (which == "slow") rc = slow(victim);
    else if (which == "busy") rc = busy();
    else if (which == "stopped") rc = stopped(victim);
    else if (which == "set-setup" || which == "set-created") rc = set_setup();
    else std::printf("unknown case '%s'\n", which.c_str());
  } catch (const kolo::Error& e) {
    std::printf("rank %d: ERROR %s\n", kolo::rank(), e.what());
    rc = 1;
  }
  std::fflush(stdout);
  kolo::shutdown();
  std::printf("EXIT rank %d t=%.6f\n", kolo_rank, now_s());
  return rc;
}
