// TensorQueue: requests come out in push order, entries by name; a duplicate fails its own
// handle and queues a flagged request; a missing name takes nothing; close fails the rest.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/tensor_queue.h"

using namespace kolo;

namespace {

std::shared_ptr<detail::HandleState> state(const std::string& name) {
  return std::make_shared<detail::HandleState>(name);
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
    // Taken: the name is free for the next step.
    CHECK_FALSE(q.take_entries({"a"}, &entries).is_ok());
    // A shorter response next: the vector shrinks to fit.
    REQUIRE(q.push(TensorView::of(a.data(), {2, 3}), "a", header(), ha));
    REQUIRE(q.take_entries({"a"}, &entries).is_ok());
    CHECK(entries.size() == 1);
    CHECK(entries[0].request.name == "a");
  }
}

TEST_CASE("a duplicate name fails at once and is flagged for rank 0", "[queue]") {
  TensorQueue q;
  std::vector<float> a(4);
  auto first = state("a"), second = state("a");
  REQUIRE(q.push(TensorView::of(a.data(), {4}), "a", header(), first));
  CHECK_FALSE(q.push(TensorView::of(a.data(), {4}), "a", header(), second));
  CHECK(second->done);
  CHECK(second->status.message().find("submitted twice on rank 1") != std::string::npos);
  CHECK_FALSE(first->done);
  std::vector<Request> out;
  REQUIRE(q.take_requests(&out) == 2);
  CHECK_FALSE(out[0].duplicate);
  CHECK(out[1].duplicate);
  CHECK(out[1].name == "a");
  second->observed = true;
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
  CHECK(h->done);
  CHECK(h->status.message() == "stopped");
  auto later = state("b");
  CHECK_FALSE(q.push(TensorView::of(a.data(), {4}), "b", header(), later));
  CHECK(later->done);
  h->observed = later->observed = true;
}
