// Reading and validating the KOLO_* environment (see core/config.h, docs/knobs.md).
#include "core/config.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <set>
#include <type_traits>

#include "core/process_set.h"

extern char** environ;

namespace kolo {
namespace {

Status bad_value(const std::string& name, const std::string& value, const std::string& form) {
  return Status::invalid_argument(name + "=\"" + value + "\" is not valid: expected " + form);
}

// The knobs kolo knows. Keep in step with parse() below and docs/knobs.md.
const std::set<std::string>& known_names() {
  static const std::set<std::string> names = {
      "KOLO_FUSION_THRESHOLD",         "KOLO_CYCLE_TIME",
      "KOLO_CPU_CHUNK_BYTES",          "KOLO_CPU_OPERATIONS",
      "KOLO_LOG_LEVEL",                "KOLO_STALL_CHECK_TIME_SECONDS",
      "KOLO_STALL_SHUTDOWN_TIME_SECONDS", "KOLO_TEST_RANKS_PER_HOST",
      "KOLO_TIMELINE",                 "KOLO_TIMELINE_MARK_CYCLES",
      "KOLO_GPU_OPERATIONS",           "KOLO_AUTOTUNE",
      "KOLO_AUTOTUNE_LOG",             "KOLO_AUTOTUNE_SAMPLES",
      "KOLO_AUTOTUNE_WINDOW",          "KOLO_CACHE_CAPACITY",
      "KOLO_HIERARCHICAL_ALLREDUCE",   "KOLO_SHM_ARENA_BYTES",
      "KOLO_BURST_HOLD_MICROSECONDS",  "KOLO_VERBOSE",
      "KOLO_NETWORK_INTERFACE",        "KOLO_PEER_TIMEOUT_SECONDS",
      "KOLO_NUM_SERVERS",              "KOLO_KVSTORE_BIGARRAY_BOUND",
      "KOLO_TEST_STALL_SECONDS",       "KOLO_PROCESS_SETS",
      "KOLO_FAST_PATH",                "KOLO_CROSS_HOST_ALLREDUCE",
      "KOLO_CROSS_HOST_HALF_WIRE",     "KOLO_DETERMINISTIC",
      "KOLO_WAIT_HELPS",               "KOLO_TEST_FAULT_RANK",
      "KOLO_TEST_LISTENER_GAP_SECONDS", "KOLO_SHM_RESULT_POOL_BYTES",
      "KOLO_BURST_DEFER",              "KOLO_BACKEND",
      "KOLO_GLOO_REDIS",               "KOLO_GLOO_JOB",
      "KOLO_GLOO_GENERATION",          "KOLO_GLOO_TIMEOUT_SECONDS",
      "KOLO_RANK",                     "KOLO_SIZE",
      "KOLO_TEST_DIE_IN_SET_SETUP"};
  return names;
}

// A whole number in [min, max] from `text`, or false.
bool parse_whole(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-')) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// KOLO_BACKEND and what the Gloo backend reads (docs/gloo.md): the Redis server, the job's
// key and generation, the timeout, and this rank's place (KOLO_RANK/KOLO_SIZE, else Open
// MPI's). The Gloo-only values are checked only with KOLO_BACKEND=gloo.
Status parse_transport(const Config::Lookup& lookup, Config* c) {
  if (auto v = lookup("KOLO_BACKEND")) {
    if (*v == "mpi") c->transport = TransportKind::kMpi;
    else if (*v == "gloo") c->transport = TransportKind::kGloo;
    else return bad_value("KOLO_BACKEND", *v, "mpi or gloo");
  }
  if (c->transport != TransportKind::kGloo) return Status::ok();
  auto redis = lookup("KOLO_GLOO_REDIS");
  if (!redis) return Status::invalid_argument("KOLO_BACKEND=gloo needs KOLO_GLOO_REDIS=host:port (the Redis server of the rendezvous; kolo-run --gloo starts one)");
  const size_t colon = redis->rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos || colon == 0 || !parse_whole(redis->substr(colon + 1), 1, 65535, &port))
    return bad_value("KOLO_GLOO_REDIS", *redis, "host:port, such as 127.0.0.1:6379");
  c->gloo_redis_host = redis->substr(0, colon);
  c->gloo_redis_port = static_cast<int>(port);
  if (auto v = lookup("KOLO_GLOO_JOB")) {
    if (v->empty() || v->find_first_of(" /") != std::string::npos)
      return bad_value("KOLO_GLOO_JOB", *v, "a non-empty key without spaces or '/'");
    c->gloo_job = *v;
  } else if (auto id = lookup("OMPI_MCA_ess_base_jobid")) {
    c->gloo_job = "ompi-" + *id;
  } else {
    return Status::invalid_argument("KOLO_BACKEND=gloo needs KOLO_GLOO_JOB (a key the job's ranks share) outside mpirun");
  }
  if (auto v = lookup("KOLO_GLOO_GENERATION"))
    if (!parse_whole(*v, 0, INT64_MAX, &c->gloo_generation))
      return bad_value("KOLO_GLOO_GENERATION", *v, "a whole number >= 0");
  if (auto v = lookup("KOLO_GLOO_TIMEOUT_SECONDS")) {
    double d = 0;
    if (!parse_non_negative(*v, &d) || d < 1 || d > 86400)
      return bad_value("KOLO_GLOO_TIMEOUT_SECONDS", *v, "a number of seconds from 1 to 86400, such as 60");
    c->gloo_timeout_seconds = d;
  }
  // This rank's place: kolo's own variables first, then Open MPI's (mpirun sets them).
  for (auto [rank_name, size_name] : {std::pair{"KOLO_RANK", "KOLO_SIZE"},
                                      std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}}) {
    auto r = lookup(rank_name), s = lookup(size_name);
    if (!r && !s) continue;
    int64_t rank = 0, size = 0;
    if (!s || !parse_whole(*s, 1, 1 << 20, &size))
      return bad_value(size_name, s.value_or(""), std::string("a job size >= 1, set with ") + rank_name);
    if (!r || !parse_whole(*r, 0, size - 1, &rank))
      return bad_value(rank_name, r.value_or(""), "a rank from 0 to " + std::to_string(size - 1));
    c->launcher_rank = static_cast<int>(rank);
    c->launcher_size = static_cast<int>(size);
    return Status::ok();
  }
  return Status::invalid_argument(
      "KOLO_BACKEND=gloo needs this rank's place: KOLO_RANK and KOLO_SIZE, or mpirun's OMPI_COMM_WORLD_RANK/SIZE");
}

}  // namespace

