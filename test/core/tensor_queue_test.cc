// TensorQueue: requests come out in push order, entries by name; a name stays reserved from
// push to release, and a duplicate fails only its own handle (nothing is queued for it); a
// missing name takes nothing; close fails the rest.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/tensor_queue.h"

using namespace kolo;

namespace {

std::shared_ptr<detail::HandleState> state(const std::string& name) {
  return std::make_shared<detail::HandleState>(name, OpKind::kAllreduce);
}

Request header(int rank = 1) {
  Request q;
  q.rank = rank;
  q.reduce_op = ReduceOp::kAverage;
  return q;
}

}  // namespace

TEST_CASE("requests carry the view's dtype and shape and the given name", "[queue]") {
  TensorQueue q;
  std::vector<float> a(6), b(4);
  REQUIRE(q.push(TensorView::of(a.data(), {2, 3}), "a", header(), state("a")));
  REQUIRE(q.push(TensorView::of(b.data(), {4}), "b", header(), state("b")));
  std::vector<Request> out;
  REQUIRE(q.take_requests(&out) == 2);
  CHECK(out[0].name == "a");
  CHECK(out[0].shape == Shape{2, 3});
  CHECK(out[0].dtype == DType::kFloat32);
  CHECK(out[0].reduce_op == ReduceOp::kAverage);
  CHECK(out[0].rank == 1);
  CHECK(out[1].name == "b");
  CHECK(q.take_requests(&out) == 0);
}

TEST_CASE("entries are taken by name, in the order asked, and reused buffers stay correct", "[queue]") {
  TensorQueue q;
  std::vector<float> a(6), b(4);
  auto ha = state("a"), hb = state("b");
  std::vector<TensorEntry> entries;
  std::vector<Request> reqs;
  for (int step = 0; step < 3; ++step) {
    REQUIRE(q.push(TensorView::of(a.data(), {2, 3}), "a", header(), ha));
    REQUIRE(q.push(TensorView::of(b.data(), {4}), "b", header(), hb));
    q.take_requests(&reqs);
    REQUIRE(q.take_entries({"b", "a"}, &entries).is_ok());
    REQUIRE(entries.size() == 2);
    CHECK(entries[0].request.name == "b");
    CHECK(entries[0].view.data == b.data());
    CHECK(entries[0].handle == hb);
    CHECK(entries[1].view.shape == Shape{2, 3});
    CHECK(entries[1].handle == ha);
    // Taken, not yet released: the names are still reserved and cannot be taken again.
    std::vector<TensorEntry> again;
    CHECK_FALSE(q.take_entries({"a"}, &again).is_ok());
    q.release(entries);
    // Released: the name is free for the next step. A shorter response next: the vector
    // shrinks to fit.
    REQUIRE(q.push(TensorView::of(a.data(), {2, 3}), "a", header(), ha));
    q.take_requests(&reqs);
    REQUIRE(q.take_entries({"a"}, &entries).is_ok());
    CHECK(entries.size() == 1);
    CHECK(entries[0].request.name == "a");
    q.release(entries);
  }
}

TEST_CASE("a duplicate fails at once on its rank only and sends nothing", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  auto first = state("a"), second = state("a");
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), first));
  CHECK_FALSE(q.push(TensorView::of(a.data(), {4}), "a", header(), second));
  CHECK(second->finished.load());
  CHECK(second->status.message().find("\"a\": submitted again on rank 1") != std::string::npos);
  CHECK(second->status.message().find("the one in flight goes on") != std::string::npos);
  CHECK_FALSE(first->finished.load());
  std::vector<Request> out;
  REQUIRE(q.take_requests(&out) == 1);  // only the first travels to rank 0
  CHECK(out[0].name == "a");
  second->observed = true;
}

TEST_CASE("a name stays reserved while it executes and is free once released", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), state("a")));
  std::vector<Request> out;
  q.take_requests(&out);
  std::vector<TensorEntry> entries;
  REQUIRE(q.take_entries({"a"}, &entries).is_ok());
  // Executing: a resubmission now would otherwise start a round the peers never match.
  auto during = state("a");
  CHECK_FALSE(q.push(TensorView::of(a.data(), {4}), "a", header(), during));
  CHECK(during->finished.load());
  CHECK(q.take_requests(&out) == 0);
  q.release(entries);
  entries[0].handle->complete(Status::ok());
  auto after = state("a");
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), after));
  CHECK_FALSE(after->finished.load());
  CHECK(q.take_requests(&out) == 1);
  during->observed = true;
}

