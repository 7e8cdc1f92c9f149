// SlotTable: a name keeps its slot (and the slot's buffers) across release/acquire, idle
// names are swept once too many accumulate, and in-use slots survive a sweep.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "core/slot_table.h"

using namespace kolo;

TEST_CASE("a name gets its own slot back, buffers included", "[slot_table]") {
  SlotTable<std::vector<int>> t;
  bool fresh = false;
  const uint32_t a = t.acquire("a", &fresh);
  CHECK(fresh);
  t.value(a).assign(100, 7);
  const uint32_t b = t.acquire("b", &fresh);
  CHECK(fresh);
  CHECK(a != b);
  CHECK(t.name(a) == "a");
  CHECK(t.in_use_count() == 2);

  // Acquiring an in-use name is not fresh (the caller's duplicate case).
  CHECK(t.acquire("a", &fresh) == a);
  CHECK_FALSE(fresh);

  t.release(a);
  CHECK_FALSE(t.in_use(a));
  CHECK(t.find("a") == -1);
  CHECK(t.idle_count() == 1);
  const int* before = t.value(a).data();
  CHECK(t.acquire("a", &fresh) == a);
  CHECK(fresh);
  CHECK(t.value(a).data() == before);  // same buffer: nothing was freed or allocated
  CHECK(t.find("a") == static_cast<int64_t>(a));
  CHECK(t.idle_count() == 0);
}

TEST_CASE("releasing twice counts once", "[slot_table]") {
  SlotTable<int> t;
  bool fresh = false;
  const uint32_t a = t.acquire("a", &fresh);
  t.release(a);
  t.release(a);
  CHECK(t.idle_count() == 1);
  CHECK(t.in_use_count() == 0);
}

TEST_CASE("idle names are swept once more than max_idle accumulate", "[slot_table]") {
  SlotTable<std::string> t(/*max_idle=*/4);
  bool fresh = false;
  const uint32_t keep = t.acquire("keep", &fresh);
  t.value(keep) = "kept value";
  // Names never seen again (e.g. "barrier.N"): the table must not grow without bound.
  for (int i = 0; i < 1000; ++i) t.release(t.acquire("once." + std::to_string(i), &fresh));
  CHECK(t.idle_count() <= 5);
  CHECK(t.capacity() <= 7);  // recycled slots, not new ones
  // The in-use slot survived every sweep with its name and value.
  CHECK(t.in_use(keep));
  CHECK(t.name(keep) == "keep");
  CHECK(t.value(keep) == "kept value");
  CHECK(t.find("keep") == static_cast<int64_t>(keep));
  // A swept name is simply new again.
  CHECK(t.find("once.3") == -1);
  t.acquire("once.3", &fresh);
  CHECK(fresh);
}

TEST_CASE("for_each_in_use visits exactly the slots in use", "[slot_table]") {
  SlotTable<int> t;
  bool fresh = false;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(t.acquire("t" + std::to_string(i), &fresh));
  for (int i = 0; i < 10; i += 2) t.release(ids[i]);
  std::set<std::string> seen;
  t.for_each_in_use([&](uint32_t i) { seen.insert(t.name(i)); });
  CHECK(seen == std::set<std::string>{"t1", "t3", "t5", "t7", "t9"});
}

TEST_CASE("thousands of names: each finds its own slot through growth and sweeps", "[slot_table]") {
  SlotTable<int> t(/*max_idle=*/100);
  bool fresh = false;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 3000; ++i) {
    ids.push_back(t.acquire("layer." + std::to_string(i) + ".weight", &fresh));
    REQUIRE(fresh);
    t.value(ids.back()) = i;
  }
  for (int i = 0; i < 3000; ++i) {
    REQUIRE(t.find("layer." + std::to_string(i) + ".weight") == static_cast<int64_t>(ids[i]));
    REQUIRE(t.value(ids[i]) == i);
  }
  CHECK(t.find("layer.3000.weight") == -1);
  CHECK(t.find("") == -1);
  // Release the odd names; new names then sweep them (more than max_idle are idle).
  for (int i = 1; i < 3000; i += 2) t.release(ids[i]);
  for (int i = 0; i < 10; ++i) t.acquire("new." + std::to_string(i), &fresh);
  CHECK(t.idle_count() == 0);
  CHECK(t.in_use_count() == 1500 + 10);
  for (int i = 0; i < 3000; ++i) {
    const int64_t want = i % 2 == 0 ? static_cast<int64_t>(ids[i]) : -1;
    REQUIRE(t.find("layer." + std::to_string(i) + ".weight") == want);
  }
  // A swept name comes back fresh, and the kept ones are still not fresh.
  t.acquire("layer.1.weight", &fresh);
  CHECK(fresh);
  CHECK(t.acquire("layer.2.weight", &fresh) == ids[2]);
  CHECK_FALSE(fresh);
  CHECK(t.capacity() <= 3010);  // swept slots were reused for the new names
}

TEST_CASE("the order guess never maps a name to another name's slot", "[slot_table]") {
  SlotTable<int> t(/*max_idle=*/2);
  bool fresh = false;
  const uint32_t a = t.acquire("a", &fresh), b = t.acquire("b", &fresh), c = t.acquire("c", &fresh);
  for (uint32_t i : {a, b, c}) t.release(i);
  // Same order (the guess holds), then another order (it fails, the index answers).
  CHECK(t.acquire("a", &fresh) == a);
  CHECK(t.acquire("b", &fresh) == b);
  CHECK(fresh);
  CHECK(t.acquire("c", &fresh) == c);
  CHECK(t.acquire("c", &fresh) == c);  // in use: the duplicate case
  CHECK_FALSE(fresh);
  for (uint32_t i : {a, b, c}) t.release(i);
  CHECK(t.acquire("b", &fresh) == b);
  CHECK(t.acquire("a", &fresh) == a);
  CHECK(t.acquire("c", &fresh) == c);
  // After "a" the guess is now "c"'s slot. Sweep "b" and "c" (more than 2 idle names) and
  // give their slots to new names: "a" then "c" must not land on whatever holds c's slot.
  t.release(b), t.release(c);
  t.release(t.acquire("d", &fresh));
  const uint32_t x = t.acquire("x", &fresh);  // sweeps b, c, d; takes a freed slot
  const uint32_t y = t.acquire("y", &fresh);
  CHECK(t.find("c") == -1);
  t.release(a);
  CHECK(t.acquire("a", &fresh) == a);
  const uint32_t c2 = t.acquire("c", &fresh);
  CHECK(fresh);
  CHECK(c2 != x);
  CHECK(c2 != y);
  CHECK(t.name(c2) == "c");
  CHECK(t.name(x) == "x");
  CHECK(t.name(y) == "y");
  CHECK(t.find("x") == static_cast<int64_t>(x));
  CHECK(t.find("y") == static_cast<int64_t>(y));
}
