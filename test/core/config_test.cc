// KOLO_* parsing: defaults, accepted forms, and errors that name the variable and the form.
#include <catch2/catch.hpp>

#include <map>

#include "core/config.h"

using namespace kolo;

namespace {
Status parse(std::map<std::string, std::string> env, Config* c) {
  return Config::parse(
      [&](const std::string& n) -> std::optional<std::string> {
        auto it = env.find(n);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      c);
}
}  // namespace

TEST_CASE("defaults apply when nothing is set", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  Config d;
  CHECK(c.fusion_threshold_bytes == d.fusion_threshold_bytes);
  CHECK(c.cycle_time_ms == d.cycle_time_ms);
  CHECK(c.cpu_operations == CpuOperations::kAuto);
  CHECK(c.stall_check_seconds == 60.0);
  CHECK(c.stall_shutdown_seconds == 0.0);
  CHECK(c.burst_hold_us == 100);
  CHECK(c.shm_arena_auto);
  CHECK(c.peer_timeout_seconds == 5.0);
}

TEST_CASE("KOLO_SHM_ARENA_BYTES: auto, a byte count, or 0", "[config]") {
  Config c;
  REQUIRE(parse({{"KOLO_SHM_ARENA_BYTES", "auto"}}, &c).is_ok());
  CHECK(c.shm_arena_auto);
  REQUIRE(parse({{"KOLO_SHM_ARENA_BYTES", "256M"}}, &c).is_ok());
  CHECK_FALSE(c.shm_arena_auto);
  CHECK(c.shm_arena_bytes == 256u << 20);
  REQUIRE(parse({{"KOLO_SHM_ARENA_BYTES", "0"}}, &c).is_ok());
  CHECK_FALSE(c.shm_arena_auto);
  CHECK(c.shm_arena_bytes == 0);
  CHECK(c.shm_result_pool_bytes == 256u << 20);
  REQUIRE(parse({{"KOLO_SHM_RESULT_POOL_BYTES", "0"}}, &c).is_ok());
  CHECK(c.shm_result_pool_bytes == 0);
  REQUIRE(parse({{"KOLO_SHM_RESULT_POOL_BYTES", "64M"}}, &c).is_ok());
  CHECK(c.shm_result_pool_bytes == 64u << 20);
  CHECK_FALSE(parse({{"KOLO_SHM_RESULT_POOL_BYTES", "auto"}}, &c).is_ok());
  for (const char* bad : {"AUTO", "", "-1", "1T", "auto "}) {
    Status s = parse({{"KOLO_SHM_ARENA_BYTES", bad}}, &c);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.message() == "KOLO_SHM_ARENA_BYTES=\"" + std::string(bad) +
                             "\" is not valid: expected auto, or a byte count such as 0 (none), 256M or 1G");
  }
}

