// core/logging.h — kolo's one logger: lines on stderr prefixed with the rank, filtered by
// KOLO_LOG_LEVEL. Thread safety: any thread (one line per write).
#pragma once

#include <sstream>
#include <string>

#include "core/config.h"

namespace kolo {

void set_log_context(LogLevel level, int rank);
bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& text);

}  // namespace kolo

#define KOLO_LOG(level, expr)                         \
  do {                                                \
    if (::kolo::log_enabled(level)) {                 \
      std::ostringstream _kolo_os;                    \
      _kolo_os << expr;                               \
      ::kolo::log_line(level, _kolo_os.str());        \
    }                                                 \
  } while (0)
