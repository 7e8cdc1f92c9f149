// The waiting thread helps the coordinator: core/wait_help.h.
#include "core/wait_help.h"

#include <thread>

namespace kolo::detail {
namespace {

std::atomic<WaitHelper*> g_target{nullptr};
std::atomic<int> g_inside{0};  // threads between the two counts in help_wait

}  // namespace

void attach_wait_helper(WaitHelper* h) { g_target.store(h); }

void detach_wait_helper() {
  g_target.store(nullptr);
  // A helper that read the old pointer counted itself in before reading it (both seq_cst),
  // so it is seen here; it leaves after at most one pass (the coordinator has stopped).
  while (g_inside.load() > 0) std::this_thread::yield();
}

void help_wait(const std::atomic<bool>& done, std::chrono::steady_clock::time_point deadline) {
  if (done.load(std::memory_order_acquire)) return;
  g_inside.fetch_add(1);
  if (WaitHelper* h = g_target.load()) h->help(done, deadline);
  g_inside.fetch_sub(1);
}

}  // namespace kolo::detail