TEST_CASE("accepted forms are parsed", "[config]") {
  Config c;
  REQUIRE(parse({{"KOLO_FUSION_THRESHOLD", "64M"},
                 {"KOLO_CYCLE_TIME", "0.5"},
                 {"KOLO_CPU_CHUNK_BYTES", "512K"},
                 {"KOLO_CPU_OPERATIONS", "mpi"},
                 {"KOLO_LOG_LEVEL", "debug"},
                 {"KOLO_STALL_CHECK_TIME_SECONDS", "5"},
                 {"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "30"},
                 {"KOLO_TEST_RANKS_PER_HOST", "2"},
                 {"KOLO_BURST_HOLD_MICROSECONDS", "0"},
                 {"KOLO_PEER_TIMEOUT_SECONDS", "2.5"},
                 {"KOLO_TEST_STALL_SECONDS", "1.5"}},
                &c)
              .is_ok());
  CHECK(c.fusion_threshold_bytes == 64u << 20);
  CHECK(c.cycle_time_ms == 0.5);
  CHECK(c.cpu_chunk_bytes == 512u << 10);
  CHECK(c.cpu_operations == CpuOperations::kMpi);
  CHECK(c.log_level == LogLevel::kDebug);
  CHECK(c.stall_check_seconds == 5.0);
  CHECK(c.stall_shutdown_seconds == 30.0);
  CHECK(c.ranks_per_host_override == 2);
  CHECK(c.burst_hold_us == 0);
  CHECK(c.peer_timeout_seconds == 2.5);
  CHECK(c.test_stall_seconds == 1.5);
  REQUIRE(parse({{"KOLO_FUSION_THRESHOLD", "0"}}, &c).is_ok());
  CHECK(c.fusion_threshold_bytes == 0);
}

TEST_CASE("malformed values are refused with the variable, value and accepted form", "[config]") {
  Config c;
  auto msg = [&](const char* name, const char* value) {
    Status s = parse({{name, value}}, &c);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.code() == Status::Code::kInvalidArgument);
    return s.message();
  };
  CHECK(msg("KOLO_FUSION_THRESHOLD", "abc") ==
        "KOLO_FUSION_THRESHOLD=\"abc\" is not valid: expected a byte count, such as 4194304, 512K, 4M or 1G");
  CHECK(msg("KOLO_FUSION_THRESHOLD", "-5").find("KOLO_FUSION_THRESHOLD=\"-5\"") == 0);
  CHECK(msg("KOLO_FUSION_THRESHOLD", "12X").find("byte count") != std::string::npos);
  CHECK(msg("KOLO_FUSION_THRESHOLD", "99999999999999999999").find("not valid") != std::string::npos);
  CHECK(msg("KOLO_CPU_CHUNK_BYTES", "100").find("at least 4096") != std::string::npos);
  CHECK(msg("KOLO_CYCLE_TIME", "-1") ==
        "KOLO_CYCLE_TIME=\"-1\" is not valid: expected a positive number of milliseconds, such as 0.5 or 60");
  CHECK(msg("KOLO_CYCLE_TIME", "0").find("positive") != std::string::npos);
  CHECK(msg("KOLO_CYCLE_TIME", "1ms").find("KOLO_CYCLE_TIME") == 0);
  CHECK(msg("KOLO_STALL_CHECK_TIME_SECONDS", "nan").find("non-negative") != std::string::npos);
  CHECK(msg("KOLO_CPU_OPERATIONS", "gpu") ==
        "KOLO_CPU_OPERATIONS=\"gpu\" is not valid: expected one of auto, mpi, shm");
  CHECK(msg("KOLO_LOG_LEVEL", "loud").find("one of trace, debug") != std::string::npos);
  CHECK(msg("KOLO_TEST_RANKS_PER_HOST", "1.5").find("whole number") != std::string::npos);
  for (const char* bad : {"0", "0.05", "-1", "5s", "", "nan", "inf", "100000"})
    CHECK(msg("KOLO_PEER_TIMEOUT_SECONDS", bad) ==
          "KOLO_PEER_TIMEOUT_SECONDS=\"" + std::string(bad) +
              "\" is not valid: expected a number of seconds from 0.1 to 86400, such as 5");
  for (const char* bad : {"-1", "x", "4000"})
    CHECK(msg("KOLO_TEST_STALL_SECONDS", bad) == "KOLO_TEST_STALL_SECONDS=\"" + std::string(bad) +
                                                     "\" is not valid: expected a number of seconds from 0 (off) to 3600");
  CHECK(msg("KOLO_BURST_HOLD_MICROSECONDS", "-3").find("microseconds from 0 (off)") != std::string::npos);
  CHECK(msg("KOLO_VERBOSE", "yes") == "KOLO_VERBOSE=\"yes\" is not valid: expected 0 or 1");
  CHECK(msg("KOLO_NETWORK_INTERFACE", "eth0,eth1").find("one network interface name") != std::string::npos);
  CHECK(msg("KOLO_NETWORK_INTERFACE", "").find("KOLO_NETWORK_INTERFACE") == 0);
  CHECK(msg("KOLO_NUM_SERVERS", "-1") ==
        "KOLO_NUM_SERVERS=\"-1\" is not valid: expected a whole number of server ranks (0 = none)");
  CHECK(msg("KOLO_NUM_SERVERS", "1.5").find("whole number") != std::string::npos);
  CHECK(msg("KOLO_KVSTORE_BIGARRAY_BOUND", "0").find("at least 1") != std::string::npos);
  // Session 8 audit: last session's knobs, each value named back.
  for (const char* bad : {"", "2", "yes", "on", " 1", "1 "})
    CHECK(msg("KOLO_FAST_PATH", bad) == "KOLO_FAST_PATH=\"" + std::string(bad) + "\" is not valid: expected 0 or 1");
  for (const char* bad : {"", "2", "yes", " 0"})
    CHECK(msg("KOLO_WAIT_HELPS", bad) == "KOLO_WAIT_HELPS=\"" + std::string(bad) + "\" is not valid: expected 0 or 1");
  for (const char* bad : {"", "2", "true", " 1"})
    CHECK(msg("KOLO_BURST_DEFER", bad) == "KOLO_BURST_DEFER=\"" + std::string(bad) + "\" is not valid: expected 0 or 1");
  {
    Config d;
    CHECK_FALSE(d.burst_defer);
    REQUIRE(parse({{"KOLO_BURST_DEFER", "1"}}, &d).is_ok());
    CHECK(d.burst_defer);
  }
  for (const char* bad : {"", "two", "1e7", "3 "})
    CHECK(msg("KOLO_NUM_SERVERS", bad).find("KOLO_NUM_SERVERS=\"" + std::string(bad) + "\" is not valid") == 0);
  for (const char* bad : {"", "-5", "12abc", "1e20", "0.5"})
    CHECK(msg("KOLO_KVSTORE_BIGARRAY_BOUND", bad).find("KOLO_KVSTORE_BIGARRAY_BOUND=\"" + std::string(bad) +
                                                        "\" is not valid") == 0);
  for (const char* bad : {"0,1;", ";", "0,,1", "a", "-1", "0;1;x"})
    CHECK(msg("KOLO_PROCESS_SETS", bad).find("KOLO_PROCESS_SETS=\"" + std::string(bad) + "\": ") == 0);
}

