// Whole-job scenarios that end the runtime, each run as its own mpirun by CTest, which
// checks the output: kolo-test-scenario <name>.
//   bad-env           a malformed KOLO_* value stops init() with a clear message
//   shutdown-pending  rank 1 shuts down while rank 0 waits on a tensor only it submitted
//   stall-shutdown    ranks submit different names; KOLO_STALL_SHUTDOWN_TIME_SECONDS ends it
//   exception         rank 1 dies of an uncaught exception while rank 0 waits on it
//   sigterm           rank 1 receives SIGTERM while rank 0 waits on it
//   sigkill           rank 1 is killed (SIGKILL) mid-run; the job must end, naming it
//   autotune          300 steps of 20 tensors with KOLO_AUTOTUNE=1: results stay exact while
//                     the settings switch, and the KOLO_AUTOTUNE_LOG CSV is complete
#include <chrono>
#include <csignal>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
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

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  try {
    kolo::init(&argc, &argv);
  } catch (const kolo::Error& e) {
    std::printf("init refused: %s\n", e.what());
    return which == "bad-env" ? 0 : 1;
  }
  int rc = 1;
  std::vector<float> v(16, 1.0f);
  if (which == "shutdown-pending") {
    if (kolo::rank() == 0) {
      rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), "orphan"), "PENDING-FAILED");
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      rc = 0;
    }
    if (kolo::rank() == 1) kolo::shutdown();
  } else if (which == "stall-shutdown") {
    const std::string name = kolo::rank() == 0 ? "lonely" : "elsewhere";
    rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), name), "STALL-FAILED");
  } else if (which == "exception" || which == "sigterm" || which == "sigkill") {
    if (kolo::rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (which == "exception") throw std::runtime_error("boom");
      std::raise(which == "sigterm" ? SIGTERM : SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(20));  // "computing" until the signal ends us
      return 1;
    }
    rc = report_failure(kolo::allreduce_async(kolo::TensorView::of(v), "waits-for-rank-1"), "PEER-LOST");
  } else if (which == "autotune") {
    rc = autotune_steps();
  } else {
    std::printf("unknown scenario '%s'\n", which.c_str());
  }
  kolo::shutdown();
  return rc;
}
