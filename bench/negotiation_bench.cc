// kolo-bench-negotiation — the coordinator's own CPU cost per tensor, without peers: rank
// 0's work for one step of N tensors from R ranks (decode each rank's request list, add to
// the table, validate, fuse, encode the response list) and a worker's (encode requests,
// decode responses), with and without the response cache's ids. Single process; the
// figures are CPU time on this machine, not network time.
//   kolo-bench-negotiation [tensors=1000] [ranks=2] [steps=200]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/fusion.h"
#include "core/message.h"
#include "core/negotiation.h"
#include "core/response_cache.h"

using namespace kolo;

namespace {

double run(int tensors, int ranks, int steps, bool cached) {
  std::vector<Request> mine(static_cast<size_t>(tensors));
  for (int t = 0; t < tensors; ++t) {
    mine[t].name = "layer" + std::to_string(t / 4) + ".param" + std::to_string(t % 4);
    mine[t].shape = {1024};
    mine[t].reduce_op = ReduceOp::kAverage;
  }
  ResponseCache cache(cached ? 4096 : 0);
  for (const auto& q : mine) cache.remember(q);
  const auto t0 = std::chrono::steady_clock::now();
  size_t sink = 0;
  for (int s = 0; s < steps; ++s) {
    MessageTable table(ranks);
    for (int r = 0; r < ranks; ++r) {
      // Worker side: encode; rank 0 side: decode and add.
      RequestList out;
      for (auto q : mine) {
        q.rank = r;
        if (auto id = cache.find(q)) out.cached.push_back(*id);
        else out.requests.push_back(std::move(q));
      }
      auto bytes = encode(out);
      RequestList in;
      if (!decode(bytes.data(), bytes.size(), &in).is_ok()) std::abort();
      for (const auto& q : in.requests) (void)table.add(q);
      for (uint32_t id : in.cached) {
        Request q = *cache.get(id);
        q.rank = r;
        (void)table.add(q);
      }
    }
    ResponseList list;
    list.responses = fuse_responses(table.take_ready(), 4u << 20);
    auto bytes = encode(list);
    ResponseList back;
    if (!decode(bytes.data(), bytes.size(), &back).is_ok()) std::abort();
    sink += back.responses.size();
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (sink == 0) std::abort();
  return us / steps;
}

}  // namespace

int main(int argc, char** argv) {
  const int tensors = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 2;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 200;
  const double plain = run(tensors, ranks, steps, false);
  const double cached = run(tensors, ranks, steps, true);
  std::printf("negotiation of %d tensors from %d ranks, per step (CPU, one process):\n", tensors, ranks);
  std::printf("  without response cache  %9.1f us  (%.2f us per tensor)\n", plain, plain / tensors);
  std::printf("  with response cache     %9.1f us  (%.2f us per tensor)  %.2fx\n", cached, cached / tensors,
              cached / plain);
  return 0;
}
