// The response cache stays identical on every rank even when a collective fails on one rank
// only: two coordinators (ranks 0 and 1) in one process, joined by an in-memory control
// channel, with an executor that fails tensor "a" on rank 1 alone. Each rank must remember
// "a" all the same; otherwise rank 1's later cache ids name other tensors on rank 0 (its
// "b" would arrive at rank 0 as "a") and the job pairs the wrong tensors or hangs.
#include <catch2/catch.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/coordinator.h"
#include "core/tensor_queue.h"

namespace kolo {
namespace {

// Messages between rank 0 and rank 1, both directions.
struct Wire {
  std::mutex mu;
  std::deque<std::vector<uint8_t>> to_root, to_worker;
};

class FakeChannel final : public ControlChannel {
 public:
  FakeChannel(Wire& w, int rank) : w_(w), rank_(rank) {}
  Status send_to_root(std::vector<uint8_t> m) override { return push(w_.to_root, std::move(m)); }
  Status send_to_all(std::vector<uint8_t> m) override { return push(w_.to_worker, std::move(m)); }
  Status poll_from_peers(int* source, std::vector<uint8_t>* m, bool* got) override {
    *source = 1;
    return pop(w_.to_root, m, got);
  }
  Status poll_from_root(std::vector<uint8_t>* m, bool* got) override { return pop(w_.to_worker, m, got); }
  Status progress(size_t* in_flight) override {
    *in_flight = 0;
    return Status::ok();
  }

 private:
  Status push(std::deque<std::vector<uint8_t>>& q, std::vector<uint8_t> m) {
    std::lock_guard<std::mutex> l(w_.mu);
    q.push_back(std::move(m));
    return Status::ok();
  }
  Status pop(std::deque<std::vector<uint8_t>>& q, std::vector<uint8_t>* m, bool* got) {
    std::lock_guard<std::mutex> l(w_.mu);
    *got = !q.empty();
    if (*got) {
      *m = std::move(q.front());
      q.pop_front();
    }
    return Status::ok();
  }
  Wire& w_;
  int rank_;
};

// Succeeds, except for tensor `fail_name` on the rank that owns this executor if it is
// `fail_rank` (a local failure, e.g. of this rank's memory, that its peer does not share).
class FlakyExecutor final : public Executor {
 public:
  FlakyExecutor(int rank, int fail_rank, std::string fail_name)
      : rank_(rank), fail_rank_(fail_rank), fail_name_(std::move(fail_name)) {}
  const char* name() const override { return "flaky"; }
  bool accepts(const Response&) const override { return true; }
  Status execute(const Response& r, std::vector<TensorEntry>&) override {
    for (const auto& n : r.names) {
      if (rank_ == fail_rank_ && n == fail_name_) return Status::communication("injected failure of \"" + n + "\"");
    }
    return Status::ok();
  }

 private:
  int rank_, fail_rank_;
  std::string fail_name_;
};

class FakeBackend final : public Backend {
 public:
  FakeBackend(Wire& w, int rank) : channel_(w, rank), executor_(rank, 1, "a") {
    topo_.rank = topo_.local_rank = rank;
    topo_.size = topo_.local_size = 2;
    executors_.push_back(&executor_);
  }
  const Topology& topology() const override { return topo_; }
  ControlChannel& channel() override { return channel_; }
  const std::vector<Executor*>& executors() override { return executors_; }
  void finalize() override {}

 private:
  Topology topo_;
  FakeChannel channel_;
  FlakyExecutor executor_;
  std::vector<Executor*> executors_;
};

struct Rank {
  Rank(Wire& w, int r) : rank(r), backend(w, r), coordinator(Config{}, backend, queue) {}
  int rank;
  FakeBackend backend;
  TensorQueue queue;
  Coordinator coordinator;
  std::vector<float> data = std::vector<float>(4, 1.0f);

  std::shared_ptr<detail::HandleState> submit(const std::string& name) {
    Request header;
    header.rank = rank;
    auto h = std::make_shared<detail::HandleState>(name, OpKind::kAllreduce);
    queue.push(TensorView{data.data(), DType::kFloat32, {4}}, name, header, h);
    return h;
  }
};

// The handle's status once done, or "timed out" after 5 s.
std::string outcome(const std::shared_ptr<detail::HandleState>& h) {
  if (!h->wait_for(std::chrono::seconds(5))) return "timed out";
  h->observed = true;
  return h->status.is_ok() ? "ok" : h->status.message();
}

}  // namespace

TEST_CASE("a collective that fails on one rank only leaves the response caches alike", "[coordinator][cache]") {
  Wire wire;
  Rank r0(wire, 0), r1(wire, 1);
  r0.coordinator.start();
  r1.coordinator.start();
  // "a" fails on rank 1 alone; "b" is new on both, then cached on both: rank 1 then sends
  // its cache id for "b", which must name "b" on rank 0 too.
  std::vector<std::string> got;
  for (const char* name : {"a", "b", "b", "b"}) {
    auto h0 = r0.submit(name), h1 = r1.submit(name);
    const std::string o0 = outcome(h0), o1 = outcome(h1);
    INFO("tensor " << name << ": rank 0 " << o0 << ", rank 1 " << o1);
    if (std::string(name) == "a") {
      CHECK(o0 == "ok");
      CHECK(o1.find("injected failure") != std::string::npos);
    } else {
      CHECK(o0 == "ok");
      CHECK(o1 == "ok");
    }
    if (o0 == "timed out" || o1 == "timed out") break;
  }
  r1.coordinator.request_shutdown();
  r0.coordinator.join();
  r1.coordinator.join();
}

}  // namespace kolo
