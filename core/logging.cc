#include "core/logging.h"

#include <atomic>
#include <cstdio>

namespace kolo {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
std::atomic<int> g_rank{-1};
const char* level_name(LogLevel l) {
  static const char* names[] = {"trace", "debug", "info", "warning", "error"};
  return names[static_cast<int>(l)];
}
}  // namespace

void set_log_context(LogLevel level, int rank) {
  g_level = static_cast<int>(level);
  g_rank = rank;
}

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

void log_line(LogLevel level, const std::string& text) {
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "[kolo rank %d %s] %s\n", g_rank.load(), level_name(level), text.c_str());
}

}  // namespace kolo
