// Rank 0's burst hold: a lone tensor and a full fusion buffer go at once; a burst still
// arriving is held, but never past the gap since the last arrival or the maximum hold.
#include <catch2/catch.hpp>

#include "core/burst_hold.h"

using namespace kolo;
using std::chrono::microseconds;

namespace {
BurstHoldOptions options() {
  BurstHoldOptions o;
  o.gap = microseconds(100);
  o.max_hold = microseconds(500);
  o.fusion_threshold_bytes = 4 << 20;
  return o;
}
BurstState burst() {
  BurstState s;
  s.ready = 10;
  s.ready_bytes = 40960;
  s.incomplete = 990;
  s.since_last_arrival = microseconds(5);
  s.held_for = microseconds(0);
  return s;
}
}  // namespace

TEST_CASE("a burst still arriving is held", "[burst]") { CHECK(hold_ready(burst(), options())); }

TEST_CASE("a lone tensor is answered at once", "[burst]") {
  BurstState s = burst();
  s.incomplete = 0;
  CHECK_FALSE(hold_ready(s, options()));
}

TEST_CASE("nothing ready, nothing to hold", "[burst]") {
  BurstState s = burst();
  s.ready = 0;
  s.ready_bytes = 0;
  CHECK_FALSE(hold_ready(s, options()));
}

TEST_CASE("a full fusion buffer goes at once", "[burst]") {
  BurstState s = burst();
  s.ready_bytes = 4 << 20;
  CHECK_FALSE(hold_ready(s, options()));
}

TEST_CASE("a quiet gap or the maximum hold ends the hold", "[burst]") {
  BurstState s = burst();
  s.since_last_arrival = microseconds(100);
  CHECK_FALSE(hold_ready(s, options()));
  s = burst();
  s.held_for = microseconds(500);
  CHECK_FALSE(hold_ready(s, options()));
}