TEST_CASE("KVStore knobs", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK(c.num_servers == 0);
  CHECK(c.kvstore_bigarray_bound == 1000000);
  REQUIRE(parse({{"KOLO_NUM_SERVERS", "2"}, {"KOLO_KVSTORE_BIGARRAY_BOUND", "4096"}}, &c).is_ok());
  CHECK(c.num_servers == 2);
  CHECK(c.kvstore_bigarray_bound == 4096);
}

TEST_CASE("KOLO_VERBOSE and KOLO_NETWORK_INTERFACE", "[config]") {
  Config c;
  CHECK_FALSE(c.verbose);
  CHECK(c.network_interface.empty());
  REQUIRE(parse({{"KOLO_VERBOSE", "1"}, {"KOLO_NETWORK_INTERFACE", "eth0"}}, &c).is_ok());
  CHECK(c.verbose);
  CHECK(c.network_interface == "eth0");
}

TEST_CASE("byte counts and numbers parse strictly", "[config]") {
  size_t b = 0;
  CHECK(parse_bytes("1024", &b));
  CHECK(b == 1024);
  CHECK(parse_bytes("1G", &b));
  CHECK(b == 1u << 30);
  CHECK(parse_bytes("2KiB", &b));
  CHECK(b == 2048);
  CHECK_FALSE(parse_bytes("", &b));
  CHECK_FALSE(parse_bytes(" 5", &b));
  CHECK_FALSE(parse_bytes("5 M", &b));
  CHECK_FALSE(parse_bytes("+5", &b));
  double d = 0;
  CHECK(parse_non_negative("0", &d));
  CHECK_FALSE(parse_non_negative("inf", &d));
  CHECK_FALSE(parse_non_negative("1e400", &d));
  CHECK_FALSE(parse_non_negative("3s", &d));
}

