// The Gloo backend re-formed in one process, without MPI (run under test/gloo/with_redis.sh,
// which sets KOLO_GLOO_REDIS): the ranks are threads, each building its own backend through
// create_gloo_backend for generation 0, 1, 2 of one job, with 3, then 2, then 3 ranks. In
// each generation every rank sends its (rank, generation) to rank 0 over the control
// channel, rank 0 answers everyone with the sum, the ranks meet in rendezvous(), allreduce a
// buffer through the backend's executor, and finalize. A key left from the previous
// generation, or state kept between backends, would fail the next generation.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ops/gloo_backend.h"
#include "core/config.h"
#include "ops/gloo_executor.h"

namespace kolo {
namespace {

// What one rank saw in one generation (checked on the main thread: no Catch2 from workers).
struct Seen {
  Status status;
  std::vector<int> from_peers;  // rank 0: the (rank + 100 * generation) each peer sent
  int reply = -1;               // the others: rank 0's answer
  std::vector<float> reduced;
};

Status config_for(int rank, int size, int generation, const std::string& job, Config* out) {
  const char* redis = std::getenv("KOLO_GLOO_REDIS");
  if (!redis) return Status::invalid_argument("KOLO_GLOO_REDIS is not set (run under test/gloo/with_redis.sh)");
  std::map<std::string, std::string> env = {
      {"KOLO_BACKEND", "gloo"},         {"KOLO_GLOO_REDIS", redis},
      {"KOLO_GLOO_JOB", job},           {"KOLO_GLOO_GENERATION", std::to_string(generation)},
      {"KOLO_RANK", std::to_string(rank)}, {"KOLO_SIZE", std::to_string(size)},
      {"KOLO_GLOO_TIMEOUT_SECONDS", "30"}};
  return Config::parse(
      [&](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
      },
      out);
}

// Waits (bounded) for one message from `poll`.
template <typename Poll>
Status wait_message(Poll&& poll, bool* got) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  *got = false;
  while (!*got) {
    KOLO_RETURN_IF_ERROR(poll());
    if (!*got && std::chrono::steady_clock::now() > until) return Status::timeout("no control message in 30 s");
    if (!*got) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::ok();
}

Status one_rank(int rank, int size, int generation, const std::string& job, Seen* seen) {
  Config config;
  KOLO_RETURN_IF_ERROR(config_for(rank, size, generation, job, &config));
  std::unique_ptr<Backend> backend;
  KOLO_RETURN_IF_ERROR(create_gloo_backend(config, &backend));
  ControlChannel& ch = backend->channel();
  bool got = false;
  std::vector<uint8_t> bytes;
  if (rank == 0) {
    int sum = 0;
    for (int i = 1; i < size; ++i) {
      int source = -1;
      KOLO_RETURN_IF_ERROR(wait_message([&] { return ch.poll_from_peers(&source, &bytes, &got); }, &got));
      int value = 0;
      std::memcpy(&value, bytes.data(), sizeof(value));
      seen->from_peers.push_back(value);
      sum += value;
    }
    std::vector<uint8_t> reply(sizeof(int));
    std::memcpy(reply.data(), &sum, sizeof(sum));
    KOLO_RETURN_IF_ERROR(ch.send_to_all(reply));
  } else {
    const int value = rank + 100 * generation;
    std::vector<uint8_t> msg(sizeof(int));
    std::memcpy(msg.data(), &value, sizeof(value));
    KOLO_RETURN_IF_ERROR(ch.send_to_root(msg));
    KOLO_RETURN_IF_ERROR(wait_message([&] { return ch.poll_from_root(&bytes, &got); }, &got));
    std::memcpy(&seen->reply, bytes.data(), sizeof(int));
  }
  // Drain the sends before the rendezvous and the collective.
  size_t in_flight = 1;
  for (int i = 0; i < 30000 && in_flight > 0; ++i) {
    KOLO_RETURN_IF_ERROR(ch.progress(&in_flight));
    if (in_flight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  KOLO_RETURN_IF_ERROR(backend->rendezvous());
  auto* gloo = dynamic_cast<ops::GlooExecutor*>(backend->executors().at(0));
  if (!gloo) return Status::internal("the Gloo backend's executor is not a GlooExecutor");
  seen->reduced.assign(1000, static_cast<float>(rank + 1));
  KOLO_RETURN_IF_ERROR(gloo->allreduce_buffer(seen->reduced.data(), seen->reduced.size(), DType::kFloat32,
                                              ReduceOp::kSum, 1.0, 1.0));
  backend->finalize();
  return Status::ok();
}

TEST_CASE("gloo backend: built, used and torn down three times in one process", "[gloo][reform]") {
  const std::string job = "reform-test-" + std::to_string(getpid());
  const int sizes[] = {3, 2, 3};
  for (int generation = 0; generation < 3; ++generation) {
    const int size = sizes[generation];
    std::vector<Seen> seen(static_cast<size_t>(size));
    std::vector<std::thread> ranks;
    for (int r = 0; r < size; ++r)
      ranks.emplace_back([&, r] { seen[r].status = one_rank(r, size, generation, job, &seen[r]); });
    for (auto& t : ranks) t.join();
    INFO("generation " << generation << " with " << size << " ranks");
    int expected_sum = 0;
    for (int r = 1; r < size; ++r) expected_sum += r + 100 * generation;
    const float expected_reduced = static_cast<float>(size * (size + 1) / 2);
    for (int r = 0; r < size; ++r) {
      INFO("rank " << r);
      REQUIRE(seen[r].status.is_ok());
      if (r == 0) {
        CHECK(seen[r].from_peers.size() == static_cast<size_t>(size - 1));
      } else {
        CHECK(seen[r].reply == expected_sum);
      }
      REQUIRE(seen[r].reduced.size() == 1000);
      CHECK(seen[r].reduced.front() == expected_reduced);
      CHECK(seen[r].reduced.back() == expected_reduced);
    }
  }
}

TEST_CASE("gloo backend: a Redis server that is not there is an error naming it", "[gloo]") {
  Config config;
  std::map<std::string, std::string> env = {{"KOLO_BACKEND", "gloo"}, {"KOLO_GLOO_REDIS", "127.0.0.1:1"},
                                            {"KOLO_GLOO_JOB", "absent"}, {"KOLO_RANK", "0"}, {"KOLO_SIZE", "2"}};
  REQUIRE(Config::parse(
              [&](const std::string& name) -> std::optional<std::string> {
                auto it = env.find(name);
                return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
              },
              &config)
              .is_ok());
  std::unique_ptr<Backend> backend;
  Status s = create_gloo_backend(config, &backend);
  REQUIRE_FALSE(s.is_ok());
  CHECK_THAT(s.message(), Catch::Contains("127.0.0.1:1") && Catch::Contains("KOLO_GLOO_REDIS"));
}

TEST_CASE("gloo backend: what it does not have is refused at creation, naming the knob", "[gloo]") {
  for (auto [name, value] : {std::pair{"KOLO_DETERMINISTIC", "1"}, std::pair{"KOLO_CPU_OPERATIONS", "shm"}}) {
    Config config;
    std::map<std::string, std::string> env = {{"KOLO_BACKEND", "gloo"}, {"KOLO_GLOO_REDIS", "127.0.0.1:1"},
                                              {"KOLO_GLOO_JOB", "refused"}, {"KOLO_RANK", "0"},
                                              {"KOLO_SIZE", "1"}, {name, value}};
    REQUIRE(Config::parse(
                [&](const std::string& n) -> std::optional<std::string> {
                  auto it = env.find(n);
                  return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
                },
                &config)
                .is_ok());
    std::unique_ptr<Backend> backend;
    Status s = create_gloo_backend(config, &backend);
    INFO(name << "=" << value << ": " << s.message());
    REQUIRE_FALSE(s.is_ok());
    CHECK_THAT(s.message(), Catch::Contains(name) && Catch::Contains("KOLO_BACKEND=mpi"));
  }
}

}  // namespace
}  // namespace kolo
