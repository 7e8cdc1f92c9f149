// Host detection on real (simulated) hosts: test/hosts/run.sh starts this group across
// kolo-hosts namespaces with KOLOTEST_HOSTS=<hosts>x<ranks per host>. Without that variable
// (one machine, no namespaces) the group has nothing to check and passes empty.
//
// Checks: kolo counts the hosts and the ranks on each as launched; ranks kolo groups on one
// host share a hostname and a /dev/shm, ranks on different hosts share neither; and in a
// large allreduce each host sends the tensor once over TCP: every local rank its slice
// (sliced, the default), or the leader all of it (KOLO_CROSS_HOST_ALLREDUCE=leader: the
// others send nothing, where a flat allreduce has every rank send).
#include <dirent.h>
#include <linux/tcp.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "mpi_test_util.h"

using namespace kolo;
using namespace kolo::test;

namespace {

bool expected_layout(int* hosts, int* per_host) {
  const char* v = std::getenv("KOLOTEST_HOSTS");
  return v != nullptr && std::sscanf(v, "%dx%d", hosts, per_host) == 2;
}

std::string my_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Every rank's hostname, in rank order.
std::vector<std::string> all_hostnames() {
  char mine[64] = {};
  std::snprintf(mine, sizeof(mine), "%s", my_hostname().c_str());
  std::vector<char> all(64 * static_cast<size_t>(size()));
  MPI_Allgather(mine, 64, MPI_CHAR, all.data(), 64, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < size(); ++r) out.emplace_back(&all[64 * static_cast<size_t>(r)]);
  return out;
}

// Bytes this process has sent over TCP (tcpi_bytes_sent, retransmissions included), summed over its TCP
// sockets: Open MPI's TCP BTL connections between hosts.
unsigned long long tcp_bytes_sent() {
  unsigned long long total = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (e->d_name[0] == '.' || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int proto = 0;
    socklen_t len = sizeof(proto);
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0 || proto != IPPROTO_TCP) continue;
    struct tcp_info info {};
    len = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
        len >= offsetof(struct tcp_info, tcpi_bytes_sent) + sizeof(info.tcpi_bytes_sent))
      total += info.tcpi_bytes_sent;
  }
  closedir(d);
  return total;
}

}  // namespace

TEST_CASE("hosts: kolo sees the hosts as launched", "[hosts]") {
  int hosts = 0, per_host = 0;
  if (!expected_layout(&hosts, &per_host)) return;
  CHECK(cross_size() == hosts);
  CHECK(local_size() == per_host);
  CHECK(size() == hosts * per_host);
  // Host index and local rank of every rank, to compare with the hostnames.
  int mine[2] = {cross_rank(), local_rank()};
  std::vector<int> all(2 * static_cast<size_t>(size()));
  MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
  const auto names = all_hostnames();
  for (int a = 0; a < size(); ++a) {
    for (int b = a + 1; b < size(); ++b) {
      const bool same_host = all[2 * a] == all[2 * b];
      INFO("ranks " << a << " (" << names[a] << ", host " << all[2 * a] << ") and " << b << " (" << names[b]
                    << ", host " << all[2 * b] << ")");
      CHECK(same_host == (names[a] == names[b]));
      if (same_host) CHECK(all[2 * a + 1] != all[2 * b + 1]);
    }
  }
}

TEST_CASE("hosts: each host has its own /dev/shm, shared by its ranks", "[hosts]") {
  int hosts = 0, per_host = 0;
  if (!expected_layout(&hosts, &per_host)) return;
  long long tag = 0;
  if (rank() == 0) tag = static_cast<long long>(getpid());
  MPI_Bcast(&tag, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  const std::string prefix = "kolotest-" + std::to_string(tag) + "-";
  const std::string mine = "/dev/shm/" + prefix + std::to_string(cross_rank());
  if (local_rank() == 0) std::ofstream(mine) << cross_rank();
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::string> seen;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) seen.emplace_back(e->d_name);
    closedir(d);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (local_rank() == 0) std::remove(mine.c_str());
  INFO("rank " << rank() << " on " << my_hostname() << " sees " << seen.size() << " marker file(s)");
  REQUIRE(seen.size() == 1);
  CHECK("/dev/shm/" + seen[0] == mine);
}

TEST_CASE("hosts: in a large allreduce each host sends the tensor once, split as the cross-host path says",
          "[hosts]") {
  int hosts = 0, per_host = 0;
  if (!expected_layout(&hosts, &per_host) || hosts != 2 || per_host < 2) return;
  const size_t n = 4u << 20;  // 16 MiB of floats
  std::vector<float> x(n, 1.0f);
  allreduce(TensorView::of(x), "hosts.warmup");
  MPI_Barrier(MPI_COMM_WORLD);
  const unsigned long long before = tcp_bytes_sent();
  std::fill(x.begin(), x.end(), 1.0f);
  allreduce(TensorView::of(x), "hosts.measured", {ReduceOp::kSum});
  MPI_Barrier(MPI_COMM_WORLD);
  usleep(200 * 1000);  // what MPI left in the socket buffers goes out
  const unsigned long long after = tcp_bytes_sent();
  CHECK(x[0] == static_cast<float>(size()));
  CHECK(x[n - 1] == static_cast<float>(size()));
  const double ratio = static_cast<double>(after - before) / static_cast<double>(n * sizeof(float));
  INFO("rank " << rank() << " (local rank " << local_rank() << " on " << my_hostname() << ") sent "
               << (after - before) << " bytes over TCP for a " << n * sizeof(float) << "-byte allreduce (" << ratio
               << "x)");
  const char* path = std::getenv("KOLO_CROSS_HOST_ALLREDUCE");
  if (path != nullptr && std::string(path) == "leader") {
    if (local_rank() == 0) {
      // The two leaders exchange the tensor once each way.
      CHECK(ratio > 0.75);
      CHECK(ratio < 1.25);
    } else {
      CHECK(ratio < 0.01);  // shared memory only; a flat allreduce has every rank send
    }
  } else {
    // Sliced (the default): local rank i exchanges slice i (1/per_host of the tensor) with
    // local rank i of the other host, once each way; the host sends the tensor once in all.
    const double share = 1.0 / per_host;
    CHECK(ratio > 0.75 * share);
    CHECK(ratio < 1.25 * share);
  }
}