TEST_CASE("KOLO_CROSS_HOST_ALLREDUCE: sliced (default) or leader", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK(c.cross_host_sliced);
  REQUIRE(parse({{"KOLO_CROSS_HOST_ALLREDUCE", "leader"}}, &c).is_ok());
  CHECK_FALSE(c.cross_host_sliced);
  REQUIRE(parse({{"KOLO_CROSS_HOST_ALLREDUCE", "sliced"}}, &c).is_ok());
  CHECK(c.cross_host_sliced);
  Status s = parse({{"KOLO_CROSS_HOST_ALLREDUCE", "ring"}}, &c);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "KOLO_CROSS_HOST_ALLREDUCE=\"ring\" is not valid: expected sliced or leader");
}

TEST_CASE("KOLO_CROSS_HOST_HALF_WIRE: float32 (default) or 16bit", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK_FALSE(c.cross_host_half_wire);
  REQUIRE(parse({{"KOLO_CROSS_HOST_HALF_WIRE", "float32"}}, &c).is_ok());
  CHECK_FALSE(c.cross_host_half_wire);
  REQUIRE(parse({{"KOLO_CROSS_HOST_HALF_WIRE", "16bit"}}, &c).is_ok());
  CHECK(c.cross_host_half_wire);
  Status s = parse({{"KOLO_CROSS_HOST_HALF_WIRE", "fp16"}}, &c);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "KOLO_CROSS_HOST_HALF_WIRE=\"fp16\" is not valid: expected 16bit or float32");
}

TEST_CASE("KOLO_TEST_DIE_IN_SET_SETUP: 0, 1 or 2, read through Config", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK(c.test_die_in_set_setup == 0);
  REQUIRE(parse({{"KOLO_TEST_DIE_IN_SET_SETUP", "2"}}, &c).is_ok());
  CHECK(c.test_die_in_set_setup == 2);
  const Status s = parse({{"KOLO_TEST_DIE_IN_SET_SETUP", "3"}}, &c);
  CHECK_FALSE(s.is_ok());
  CHECK(s.message().find("KOLO_TEST_DIE_IN_SET_SETUP") != std::string::npos);
}

TEST_CASE("the heartbeats' interface: KOLO_NETWORK_INTERFACE, else Open MPI's first", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK(c.heartbeat_interface().empty());
  REQUIRE(parse({{"OMPI_MCA_btl_tcp_if_include", "eth1,eth2"}}, &c).is_ok());
  CHECK(c.mpi_tcp_interfaces == "eth1,eth2");
  CHECK(c.heartbeat_interface() == "eth1");
  Config d;
  REQUIRE(parse({{"OMPI_MCA_btl_tcp_if_include", "eth1,eth2"}, {"KOLO_NETWORK_INTERFACE", "ib0"}}, &d).is_ok());
  CHECK(d.heartbeat_interface() == "ib0");
}

TEST_CASE("KOLO_JOIN_RULES: kolo (default) or horovod", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK_FALSE(c.join_horovod);
  REQUIRE(parse({{"KOLO_JOIN_RULES", "horovod"}}, &c).is_ok());
  CHECK(c.join_horovod);
  REQUIRE(parse({{"KOLO_JOIN_RULES", "kolo"}}, &c).is_ok());
  CHECK_FALSE(c.join_horovod);
  Status s = parse({{"KOLO_JOIN_RULES", "Horovod"}}, &c);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message() == "KOLO_JOIN_RULES=\"Horovod\" is not valid: expected kolo or horovod");
}

