// The UDP side channel of heartbeats: a datagram from a peer of this job is heard with the
// peer's rank; one with another job's token, or none, is not.
#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <chrono>
#include <thread>

#include "core/heartbeat_socket.h"

using namespace kolo;

namespace {
bool poll_for(HeartbeatSocket& s, int* from) {
  for (int i = 0; i < 200; ++i) {  // up to 1 s: delivery on this host is immediate
    if (s.poll(from)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}
}  // namespace

TEST_CASE("heartbeat datagrams reach the peer and carry the sender's rank", "[liveness]") {
  auto a = HeartbeatSocket::open(), b = HeartbeatSocket::open(), stranger = HeartbeatSocket::open();
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(stranger);
  HeartbeatSocket::Endpoint ea = a->local_endpoint(""), eb = b->local_endpoint("");
  CHECK(ea.port != 0);
  CHECK(ea.ipv4 != 0);
  // Loopback keeps the test independent of the host's interfaces.
  ea.ipv4 = eb.ipv4 = htonl(INADDR_LOOPBACK);
  a->set_peers({ea, eb}, 42, 0);
  b->set_peers({ea, eb}, 42, 1);
  stranger->set_peers({ea, eb}, 7, 0);  // another job's token
  int from = -1;
  CHECK_FALSE(b->poll(&from));
  a->send(1);
  REQUIRE(poll_for(*b, &from));
  CHECK(from == 0);
  b->send(0);
  REQUIRE(poll_for(*a, &from));
  CHECK(from == 1);
  stranger->send(1);
  CHECK_FALSE(poll_for(*b, &from));
  // A peer without an address is skipped, not an error.
  a->set_peers({ea, HeartbeatSocket::Endpoint{}}, 42, 0);
  a->send(1);
  CHECK_FALSE(b->poll(&from));
}

TEST_CASE("a heartbeat read late carries the kernel's arrival time", "[liveness]") {
  auto a = HeartbeatSocket::open(), b = HeartbeatSocket::open();
  REQUIRE(a);
  REQUIRE(b);
  HeartbeatSocket::Endpoint ea = a->local_endpoint(""), eb = b->local_endpoint("");
  ea.ipv4 = eb.ipv4 = htonl(INADDR_LOOPBACK);
  a->set_peers({ea, eb}, 42, 0);
  b->set_peers({ea, eb}, 42, 1);
  const auto sent = std::chrono::steady_clock::now();
  a->send(1);
  // The receiver is "starved" for 300 ms: the datagram's time is its arrival, not the read.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int from = -1;
  std::chrono::steady_clock::time_point arrived;
  REQUIRE(b->poll(&from, &arrived));
  const auto read = std::chrono::steady_clock::now();
  CHECK(from == 0);
  CHECK(read - arrived >= std::chrono::milliseconds(250));
  CHECK(arrived >= sent - std::chrono::milliseconds(50));  // clock conversion: within 50 ms
  CHECK_FALSE(b->take_dropped());
}
