// A KVStore server or worker dies (SIGKILL) mid-training; every other rank must get an
// error naming it, within the bound that test/mpi/dead_peer_driver.py checks (it judges
// this program's lines as it does kolo-test-dead-peer's). Run under mpirun
// --enable-recovery with KOLO_NUM_SERVERS=1: kolo-test-kvstore-dead-peer <case> <victim>,
// case "server" (the victim is the server rank) or "worker".
// Lines: "PID rank R pid P", "VICTIM rank R t=<s>", "SURVIVOR rank R t=<s> pending|later: <message>".
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/kvstore.h"
#include "test/dead_peer_util.h"

namespace {

using kolo::test::die;
using kolo::test::now_s;

void survivor(const char* when, const kolo::Error& e) {
  std::printf("SURVIVOR rank %d t=%.6f %s: %s\n", kolo::rank(), now_s(), when, e.what());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  kolo::init(&argc, &argv);
  if (argc < 3) return 2;
  const int victim = std::atoi(argv[2]);
  std::printf("PID rank %d pid %d\n", kolo::rank(), static_cast<int>(getpid()));
  std::fflush(stdout);
  const bool me = kolo::rank() == victim;
  int rc = 1;
  {
    auto kv = kolo::KVStore::create("dist_sync");
    if (kv->is_server()) {
      int applied = 0;
      auto count = [&](int, int64_t, std::span<const float> g, std::span<float> w) {
        if (me && ++applied == 30) die();
        for (size_t i = 0; i < w.size(); ++i) w[i] -= 0.01f * g[i];
      };
      try {
        kv->run_server(count);
      } catch (const kolo::Error& e) {
        survivor("pending", e);
        try {
          kv->run_server(count);  // a later call fails the same way
        } catch (const kolo::Error& later) {
          survivor("later", later);
          rc = 0;
        }
      }
    } else {
      std::vector<float> w(100000, 1.0f), g(100000, 0.5f);
      try {
        kv->init(0, kolo::TensorView::of(w));
        const double start = now_s();
        for (int step = 0; now_s() - start < 30; ++step) {
          if (me && step == 30) die();
          kv->push(0, kolo::TensorView::of(g));
          kv->pull(0, kolo::TensorView::of(w));
        }
        std::printf("NO-ERROR rank %d: 30 s of steps without one\n", kolo::rank());
      } catch (const kolo::Error& e) {
        survivor("pending", e);
        try {
          kv->pull(0, kolo::TensorView::of(w));
        } catch (const kolo::Error& later) {
          survivor("later", later);
          rc = 0;
        }
      }
    }
  }
  kolo::shutdown();
  return rc;
}