TEST_CASE("KOLO_BACKEND: mpi (default) or gloo, with the Gloo knobs checked only for gloo", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK(c.transport == TransportKind::kMpi);
  // Gloo's knobs are not read for MPI: a malformed one does not stop an MPI job.
  REQUIRE(parse({{"KOLO_GLOO_REDIS", "nonsense"}}, &c).is_ok());
  Status s = parse({{"KOLO_BACKEND", "nccl"}}, &c);
  CHECK_THAT(s.message(), Catch::Contains("KOLO_BACKEND") && Catch::Contains("mpi or gloo"));

  const std::map<std::string, std::string> ok = {{"KOLO_BACKEND", "gloo"}, {"KOLO_GLOO_REDIS", "db.example:6380"},
                                                 {"KOLO_GLOO_JOB", "j1"}, {"KOLO_RANK", "2"}, {"KOLO_SIZE", "3"}};
  REQUIRE(parse(ok, &c).is_ok());
  CHECK(c.transport == TransportKind::kGloo);
  CHECK(c.gloo_redis_host == "db.example");
  CHECK(c.gloo_redis_port == 6380);
  CHECK(c.gloo_job == "j1");
  CHECK(c.gloo_generation == 0);
  CHECK(c.gloo_timeout_seconds == 60.0);
  CHECK(c.launcher_rank == 2);
  CHECK(c.launcher_size == 3);

  // Open MPI's variables when kolo's are absent; its job id as the default job key.
  REQUIRE(parse({{"KOLO_BACKEND", "gloo"}, {"KOLO_GLOO_REDIS", "h:1"}, {"OMPI_MCA_ess_base_jobid", "77"},
                 {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"KOLO_GLOO_GENERATION", "5"}},
                &c)
              .is_ok());
  CHECK(c.gloo_job == "ompi-77");
  CHECK(c.launcher_rank == 1);
  CHECK(c.launcher_size == 4);
  CHECK(c.gloo_generation == 5);

  auto refused = [&](const std::string& name, const std::string& value, const char* says) {
    auto env = ok;
    if (value == "<unset>") env.erase(name);
    else env[name] = value;
    Status e = parse(env, &c);
    INFO(name << "=" << value << ": " << e.message());
    CHECK_FALSE(e.is_ok());
    CHECK_THAT(e.message(), Catch::Contains(says));
  };
  refused("KOLO_GLOO_REDIS", "<unset>", "KOLO_GLOO_REDIS=host:port");
  refused("KOLO_GLOO_REDIS", "localhost", "host:port");
  refused("KOLO_GLOO_REDIS", "localhost:0", "host:port");
  refused("KOLO_GLOO_REDIS", ":6379", "host:port");
  refused("KOLO_GLOO_JOB", "a/b", "KOLO_GLOO_JOB");
  refused("KOLO_GLOO_JOB", "<unset>", "KOLO_GLOO_JOB");
  refused("KOLO_GLOO_GENERATION", "-1", "KOLO_GLOO_GENERATION");
  refused("KOLO_GLOO_TIMEOUT_SECONDS", "0.5", "KOLO_GLOO_TIMEOUT_SECONDS");
  refused("KOLO_RANK", "3", "a rank from 0 to 2");
  refused("KOLO_RANK", "<unset>", "KOLO_RANK");
  refused("KOLO_SIZE", "0", "KOLO_SIZE");
}

TEST_CASE("KOLO_DETERMINISTIC: 0 (default) or 1", "[config]") {
  Config c;
  REQUIRE(parse({}, &c).is_ok());
  CHECK_FALSE(c.deterministic);
  REQUIRE(parse({{"KOLO_DETERMINISTIC", "1"}}, &c).is_ok());
  CHECK(c.deterministic);
  REQUIRE(parse({{"KOLO_DETERMINISTIC", "0"}}, &c).is_ok());
  CHECK_FALSE(c.deterministic);
  for (const char* bad : {"yes", "2", "", "true"}) {
    Status s = parse({{"KOLO_DETERMINISTIC", bad}}, &c);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.message() == "KOLO_DETERMINISTIC=\"" + std::string(bad) + "\" is not valid: expected 0 or 1");
  }
}