TEST_CASE("close while a name executes leaves that handle to the coordinator", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  auto executing = state("a"), pending = state("b");
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), executing));
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "b", header(), pending));
  std::vector<TensorEntry> entries;
  REQUIRE(q.take_entries({"a"}, &entries).is_ok());
  q.close(Status::aborted("stopped"));
  CHECK(pending->finished.load());
  CHECK_FALSE(executing->finished.load());
  q.release(entries);  // after close: harmless
  entries[0].handle->complete(Status::ok());
  pending->observed = true;
}

TEST_CASE("a name rank 0 scheduled but this rank lacks takes nothing", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), state("a")));
  std::vector<TensorEntry> entries;
  CHECK_FALSE(q.take_entries({"a", "zzz"}, &entries).is_ok());
  REQUIRE(q.take_entries({"a"}, &entries).is_ok());  // "a" is still there
}

TEST_CASE("close fails pending entries and later pushes", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  auto h = state("a");
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), h));
  q.close(Status::aborted("stopped"));
  CHECK(h->finished.load());
  CHECK(h->status.message() == "stopped");
  auto later = state("b");
  CHECK_FALSE(q.push(TensorView::of(a.data(), {4}), "b", header(), later));
  CHECK(later->finished.load());
  h->observed = later->observed = true;
}

TEST_CASE("a group goes in whole or not at all: one reserved member refuses every member", "[queue]") {
  TensorQueue q;
  std::vector<float> a(3), b(5), c(2);
  REQUIRE(q.push(TensorView::of(c), "g[1]", header(), state("g[1]")));  // member 1's name in flight
  std::vector<std::shared_ptr<detail::HandleState>> members = {state("g[0]"), state("g[1]")};
  const auto m0 = members[0], m1 = members[1];
  CHECK_FALSE(q.push_group({TensorView::of(a), TensorView::of(b)}, header(), &members));
  REQUIRE(m0->finished.load());
  REQUIRE(m1->finished.load());
  CHECK(m0->status.message().find("\"g[1]\": submitted again on rank 1") != std::string::npos);
  CHECK(m1->status.message() == m0->status.message());
  std::vector<Request> out;
  REQUIRE(q.take_requests(&out) == 1);  // only the earlier push
  CHECK(out[0].name == "g[1]");
  // Member 0's name was not reserved by the refused group: it can be submitted now.
  CHECK(q.push(TensorView::of(a), "g[0]", header(), state("g[0]")));
  // A group whose names are all free goes in whole, in member order.
  std::vector<std::shared_ptr<detail::HandleState>> free_members = {state("h[0]"), state("h[1]")};
  REQUIRE(q.push_group({TensorView::of(a), TensorView::of(b)}, header(), &free_members));
  REQUIRE(q.take_requests(&out) == 3);
  CHECK(out[1].name == "h[0]");
  CHECK(out[2].name == "h[1]");
  CHECK(out[2].shape == Shape{5});
  m0->observed = m1->observed = true;
}

