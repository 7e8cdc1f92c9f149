// A KVStore in use on a thread while the main thread calls kolo::shutdown()
// (docs/correctness.md, finding 20): kolo-test-kvstore-shutdown-race <type>. Workers push and
// pull on a thread (servers serve on one); 300 ms in, the main thread shuts kolo down. Every
// call completes or fails with a shutdown message, nothing hangs or crashes (MPI is not used
// once finalized), a later call fails the same way, and destroying the store afterwards is
// quiet. Every rank prints KV-RACE-OK, or KV-RACE-WRONG saying what.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/kvstore.h"

namespace {

bool shut_down(const kolo::Error& e) { return std::string(e.what()).find("shut down") != std::string::npos; }

}  // namespace

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  const std::string type = argc > 1 ? argv[1] : "dist_sync";
  const int rank = kolo::rank();
  std::atomic<int> wrong{0};
  std::atomic<long> steps{0};
  auto kv = kolo::KVStore::create(type);
  const bool server = kv->is_server();
  std::vector<float> w(1000, 1.0f), g(1000, 0.5f);
  if (!server) kv->init(0, kolo::TensorView::of(w));
  auto judge = [&](const kolo::Error& e, const char* what) {
    if (shut_down(e)) return;
    std::printf("rank %d: KV-RACE-WRONG: %s: %s\n", rank, what, e.what());
    ++wrong;
  };
  std::thread user([&] {
    try {
      if (server) {
        kv->run_server();
        std::printf("rank %d: KV-RACE-WRONG: run_server returned, yet no worker closed\n", rank);
        ++wrong;
        return;
      }
      for (;; ++steps) {
        kv->push(0, kolo::TensorView::of(g));
        kv->pull(0, kolo::TensorView::of(w));
      }
    } catch (const kolo::Error& e) {
      judge(e, server ? "run_server" : "push/pull");
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kolo::shutdown();
  user.join();
  try {  // a later call
    if (server)
      kv->run_server();
    else
      kv->push(0, kolo::TensorView::of(g));  // a pull of "allreduce" reads this rank's copy alone
    std::printf("rank %d: KV-RACE-WRONG: a call after shutdown() succeeded\n", rank);
    ++wrong;
  } catch (const kolo::Error& e) {
    judge(e, "a call after shutdown()");
  }
  kv.reset();
  std::printf("rank %d: %s (%s, %ld steps before the shutdown)\n", rank, wrong ? "KV-RACE-WRONG" : "KV-RACE-OK",
              server ? "server" : "worker", steps.load());
  return wrong ? 1 : 0;
}