bool parse_bytes(const std::string& text, size_t* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+' || std::isspace(static_cast<unsigned char>(text[0])))
    return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return false;
  std::string suffix(end);
  unsigned long long mul = 1;
  if (suffix == "" || suffix == "B") mul = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KiB") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MiB") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GiB") mul = 1ull << 30;
  else return false;
  if (v > (~0ull) / mul) return false;
  *out = static_cast<size_t>(v * mul);
  return true;
}

bool parse_non_negative(const std::string& text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

Status Config::parse(const Lookup& lookup, Config* out) {
  Config c;
  // A number in [min, max] (a whole one when `whole`) into *field, if the variable is set.
  auto number = [&](const char* name, double min, double max, bool whole, const char* form, auto* field) -> Status {
    auto v = lookup(name);
    if (!v) return Status::ok();
    double d = 0;
    if (!parse_non_negative(*v, &d) || (whole && d != std::floor(d)) || d < min || d > max)
      return bad_value(name, *v, form);
    *field = static_cast<std::remove_pointer_t<decltype(field)>>(d);
    return Status::ok();
  };
  auto bytes = [&](const char* name, size_t* field, size_t min) -> Status {
    auto v = lookup(name);
    if (!v) return Status::ok();
    size_t b = 0;
    if (!parse_bytes(*v, &b) || b < min)
      return bad_value(name, *v, "a byte count" + std::string(min ? " of at least " + std::to_string(min) : "") +
                                     ", such as 4194304, 512K, 4M or 1G");
    *field = b;
    return Status::ok();
  };
  auto seconds = [&](const char* name, double* field, const char* unit, bool positive) -> Status {
    auto v = lookup(name);
    if (!v) return Status::ok();
    double d = 0;
    if (!parse_non_negative(*v, &d) || (positive && d == 0))
      return bad_value(name, *v, std::string(positive ? "a positive" : "a non-negative") + " number of " + unit +
                                     ", such as 0.5 or 60");
    *field = d;
    return Status::ok();
  };
  KOLO_RETURN_IF_ERROR(bytes("KOLO_FUSION_THRESHOLD", &c.fusion_threshold_bytes, 0));
  KOLO_RETURN_IF_ERROR(bytes("KOLO_CPU_CHUNK_BYTES", &c.cpu_chunk_bytes, 4096));
  KOLO_RETURN_IF_ERROR(bytes("KOLO_SHM_RESULT_POOL_BYTES", &c.shm_result_pool_bytes, 0));
  if (auto v = lookup("KOLO_SHM_ARENA_BYTES")) {
    c.shm_arena_auto = *v == "auto";
    if (!c.shm_arena_auto && !parse_bytes(*v, &c.shm_arena_bytes))
      return bad_value("KOLO_SHM_ARENA_BYTES", *v, "auto, or a byte count such as 0 (none), 256M or 1G");
  }
  KOLO_RETURN_IF_ERROR(seconds("KOLO_CYCLE_TIME", &c.cycle_time_ms, "milliseconds", true));
  KOLO_RETURN_IF_ERROR(seconds("KOLO_STALL_CHECK_TIME_SECONDS", &c.stall_check_seconds, "seconds", false));
  KOLO_RETURN_IF_ERROR(seconds("KOLO_STALL_SHUTDOWN_TIME_SECONDS", &c.stall_shutdown_seconds, "seconds", false));
  KOLO_RETURN_IF_ERROR(number("KOLO_PEER_TIMEOUT_SECONDS", 0.1, 86400, false,
                              "a number of seconds from 0.1 to 86400, such as 5", &c.peer_timeout_seconds));
  if (auto v = lookup("KOLO_CPU_OPERATIONS")) {
    if (*v == "auto") c.cpu_operations = CpuOperations::kAuto;
    else if (*v == "mpi") c.cpu_operations = CpuOperations::kMpi;
    else if (*v == "shm") c.cpu_operations = CpuOperations::kShm;
    else return bad_value("KOLO_CPU_OPERATIONS", *v, "one of auto, mpi, shm");
  }
  if (auto v = lookup("KOLO_GPU_OPERATIONS")) {
    if (*v != "auto" && *v != "nccl" && *v != "staged")
      return bad_value("KOLO_GPU_OPERATIONS", *v, "one of auto, nccl, staged");
    c.gpu_operations = *v;
  }
  if (auto v = lookup("KOLO_LOG_LEVEL")) {
    static const char* names[] = {"trace", "debug", "info", "warning", "error"};
    bool found = false;
    for (int i = 0; i < 5; ++i) {
      if (*v == names[i]) {
        c.log_level = static_cast<LogLevel>(i);
        found = true;
      }
    }
    if (!found) return bad_value("KOLO_LOG_LEVEL", *v, "one of trace, debug, info, warning, error");
  }
  KOLO_RETURN_IF_ERROR(number("KOLO_TEST_RANKS_PER_HOST", 0, 1e6, true,
                              "a whole number of ranks per host (0 = real hosts)", &c.ranks_per_host_override));
  KOLO_RETURN_IF_ERROR(number("KOLO_TEST_STALL_SECONDS", 0, 3600, false,
                              "a number of seconds from 0 (off) to 3600", &c.test_stall_seconds));
  KOLO_RETURN_IF_ERROR(number("KOLO_TEST_FAULT_RANK", 0, 1e6, true,
                              "a rank (a whole number >= 0)", &c.test_fault_rank));
  KOLO_RETURN_IF_ERROR(number("KOLO_TEST_DIE_IN_SET_SETUP", 0, 2, true,
                              "1 (as the set-up begins), 2 (after the members' meeting) or 0 (off)",
                              &c.test_die_in_set_setup));
  KOLO_RETURN_IF_ERROR(number("KOLO_TEST_LISTENER_GAP_SECONDS", 0, 60, false,
                              "a number of seconds from 0 (off) to 60", &c.test_listener_gap_seconds));
  KOLO_RETURN_IF_ERROR(number("KOLO_TEST_MPI_HEARTBEAT_STALL_SECONDS", 0, 60, false,
                              "a number of seconds from 0 (off) to 60", &c.test_mpi_heartbeat_stall_seconds));
  if (auto v = lookup("KOLO_TIMELINE")) c.timeline_path = *v;
  if (auto v = lookup("KOLO_TIMELINE_MARK_CYCLES")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_TIMELINE_MARK_CYCLES", *v, "0 or 1");
    c.timeline_mark_cycles = *v == "1";
  }
  if (auto v = lookup("KOLO_JOIN_RULES")) {
    if (*v != "kolo" && *v != "horovod") return bad_value("KOLO_JOIN_RULES", *v, "kolo or horovod");
    c.join_horovod = *v == "horovod";
  }
  if (auto v = lookup("KOLO_HIERARCHICAL_ALLREDUCE")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_HIERARCHICAL_ALLREDUCE", *v, "0 or 1");
    c.hierarchical_allreduce = *v == "1";
  }
  if (auto v = lookup("KOLO_CROSS_HOST_ALLREDUCE")) {
    if (*v != "sliced" && *v != "leader") return bad_value("KOLO_CROSS_HOST_ALLREDUCE", *v, "sliced or leader");
    c.cross_host_sliced = *v == "sliced";
  }
  if (auto v = lookup("KOLO_CROSS_HOST_HALF_WIRE")) {
    if (*v != "16bit" && *v != "float32") return bad_value("KOLO_CROSS_HOST_HALF_WIRE", *v, "16bit or float32");
    c.cross_host_half_wire = *v == "16bit";
  }
  if (auto v = lookup("KOLO_DETERMINISTIC")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_DETERMINISTIC", *v, "0 or 1");
    c.deterministic = *v == "1";
  }
  if (auto v = lookup("KOLO_AUTOTUNE")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_AUTOTUNE", *v, "0 or 1");
    c.autotune = *v == "1";
  }
  if (auto v = lookup("KOLO_AUTOTUNE_LOG")) c.autotune_log = *v;
  if (auto v = lookup("KOLO_FAST_PATH")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_FAST_PATH", *v, "0 or 1");
    c.fast_path = *v == "1";
  }
  if (auto v = lookup("KOLO_BURST_DEFER")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_BURST_DEFER", *v, "0 or 1");
    c.burst_defer = *v == "1";
  }
  if (auto v = lookup("KOLO_WAIT_HELPS")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_WAIT_HELPS", *v, "0 or 1");
    c.wait_helps = *v == "1";
  }
  if (auto v = lookup("KOLO_VERBOSE")) {
    if (*v != "0" && *v != "1") return bad_value("KOLO_VERBOSE", *v, "0 or 1");
    c.verbose = *v == "1";
  }
  if (auto v = lookup("KOLO_NETWORK_INTERFACE")) {
    if (v->empty() || v->size() > 15 || v->find_first_of(" ,/") != std::string::npos)
      return bad_value("KOLO_NETWORK_INTERFACE", *v, "one network interface name, such as eth0 or ib0");
    c.network_interface = *v;
  }
  if (auto v = lookup("OMPI_MCA_btl_tcp_if_include")) c.mpi_tcp_interfaces = *v;
  if (auto v = lookup("KOLO_PROCESS_SETS")) KOLO_RETURN_IF_ERROR(parse_process_sets(*v, &c.process_sets));
  KOLO_RETURN_IF_ERROR(number("KOLO_CACHE_CAPACITY", 0, 1e8, true,
                              "a whole number of entries (0 = off)", &c.cache_capacity));
  KOLO_RETURN_IF_ERROR(number("KOLO_BURST_HOLD_MICROSECONDS", 0, 100000, true,
                              "a whole number of microseconds from 0 (off) to 100000", &c.burst_hold_us));
  KOLO_RETURN_IF_ERROR(number("KOLO_NUM_SERVERS", 0, 1e6, true, "a whole number of server ranks (0 = none)",
                              &c.num_servers));
  KOLO_RETURN_IF_ERROR(number("KOLO_KVSTORE_BIGARRAY_BOUND", 1, 9e15, true,
                             "a whole number of elements of at least 1, such as 1000000", &c.kvstore_bigarray_bound));
  KOLO_RETURN_IF_ERROR(parse_transport(lookup, &c));
  for (auto [name, field] : {std::pair{"KOLO_AUTOTUNE_SAMPLES", &c.autotune_samples},
                              std::pair{"KOLO_AUTOTUNE_WINDOW", &c.autotune_window}})
    KOLO_RETURN_IF_ERROR(number(name, 1, 1e6, true, "a whole number from 1 to 1000000", field));
  *out = c;
  return Status::ok();
}

Status Config::from_env(Config* out) {
  return parse(
      [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        if (!v) return std::nullopt;
        return std::string(v);
      },
      out);
}

std::vector<std::string> Config::unknown_env_names() {
  std::vector<std::string> unknown;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    if (kv.rfind("KOLO_", 0) != 0) continue;
    std::string name = kv.substr(0, kv.find('='));
    if (!known_names().count(name)) unknown.push_back(name);
  }
  return unknown;
}

}  // namespace kolo
