// UDP heartbeats: core/heartbeat_socket.h.
#include "core/heartbeat_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "core/host_info.h"

namespace kolo {
namespace {

struct Datagram {
  char magic[4];
  uint32_t rank;
  uint64_t token;
};

// The first IPv4 address of interface `name` (0 if none).
uint32_t interface_ipv4(const std::string& name) {
  uint32_t out = 0;
  struct ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return 0;
  for (struct ifaddrs* a = all; a != nullptr && out == 0; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const uint32_t ip = reinterpret_cast<struct sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
    const bool loopback = (ntohl(ip) >> 24) == 127;
    if (name.empty() ? !loopback : name == a->ifa_name) out = ip;
  }
  freeifaddrs(all);
  return out;
}

uint32_t host_name_ipv4() {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(host_name().c_str(), nullptr, &hints, &res) != 0) return 0;
  uint32_t out = 0;
  for (struct addrinfo* r = res; r != nullptr && out == 0; r = r->ai_next) {
    const uint32_t ip = reinterpret_cast<struct sockaddr_in*>(r->ai_addr)->sin_addr.s_addr;
    if ((ntohl(ip) >> 24) != 127) out = ip;
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

uint64_t random_token() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::unique_ptr<HeartbeatSocket> HeartbeatSocket::open() {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return nullptr;
  }
  // Arrival times and drop counts with each datagram (best effort: without them a datagram
  // counts as heard when it is read), and room for a long stop's worth of heartbeats.
  const int on = 1, bytes = 1 << 20;
  (void)setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
  (void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on));
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  return std::unique_ptr<HeartbeatSocket>(new HeartbeatSocket(fd));
}

HeartbeatSocket::~HeartbeatSocket() { close(fd_); }

HeartbeatSocket::Endpoint HeartbeatSocket::local_endpoint(const std::string& interface) const {
  Endpoint e;
  struct sockaddr_in a {};
  socklen_t len = sizeof(a);
  if (getsockname(fd_, reinterpret_cast<struct sockaddr*>(&a), &len) != 0) return e;
  e.port = a.sin_port;
  e.ipv4 = !interface.empty() ? interface_ipv4(interface) : 0;
  if (e.ipv4 == 0) e.ipv4 = host_name_ipv4();
  if (e.ipv4 == 0) e.ipv4 = interface_ipv4("");
  return e;
}

void HeartbeatSocket::set_peers(std::vector<Endpoint> peers, uint64_t token, int rank) {
  peers_ = std::move(peers);
  token_ = token;
  rank_ = rank;
}

void HeartbeatSocket::send(int peer) {
  const Endpoint& e = peers_.at(static_cast<size_t>(peer));
  if (e.ipv4 == 0 || e.port == 0) return;
  Datagram d{{'k', 'o', 'l', 'o'}, static_cast<uint32_t>(rank_), token_};
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = e.ipv4;
  a.sin_port = e.port;
  (void)sendto(fd_, &d, sizeof(d), MSG_DONTWAIT, reinterpret_cast<struct sockaddr*>(&a), sizeof(a));
}

bool HeartbeatSocket::poll(int* from, std::chrono::steady_clock::time_point* arrived) {
  for (;;) {
    Datagram d{};
    struct iovec io {&d, sizeof(d)};
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(sizeof(uint32_t))];
    struct msghdr m {};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd_, &m, MSG_DONTWAIT);
    if (n < 0) return false;  // nothing (EAGAIN) or an error: either way, nothing heard
    const auto steady_now = std::chrono::steady_clock::now();
    auto when = steady_now;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET) continue;
      if (c->cmsg_type == SO_TIMESTAMPNS) {
        struct timespec ts {};
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        // The kernel stamps with the real-time clock: how long ago, carried to the steady one.
        const auto stamped = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
        const auto ago = std::chrono::system_clock::now().time_since_epoch() - stamped;
        if (ago > std::chrono::nanoseconds(0))
          when = steady_now - std::chrono::duration_cast<std::chrono::steady_clock::duration>(ago);
      } else if (c->cmsg_type == SO_RXQ_OVFL) {
        uint32_t drops = 0;
        std::memcpy(&drops, CMSG_DATA(c), sizeof(drops));
        if (drops != drops_seen_) dropped_ = true, drops_seen_ = drops;
      }
    }
    if (n != static_cast<ssize_t>(sizeof(d)) || std::memcmp(d.magic, "kolo", 4) != 0 || d.token != token_ ||
        d.rank >= peers_.size())
      continue;  // not ours
    *from = static_cast<int>(d.rank);
    if (arrived) *arrived = when;
    return true;
  }
}

bool HeartbeatSocket::take_dropped() {
  const bool d = dropped_;
  dropped_ = false;
  return d;
}

}  // namespace kolo