TEST_CASE("entries are taken by the slots take_requests gave, with their cache hints", "[queue]") {
  TensorQueue q;
  std::vector<float> a(6), b(4);
  auto ha = state("a"), hb = state("b");
  std::vector<Request> reqs;
  std::vector<uint32_t> slots;
  std::vector<TensorEntry> entries;
  for (int step = 0; step < 3; ++step) {
    REQUIRE(q.push(TensorView::of(a.data(), {2, 3}), "a", header(), ha));
    REQUIRE(q.push(TensorView::of(b.data(), {4}), "b", header(), hb));
    REQUIRE(q.take_requests(&reqs, &slots) == 2);
    REQUIRE(slots.size() >= 2);
    CHECK(slots[0] != slots[1]);
    REQUIRE(q.take_slots({slots[1], slots[0]}, {7, 9}, &entries).is_ok());
    REQUIRE(entries.size() == 2);
    CHECK(entries[0].request.name == "b");
    CHECK(entries[0].view.data == b.data());
    CHECK(entries[0].handle == hb);
    CHECK(entries[0].cache_hint == 7);
    CHECK(entries[1].request.name == "a");
    CHECK(entries[1].cache_hint == 9);
    const std::vector<TensorEntry> taken = entries;
    // Taken: a second take of the same slot is refused and takes nothing.
    CHECK_FALSE(q.take_slots({slots[0]}, {0}, &entries).is_ok());
    CHECK(entries.empty());
    REQUIRE(q.take_slots({}, {}, &entries).is_ok());
    q.release(taken);
  }
  // By name, no hint is carried over from an earlier take by slot.
  REQUIRE(q.push(TensorView::of(a.data(), {2, 3}), "a", header(), ha));
  REQUIRE(q.take_requests(&reqs, &slots) == 1);
  entries.resize(1);
  entries[0].cache_hint = 5;
  REQUIRE(q.take_entries({"a"}, &entries).is_ok());
  CHECK(entries[0].cache_hint == UINT32_MAX);
}

TEST_CASE("a slot that holds nothing to take is refused", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  std::vector<TensorEntry> entries;
  std::vector<Request> reqs;
  std::vector<uint32_t> slots;
  CHECK_FALSE(q.take_slots({0}, {0}, &entries).is_ok());     // never used
  CHECK_FALSE(q.take_slots({1000}, {0}, &entries).is_ok());  // past the table
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), state("a")));
  // Pushed but its request not taken yet: the coordinator cannot have held it.
  CHECK_FALSE(q.take_slots({0}, {0}, &entries).is_ok());
  REQUIRE(q.take_requests(&reqs, &slots) == 1);
  Status s = q.take_slots({slots[0], slots[0] + 1}, {0, 0}, &entries);
  CHECK_FALSE(s.is_ok());
  CHECK(s.message().find("slot " + std::to_string(slots[0] + 1)) != std::string::npos);
  REQUIRE(q.take_slots({slots[0]}, {0}, &entries).is_ok());  // nothing was taken by the refusal
}

TEST_CASE("has_pending and take_join follow pushes, releases, joins and close", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  CHECK_FALSE(q.has_pending());
  CHECK_FALSE(q.take_join());
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), state("a")));
  CHECK(q.has_pending());
  std::vector<Request> out;
  q.take_requests(&out);
  std::vector<TensorEntry> entries;
  REQUIRE(q.take_entries({"a"}, &entries).is_ok());
  CHECK(q.has_pending());  // executing still counts
  q.release(entries);
  CHECK_FALSE(q.has_pending());
  entries[0].handle->complete(Status::ok());
  auto j = state("kolo.join");
  REQUIRE(q.push_join(j).is_ok());
  auto again = state("kolo.join");
  const Status twice = q.push_join(again);  // a second join while one is pending: an error to throw
  CHECK(twice.code() == Status::Code::kInvalidArgument);
  CHECK_THAT(twice.message(), Catch::Contains("already in join()"));
  CHECK_FALSE(again->finished.load());  // the handle is the caller's to drop
  CHECK(q.take_join());
  CHECK_FALSE(q.take_join());  // once per join
  q.complete_join(Status::ok(), 0);
  CHECK(j->finished.load());
  auto j2 = state("kolo.join");
  REQUIRE(q.push_join(j2).is_ok());
  auto refused = state("b");
  CHECK_FALSE(q.push(TensorView::of(a.data(), {4}), "b", header(), refused));  // in a join
  refused->observed = true;
  q.close(Status::aborted("stopped"));
  CHECK_FALSE(q.take_join());  // close ended the join
  CHECK(j2->finished.load());
  CHECK_FALSE(q.has_pending());
  j2->observed = true;
}

TEST_CASE("close clears has_pending of entries not yet taken", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  auto h = state("a");
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), h));
  CHECK(q.has_pending());
  q.close(Status::aborted("stopped"));
  CHECK_FALSE(q.has_pending());
  h->observed = true;
}
